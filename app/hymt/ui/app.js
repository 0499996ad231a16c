// The translation page: language pickers, streaming translation over Server-Sent Events, files, health status.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { languages: [], charLimit: 20000, busy: false, controller: null, detected: null,
  fileFormats: [".txt", ".md", ".srt"] };
// Documents whose translation is text worth showing on the page as well as offering for download.
const TEXT_FORMATS = [".txt", ".md", ".srt", ".vtt", ".po", ".pot"];
const GLOSSARY_KEY = "hymt.glossary";  // sessionStorage: the glossary lives as long as the tab
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
  if (status === 401 || status === 403) {
    askForKey($("api-key").value ? `This API key was refused: ${text}` : "This server requires an API key: enter it above.");
    return;
  }
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

async function postStream(url, { headers = {}, body }, onEvent, afterEvents = async () => {}) {
  // One streaming POST, text or document: the page is busy and shows progress until the events end or fail.
  $("message").textContent = "";
  $("detected").textContent = "";
  $("download").hidden = true;
  const progress = $("progress");
  progress.value = 0; progress.hidden = false;
  setBusy(true);
  state.controller = new AbortController();
  try {
    const response = await fetch(url, { method: "POST", headers: { ...headers, ...authHeaders() }, body,
                                        signal: state.controller.signal });
    if (!response.ok) { showError(response.status, await response.json().catch(() => null)); return; }
    await readEvents(response, onEvent);
    await afterEvents();
  } catch (err) {
    if (err.name !== "AbortError") $("message").textContent = `Network error: ${err.message}`;
  } finally {
    setBusy(false);
    progress.hidden = true;
  }
}

async function translate() {
  const text = $("input").value;
  if (state.busy || !text.trim()) return;
  if (text.length > state.charLimit) { showError(413, { error: `${text.length} characters; the limit is ${state.charLimit}` }); return; }
  $("output").textContent = "";
  showGlossaryReport(null);
  const progress = $("progress");
  await postStream("/api/translate", {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ text, source: $("source").value, target: $("target").value, stream: true,
                           quality: $("quality-best").checked ? "best" : "standard", glossary: glossaryTerms() }),
  }, (kind, body) => {
    if (kind === "start") {
      progress.max = Math.max(1, body.segments);
      if (body.detectedLanguage) showDetected(body.detectedLanguage);
      if (body.quality === "best") $("output").textContent = "Translating six candidates…";
    } else if (kind === "candidates") {
      $("output").textContent = "Fusing the candidates…";
    } else if (kind === "progress" || kind === "token") {
      progress.value = body.done;
      $("output").textContent = body.partial;
    } else if (kind === "done") {
      progress.value = progress.max;
      $("output").textContent = body.translatedText;
      showGlossaryReport(body.glossary);
    } else if (kind === "error") {
      showError(0, body);
    }
  });
}

function showDetected(d) {
  const lang = state.languages.find((l) => l.code === d.language);
  state.detected = d.language;
  $("detected").textContent = lang ? `Detected: ${lang.name} (${Math.round(d.confidence)}%)` : "";
}

async function loadFile(file) {
  // Any supported document goes to the server whole, so its structure and markup come back; progress streams.
  const dot = file.name.lastIndexOf(".");
  const ext = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  if (!state.fileFormats.includes(ext)) {
    showError(415, { error: `${ext || "this file"} is not supported; supported: ${state.fileFormats.join(" ")}` });
    return;
  }
  if (state.busy) return;
  $("output").textContent = `Translating ${file.name}…`;
  const progress = $("progress");
  const form = new FormData();
  form.append("file", file);
  form.append("source", $("source").value);
  form.append("target", $("target").value);
  let finished = null;
  await postStream("/api/translate_file", { body: form }, (kind, body) => {
    if (kind === "start") {
      progress.max = Math.max(1, body.segments);
    } else if (kind === "progress") {
      progress.value = body.done;
      $("output").textContent = `Translating ${file.name}: ${body.done} / ${body.total} segments`;
    } else if (kind === "done") {
      finished = body;
    } else if (kind === "error") {
      showError(0, body);
    }
  }, async () => { if (finished) await showFileResult(finished, ext); });
}

async function showFileResult(body, ext) {
  const link = $("download");
  link.href = body.translatedFileUrl;
  link.download = body.name;
  link.textContent = `Download ${body.name}`;
  link.hidden = false;
  const fallbacks = body.markup_fallback_segments;
  $("output").textContent = TEXT_FORMATS.includes(ext) ? await (await fetch(body.translatedFileUrl)).text()
    : `${body.name}: ${body.segments} segments translated.`;
  if (fallbacks) $("message").textContent = `${fallbacks} segment(s) lost their inline markup in translation: ` +
    "their formatting now covers the whole segment.";
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
    if (h.model_family) $("model").textContent = h.model_family.name;
    showQuality(h.quality);
    $("status").textContent = `${h.status} · ${model} · profile ${h.profile} · ${gpu} · queue ${h.queue_depth}`;
  } catch (err) {
    $("status").textContent = "server unreachable";
  }
}

