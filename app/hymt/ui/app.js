// The translation page: language pickers, streaming translation over Server-Sent Events, files, health status.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { languages: [], charLimit: 20000, busy: false, controller: null, fileName: null, detected: null };
const KEY_STORAGE = "hymt-api-key";

function askForKey(message) {
  // The server requires API keys: the field shows, keeps what is typed in this browser, and is sent as a Bearer.
  $("key-field").hidden = false;
  if (message) { $("message").textContent = message; $("api-key").focus(); }
}

function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

function fillSelect(select, filter, withAuto) {
  const keep = select.value;
  const needle = filter.trim().toLowerCase();
  select.replaceChildren();
  if (withAuto) select.add(new Option("Auto-detect", "auto"));
  for (const lang of state.languages) {
    const label = `${lang.name} · ${lang.native} (${lang.code})`;
    if (needle && !label.toLowerCase().includes(needle) && !lang.chinese.includes(needle)) continue;
    select.add(new Option(label, lang.code));
  }
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}

function refreshPickers() {
  fillSelect($("source"), $("source-filter").value, true);
  fillSelect($("target"), $("target-filter").value, false);
}

function updateCounter() {
  const n = $("input").value.length;
  $("counter").textContent = `${n.toLocaleString()} / ${state.charLimit.toLocaleString()}`;
  $("counter").classList.toggle("over", n > state.charLimit);
}

function showError(status, body) {
  const text = body && body.error ? body.error : `the server answered ${status}`;
  const prefix = { 429: "The server is busy. ", 413: "Too long. ", 503: "Not ready. " }[status] || "";
  $("message").textContent = prefix + text;
}

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

async function translate() {
  const text = $("input").value;
  if (state.busy || !text.trim()) return;
  if (text.length > state.charLimit) { showError(413, { error: `${text.length} characters; the limit is ${state.charLimit}` }); return; }
  $("message").textContent = "";
  $("output").textContent = "";
  $("detected").textContent = "";
  $("download").hidden = true;
  const progress = $("progress");
  progress.value = 0; progress.hidden = false;
  setBusy(true);
  state.controller = new AbortController();
  try {
    const response = await fetch("/api/translate", {
      method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() }, signal: state.controller.signal,
      body: JSON.stringify({ text, source: $("source").value, target: $("target").value, stream: true }),
    });
    if (response.status === 401 || response.status === 403) {
      const body = await response.json().catch(() => null);
      askForKey($("api-key").value ? `This API key was refused: ${body ? body.error : response.status}` : "This server requires an API key: enter it above.");
      return;
    }
    if (!response.ok) { showError(response.status, await response.json().catch(() => null)); return; }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer = parseEvents(buffer + decoder.decode(value, { stream: true }), (kind, body) => {
        if (kind === "start") {
          progress.max = Math.max(1, body.segments);
          if (body.detectedLanguage) showDetected(body.detectedLanguage);
        } else if (kind === "progress" || kind === "token") {
          progress.value = body.done;
          $("output").textContent = body.partial;
        } else if (kind === "done") {
          progress.value = progress.max;
          $("output").textContent = body.translatedText;
          offerDownload(body.translatedText);
        } else if (kind === "error") {
          showError(0, body);
        }
      });
    }
  } catch (err) {
    if (err.name !== "AbortError") $("message").textContent = `Network error: ${err.message}`;
  } finally {
    setBusy(false);
    progress.hidden = true;
  }
}

function showDetected(d) {
  const lang = state.languages.find((l) => l.code === d.language);
  state.detected = d.language;
  $("detected").textContent = lang ? `Detected: ${lang.name} (${Math.round(d.confidence)}%)` : "";
}

function offerDownload(text) {
  if (!state.fileName) return;
  const link = $("download");
  const dot = state.fileName.lastIndexOf(".");
  const base = dot > 0 ? state.fileName.slice(0, dot) : state.fileName;
  const ext = dot > 0 ? state.fileName.slice(dot) : ".txt";
  if (link.href) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([text], { type: "text/plain;charset=utf-8" }));
  link.download = `${base}.${$("target").value}${ext}`;
  link.textContent = `Download ${link.download}`;
  link.hidden = false;
}

async function loadFile(file) {
  if (!/\.(txt|md|srt)$/i.test(file.name)) { showError(400, { error: "only .txt, .md and .srt files" }); return; }
  state.fileName = file.name;
  $("input").value = await file.text();
  updateCounter();
  translate();
}

function swap() {
  const source = $("source"), target = $("target");
  const from = source.value === "auto" ? state.detected : source.value;
  if (!from) return;
  const to = target.value;
  $("source-filter").value = ""; $("target-filter").value = "";
  refreshPickers();
  source.value = to; target.value = from;
  const out = $("output").textContent;
  if (out) { $("input").value = out; $("output").textContent = ""; updateCounter(); }
}

async function pollHealth() {
  try {
    const h = await (await fetch("/health")).json();
    const gpu = h.gpu_memory_total_gb ? `GPU ${h.gpu_memory_used_gb} / ${h.gpu_memory_total_gb} GB` : "CPU";
    const model = String(h.model).split("/").pop();
    $("status").textContent = `${h.status} · ${model} · profile ${h.profile} · ${gpu} · queue ${h.queue_depth}`;
  } catch (err) {
    $("status").textContent = "server unreachable";
  }
}

async function init() {
  const [languages, settings] = await Promise.all([
    fetch("/languages").then((r) => r.json()), fetch("/frontend/settings").then((r) => r.json()),
  ]);
  state.languages = languages;
  state.charLimit = settings.charLimit;
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  $("api-key").addEventListener("change", () => localStorage.setItem(KEY_STORAGE, $("api-key").value.trim()));
  if (settings.keyRequired) askForKey($("api-key").value ? "" : "This server requires an API key: enter it above.");
  refreshPickers();
  $("source").value = "auto";
  $("target").value = "en";
  updateCounter();
  $("source-filter").addEventListener("input", refreshPickers);
  $("target-filter").addEventListener("input", refreshPickers);
  $("input").addEventListener("input", () => { state.fileName = null; updateCounter(); });
  $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); } });
  $("translate").addEventListener("click", translate);
  $("swap").addEventListener("click", swap);
  $("clear").addEventListener("click", () => {
    if (state.controller) state.controller.abort();
    $("input").value = ""; $("output").textContent = ""; $("message").textContent = ""; $("detected").textContent = "";
    $("download").hidden = true; state.fileName = null; updateCounter(); $("input").focus();
  });
  $("copy").addEventListener("click", async () => {
    await navigator.clipboard.writeText($("output").textContent);
    $("copy").textContent = "Copied";
    setTimeout(() => { $("copy").textContent = "Copy"; }, 1500);
  });
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) loadFile(e.target.files[0]); e.target.value = ""; });
  pollHealth();
  setInterval(pollHealth, 5000);
}

init();
