// Streaming POSTs (text or document) read as Server-Sent Events: one at a time, a newer one cancels the running one.
import { hideAlternatives } from "./alternatives.js";
import { authHeaders } from "./api-key.js";
import { showError } from "./messages.js";
import { $, state } from "./state.js";

function setBusy(busy) {
  state.busy = busy;
  $("translate").disabled = busy;
  $("translate").textContent = busy ? "Translating…" : "Translate";
}

function parseEvents(buffer, onEvent) {
  // Splits complete SSE events off the buffer; returns what is left.
  let idx;
  while ((idx = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, idx);
    buffer = buffer.slice(idx + 2);
    let kind = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith("event: ")) kind = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (data) onEvent(kind, JSON.parse(data));
  }
  return buffer;
}

async function readEvents(response, onEvent) {
  // Feeds each Server-Sent Event of a streaming response to onEvent as it arrives.
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), onEvent);
  }
}

export function cancelRunning() {
  if (state.controller) state.controller.abort();
  state.controller = null;
}

export async function postStream(url, { headers = {}, body }, onEvent, afterEvents = async () => {}) {
  // One streaming POST, text or document: a newer one cancels it. The page shows progress until the events end.
  cancelRunning();
  const controller = new AbortController();
  state.controller = controller;
  $("message").textContent = "";
  $("download").hidden = true;
  hideAlternatives();
  const progress = $("progress");
  progress.value = 0; progress.hidden = false;
  setBusy(true);
  try {
    const response = await fetch(url, { method: "POST", headers: { ...headers, ...authHeaders() }, body,
                                        signal: controller.signal });
    if (!response.ok) { showError(response.status, await response.json().catch(() => null)); return; }
    await readEvents(response, (kind, data) => { if (state.controller === controller) onEvent(kind, data); });
    if (state.controller === controller) await afterEvents();
  } catch (err) {
    if (err.name !== "AbortError") $("message").textContent = `The server could not be reached: ${err.message}`;
  } finally {
    if (state.controller === controller) {  // a request that was replaced leaves the page to its successor
      state.controller = null;
      setBusy(false);
      progress.hidden = true;
    }
  }
}
