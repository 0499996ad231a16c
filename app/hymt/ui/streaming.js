// Streaming POSTs read as Server-Sent Events. The text's requests go one at a time (a newer one cancels the
// running one) through postStream; a document reads its own stream (documents.js) beside them.
import { hideAlternatives } from "./alternatives.js";
import { authHeaders } from "./api-key.js";
import { t, tell } from "./i18n.js";
import { showError, showMessage } from "./messages.js";
import { $, state } from "./state.js";

// Retry-After beyond this (or unreadable) is taken as this many seconds: the page asks again by itself.
const RETRY_MAX_S = 300;
const RETRY_DEFAULT_S = 2;

export function setBusy(busy) {
  state.busy = busy;
  $("translate").disabled = busy;
  tell($("translate"), () => t(busy ? "translating" : "translate"));
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

export async function readEvents(response, onEvent) {
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

export function openStream(url, { headers = {}, body, signal }) {
  // The POST of a stream, with the API key where one is entered.
  return fetch(url, { method: "POST", headers: { ...headers, ...authHeaders() }, body, signal });
}

export function askLater(response) {
  // A refusal for now: busy (429), or starting, restarting or shutting down (503 with Retry-After).
  return response.status === 429 || (response.status === 503 && response.headers.has("Retry-After"));
}

export function retryAfter(response) {
  // Retry-After in whole seconds (a number or an HTTP date), at least 1.
  const header = response.headers.get("Retry-After");
  let seconds = Number(header);
  if (header && !Number.isFinite(seconds)) seconds = (Date.parse(header) - Date.now()) / 1000;
  if (!header || !Number.isFinite(seconds)) seconds = RETRY_DEFAULT_S;
  return Math.min(RETRY_MAX_S, Math.max(1, Math.ceil(seconds)));
}

export function cancelRunning() {
  if (state.controller) state.controller.abort();
  state.controller = null;
}

export async function postStream(url, { headers = {}, body }, onEvent, { onBusy, onUnreachable } = {}) {
  // One streaming POST of the text: a newer one cancels it. The page shows progress until the events end. A 429,
  // or a 503 with Retry-After (starting, restarting, shutting down), goes to onBusy(seconds, answer) where given
  // (the caller asks again later), else it is shown like any refusal.
  // No answer, or one cut off (a network change, the server restarting), goes to onUnreachable(error) where given.
  cancelRunning();
  const controller = new AbortController();
  state.controller = controller;
  showMessage("");
  hideAlternatives();
  const progress = $("progress");
  progress.value = 0; progress.hidden = false;
  setBusy(true);
  try {
    const response = await openStream(url, { headers, body, signal: controller.signal });
    if (!response.ok) {
      const answer = await response.json().catch(() => null);
      if (state.controller !== controller) return;
      if (askLater(response) && onBusy) onBusy(retryAfter(response), answer);
      else showError(response.status, answer);
      return;
    }
    await readEvents(response, (kind, data) => { if (state.controller === controller) onEvent(kind, data); });
  } catch (err) {
    if (err.name !== "AbortError" && state.controller === controller) {
      if (onUnreachable) onUnreachable(err);
      else showMessage(() => t("unreachable", { error: err.message }));
    }
  } finally {
    if (state.controller === controller) {  // a request that was replaced leaves the page to its successor
      state.controller = null;
      setBusy(false);
      progress.hidden = true;
    }
  }
}