function showQuality(quality) {
  if (!quality) return;
  const box = $("quality-best");
  box.disabled = !quality.best;
  if (!quality.best) box.checked = false;
  $("quality-note").textContent = quality.best
    ? `Six translations fused into one by Hunyuan-MT-Chimera-7B: about seven times the work of one translation, ` +
      `and the text appears when it is done.`
    : `Not available here: ${quality.reason}`;
}

function glossaryRow(source = "", target = "") {
  const row = document.createElement("tr");
  for (const [value, label] of [[source, "Source term"], [target, "Translation"]]) {
    const input = document.createElement("input");
    input.value = value;
    input.setAttribute("aria-label", label);
    input.addEventListener("input", saveGlossary);
    row.insertCell().append(input);
  }
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "✕";
  remove.setAttribute("aria-label", "Remove term");
  remove.addEventListener("click", () => { row.remove(); saveGlossary(); });
  row.insertCell().append(remove);
  $("glossary-rows").append(row);
  return row;
}

function glossaryTerms() {
  const terms = [];
  for (const row of $("glossary-rows").rows) {
    const [source, target] = [...row.querySelectorAll("input")].map((i) => i.value.trim());
    if (source && target) terms.push({ source, target });
  }
  return terms;
}

function saveGlossary() {
  const terms = glossaryTerms();
  sessionStorage.setItem(GLOSSARY_KEY, JSON.stringify(terms));
  $("glossary-count").textContent = `(${terms.length} ${terms.length === 1 ? "term" : "terms"})`;
}

function parseTermFile(name, text) {
  // Two columns, source and translation; a first row of language codes or column names is a header.
  const sep = /\.csv$/i.test(name) ? "," : "\t";
  const codes = new Set(state.languages.map((l) => l.code.toLowerCase()));
  const rows = text.split(/\r?\n/).filter((line) => line.trim()).map((line) =>
    line.split(sep).map((cell) => cell.trim().replace(/^"(.*)"$/, "$1")));
  if (rows.length && rows[0].length >= 2 &&
      rows[0].slice(0, 2).every((c) => codes.has(c.toLowerCase()) || /^(source|target|term|translation)$/i.test(c))) {
    rows.shift();
  }
  return rows.filter((r) => r.length >= 2 && r[0] && r[1]);
}

async function importGlossary(file) {
  const rows = parseTermFile(file.name, await file.text());
  if (!rows.length) { showError(400, { error: `${file.name} has no rows of two columns (term, translation)` }); return; }
  for (const [source, target] of rows) glossaryRow(source, target);
  saveGlossary();
  $("glossary").open = true;
}

function showGlossaryReport(report) {
  const el = $("glossary-report");
  el.classList.remove("missed");
  if (!report) { el.textContent = ""; return; }
  if (!report.misses.length) {
    el.textContent = `Glossary: ${report.terms_applied} terms applied, all found in the translation.`;
    return;
  }
  const missed = report.misses.map((m) => `segment ${m.segment + 1}: ` +
    m.missing.map((t) => `${t.source} → ${t.target}`).join(", "));
  el.textContent = `Glossary: ${report.terms_applied} terms applied; missed (after a retry) in ${missed.join("; ")}`;
  el.classList.add("missed");
}

function initGlossary() {
  for (const { source, target } of JSON.parse(sessionStorage.getItem(GLOSSARY_KEY) || "[]")) glossaryRow(source, target);
  saveGlossary();
  $("glossary-add").addEventListener("click", () => { glossaryRow().querySelector("input").focus(); });
  $("glossary-clear").addEventListener("click", () => { $("glossary-rows").replaceChildren(); saveGlossary(); });
  $("glossary-file").addEventListener("change", (e) => { if (e.target.files[0]) importGlossary(e.target.files[0]); e.target.value = ""; });
}

async function init() {
  const [languages, settings] = await Promise.all([
    fetch("/languages").then((r) => r.json()), fetch("/frontend/settings").then((r) => r.json()),
  ]);
  state.languages = languages;
  state.charLimit = settings.charLimit;
  if (settings.filesTranslation) state.fileFormats = settings.supportedFilesFormat;
  $("file").accept = state.fileFormats.join(",");
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  $("api-key").addEventListener("change", () => localStorage.setItem(KEY_STORAGE, $("api-key").value.trim()));
  if (settings.keyRequired) askForKey($("api-key").value ? "" : "This server requires an API key: enter it above.");
  refreshPickers();
  $("source").value = "auto";
  $("target").value = "en";
  updateCounter();
  $("source-filter").addEventListener("input", refreshPickers);
  $("target-filter").addEventListener("input", refreshPickers);
  $("input").addEventListener("input", updateCounter);
  $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); } });
  $("translate").addEventListener("click", translate);
  $("swap").addEventListener("click", swap);
  $("clear").addEventListener("click", () => {
    if (state.controller) state.controller.abort();
    $("input").value = ""; $("output").textContent = ""; $("message").textContent = ""; $("detected").textContent = "";
    $("download").hidden = true; updateCounter(); $("input").focus();
  });
  $("copy").addEventListener("click", async () => {
    await navigator.clipboard.writeText($("output").textContent);
    $("copy").textContent = "Copied";
    setTimeout(() => { $("copy").textContent = "Copy"; }, 1500);
  });
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) loadFile(e.target.files[0]); e.target.value = ""; });
  initGlossary();
  pollHealth();
  setInterval(pollHealth, 5000);
}

init();
