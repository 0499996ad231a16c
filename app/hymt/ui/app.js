// The translation page: language pickers, streaming translation over Server-Sent Events, files, health status.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { languages: [], charLimit: 20000, busy: false, controller: null, detected: null,
  fileFormats: [".txt", ".md", ".srt"], typingDelay: 500, typingTimer: null, lastSent: null };
// A detection less sure than this is shown as a guess.
const GUESS_BELOW = 60;
// The shareable URL carries the text up to this length (longer ones carry the languages only).
const URL_TEXT_MAX = 2000;
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

function languageLabel(code) {
  if (code === "auto") return "Auto-detect";
  const lang = state.languages.find((l) => l.code === code);
  return lang ? `${lang.name} · ${lang.native} (${lang.code})` : code;
}

function fillSelect(select, filter, withAuto, hint) {
  // The search narrows the list; the selected language stays selected (listed first) until one is picked.
  const keep = select.value || (withAuto ? "auto" : "en");
  const needle = filter.trim().toLowerCase();
  const codes = (withAuto ? ["auto"] : []).concat(state.languages.map((l) => l.code));
  const matches = codes.filter((code) => !needle || languageLabel(code).toLowerCase().includes(needle) ||
    (state.languages.find((l) => l.code === code) || { chinese: "" }).chinese.includes(needle));
  select.replaceChildren();
  if (!matches.includes(keep)) select.add(new Option(`${languageLabel(keep)} (selected)`, keep));
  for (const code of matches) select.add(new Option(languageLabel(code), code));
  select.value = keep;
  const found = matches.filter((c) => c !== "auto").length;
  hint.textContent = !needle ? "" : found ? `${found} ${found === 1 ? "match" : "matches"}: pick from the list ` +
    "(Enter: the first)" : `No language matches “${filter.trim()}”`;
  return matches;
}

function refreshPickers() {
  fillSelect($("source"), $("source-filter").value, true, $("source-hint"));
  fillSelect($("target"), $("target-filter").value, false, $("target-hint"));
}

function pickFirstMatch(select, filter, withAuto, hint) {
  // Enter in a search box: the first matching language is picked, as if chosen from the list.
  const first = fillSelect(select, filter.value, withAuto, hint).find((c) => c !== select.value);
  if (!first) return;
  select.value = first;
  filter.value = "";
  fillSelect(select, "", withAuto, hint);
  languagesChanged();
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

function say(text) {
  // The one place screen readers hear from: once per finished translation (the output itself is not live).
  $("announce").textContent = text;
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

function cancelRunning() {
  if (state.controller) state.controller.abort();
  state.controller = null;
}

async function postStream(url, { headers = {}, body }, onEvent, afterEvents = async () => {}) {
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

async function translate({ typed = false } = {}) {
  // typed: from translate-as-you-type (quiet when there is nothing to do); otherwise the button or Ctrl+Enter.
  clearTimeout(state.typingTimer);
  const text = $("input").value;
  if (!text.trim()) {
    cancelRunning();
    if (!typed) $("message").textContent = "Nothing to translate yet: type or paste some text first.";
    return;
  }
  if (text.length > state.charLimit) { showError(413, { error: `${text.length} characters; the limit is ${state.charLimit}` }); return; }
  const request = { text, source: $("source").value, target: $("target").value,
                    quality: $("quality-best").checked ? "best" : "standard", glossary: glossaryTerms(),
                    ...instructions() };
  if (typed && state.lastSent === JSON.stringify(request)) return;  // nothing changed since the last translation
  state.lastSent = JSON.stringify(request);
  updateUrl();
  if (!typed) $("output-pane").scrollIntoView({ block: "nearest" });  // on a phone the result is below the text
  $("output").textContent = "";
  showGlossaryReport(null);
  const progress = $("progress");
  const targetName = (state.languages.find((l) => l.code === request.target) || { name: request.target }).name;
  await postStream("/api/translate", {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...request, stream: true }),
  }, (kind, body) => {
    if (kind === "start") {
      progress.max = Math.max(1, body.segments);
      showDetected(body.detectedLanguage);
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
      say(`Translation into ${targetName} finished: ${body.translatedText.slice(0, 300)}`);
    } else if (kind === "error") {
      showError(0, body);
    }
  });
}

function showDetected(d) {
  // Beside the source picker: what auto-detection found, a low confidence shown as a guess.
  const lang = d && state.languages.find((l) => l.code === d.language);
  state.detected = lang ? d.language : null;
  const el = $("detected");
  el.classList.toggle("guess", Boolean(lang) && d.confidence < GUESS_BELOW);
  if (!d) { el.textContent = ""; return; }
  if (!lang) { el.textContent = "Detected: not sure which language this is"; return; }
  const pct = Math.round(d.confidence);
  el.textContent = d.confidence < GUESS_BELOW ? `Detected: perhaps ${lang.name} (a guess, ${pct}%)`
    : `Detected: ${lang.name} (${pct}%)`;
}

function updateUrl() {
  // The address carries the languages and (when not too long) the text, so it can be shared or bookmarked.
  const params = new URLSearchParams({ source: $("source").value, target: $("target").value });
  const text = $("input").value;
  if (text && text.length <= URL_TEXT_MAX) params.set("q", text);
  history.replaceState(null, "", `${location.pathname}?${params}`);
}

function readUrl() {
  const params = new URLSearchParams(location.search);
  const known = (code, auto) => (auto && code === "auto") || state.languages.some((l) => l.code === code);
  if (known(params.get("source"), true)) $("source").value = params.get("source");
  if (known(params.get("target"), false)) $("target").value = params.get("target");
  if (params.get("q")) $("input").value = params.get("q");
}

function languagesChanged() {
  // A new pair: the URL follows, and the text (if any) is translated again as if typed.
  state.detected = $("source").value === "auto" ? state.detected : null;
  if ($("source").value !== "auto") showDetected(null);
  updateUrl();
  scheduleTyping();
}

function scheduleTyping() {
  // Translate as you type: once the typing pauses for the server's frontendTimeout; a newer request cancels the
  // one running.
  clearTimeout(state.typingTimer);
  state.typingTimer = setTimeout(() => translate({ typed: true }), state.typingDelay);
}

async function loadFile(file) {
  // Any supported document goes to the server whole, so its structure and markup come back; progress streams.
  const dot = file.name.lastIndexOf(".");
  const ext = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  if (!state.fileFormats.includes(ext)) {
    showError(415, { error: `${ext || "this file"} is not supported; supported: ${state.fileFormats.join(" ")}` });
    return;
  }
  clearTimeout(state.typingTimer);
  state.lastSent = null;
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
  say(`${body.name} is translated and ready to download.`);
}

function hideAlternatives() {
  $("alternatives").hidden = true;
  $("alternatives").replaceChildren();
}

async function showAlternatives() {
  // LibreTranslate's alternatives: other translations of the same text, best first; picking one shows it.
  const text = $("input").value;
  if (!text.trim() || !$("output").textContent) {
    $("message").textContent = "Translate a text first; then other translations of it can be shown.";
    return;
  }
  $("message").textContent = "";
  $("more").disabled = true;
  $("note").textContent = "Looking for other translations…";
  try {
    const response = await fetch("/translate", {
      method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify({ q: text, source: $("source").value, target: $("target").value, alternatives: 3,
                             glossary: glossaryTerms(), ...instructions() }) });
    const body = await response.json().catch(() => null);
    if (!response.ok) { showError(response.status, body); return; }
    const list = $("alternatives");
    list.replaceChildren();
    for (const alt of [body.translatedText, ...body.alternatives]) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = alt;
      button.addEventListener("click", () => { $("output").textContent = alt; say("Translation replaced."); });
      list.appendChild(document.createElement("li")).append(button);
    }
    list.hidden = false;
    say(`${body.alternatives.length + 1} translations to choose from, the best first.`);
  } catch (err) {
    $("message").textContent = `The server could not be reached: ${err.message}`;
  } finally {
    $("more").disabled = false;
    $("note").textContent = "";
  }
}

function clearAll() {
  // Back to an empty page: the text, the translation and every report about them.
  cancelRunning();
  clearTimeout(state.typingTimer);
  state.lastSent = null;
  $("input").value = ""; $("output").textContent = ""; $("message").textContent = ""; $("note").textContent = "";
  showDetected(null); showGlossaryReport(null); hideAlternatives(); say("");
  $("download").hidden = true;
  updateCounter(); updateUrl(); $("input").focus();
}

async function copyOutput() {
  // navigator.clipboard exists only in secure contexts (HTTPS, localhost); over plain HTTP on a LAN the page
  // copies through a selection instead, and says so when the browser refuses both.
  const text = $("output").textContent;
  if (!text) { $("message").textContent = "Nothing to copy yet: translate something first."; return; }
  let copied = false;
  if (navigator.clipboard && window.isSecureContext) {
    copied = await navigator.clipboard.writeText(text).then(() => true, () => false);
  }
  if (!copied) copied = copyBySelection(text);
  if (copied) {
    $("copy").textContent = "Copied";
    setTimeout(() => { $("copy").textContent = "Copy"; }, 1500);
    return;
  }
  const range = document.createRange();
  range.selectNodeContents($("output"));
  getSelection().removeAllRanges(); getSelection().addRange(range);
  $("message").textContent = "This browser does not let the page copy here: the translation is selected, " +
    "press Ctrl+C (⌘C) to copy it.";
}

function copyBySelection(text) {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed"; area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
  area.remove();
  return ok;
}

function swap() {
  const source = $("source"), target = $("target");
  const from = source.value === "auto" ? state.detected : source.value;
  if (!from) {
    $("message").textContent = "Nothing to swap yet: the source language is detected with the first " +
      "translation; translate first, or pick the source language.";
    return;
  }
  $("message").textContent = "";
  const to = target.value;
  $("source-filter").value = ""; $("target-filter").value = "";
  refreshPickers();
  source.value = to; target.value = from;
  const out = $("output").textContent;
  if (out) { $("input").value = out; $("output").textContent = ""; updateCounter(); }
  showDetected(null);
  languagesChanged();
}

async function pollHealth() {
  try {
    const h = await (await fetch("/health")).json();
    const gpu = h.gpu_memory_total_gb ? `on the GPU (${h.gpu_memory_used_gb} of ${h.gpu_memory_total_gb} GB)`
      : "on the CPU";
    if (h.model_family) {
      $("model").textContent = h.model_family.name;
      $("license").textContent = `License: ${h.model_family.license}`;
    }
    showInstructions(h.model_family);
    showQuality(h.quality);
    const waiting = h.queue_depth ? `, ${h.queue_depth} sentences waiting` : "";
    const words = {
      healthy: `Ready: translating ${gpu}, profile ${h.profile}${waiting}`,
      degraded: `Busy: translations may be slow${waiting} (profile ${h.profile})`,
      loading: `Starting: ${h.phase || "loading the model"}… translations can be typed meanwhile`,
      draining: "Shutting down: new translations are refused",
      unhealthy: `Not working: ${h.error || "the server cannot translate right now"}`,
    };
    $("status").textContent = words[h.status] || h.status;
  } catch (err) {
    $("status").textContent = "The server cannot be reached: check that it is running";
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

function showInstructions(family) {
  // Style and background fields only where the model has official prompts for them (the server refuses them else).
  for (const name of ["style", "background"]) $(`${name}-field`).hidden = !(family && family[`${name}_prompt`]);
  $("instructions").hidden = $("style-field").hidden && $("background-field").hidden;
}

function instructions() {
  // The style and background filled in, where offered; one at a time (no official prompt combines them).
  for (const name of ["style", "background"]) {
    const value = $(name).value.trim();
    if (!$(`${name}-field`).hidden && value) return { [name]: value };
  }
  return {};
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
  state.typingDelay = Number(settings.frontendTimeout) || state.typingDelay;
  $("source").add(new Option("Auto-detect", "auto"));
  $("target").add(new Option("English", "en"));
  refreshPickers();
  readUrl();
  refreshPickers();
  updateCounter();
  for (const [select, filter, hint, auto] of [["source", "source-filter", "source-hint", true],
                                              ["target", "target-filter", "target-hint", false]]) {
    $(filter).addEventListener("input", refreshPickers);
    $(filter).addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); pickFirstMatch($(select), $(filter), auto, $(hint)); }
    });
    $(select).addEventListener("change", () => { $(filter).value = ""; refreshPickers(); languagesChanged(); });
  }
  $("input").addEventListener("input", () => { updateCounter(); scheduleTyping(); });
  for (const name of ["style", "background"]) $(name).addEventListener("input", scheduleTyping);
  $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); } });
  $("translate").addEventListener("click", () => translate());
  $("swap").addEventListener("click", swap);
  $("clear").addEventListener("click", clearAll);
  $("copy").addEventListener("click", copyOutput);
  $("more").addEventListener("click", showAlternatives);
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) loadFile(e.target.files[0]); e.target.value = ""; });
  initDrop();
  initGlossary();
  pollHealth();
  setInterval(pollHealth, 5000);
  if ($("input").value.trim()) translate({ typed: true });  // a shared URL with text: its translation
}

function initDrop() {
  // A document dropped anywhere on the text pane is translated like an upload.
  const pane = $("input-pane");
  pane.addEventListener("dragover", (e) => {
    if (![...e.dataTransfer.types].includes("Files")) return;
    e.preventDefault(); pane.classList.add("dropping");
  });
  pane.addEventListener("dragleave", () => pane.classList.remove("dropping"));
  pane.addEventListener("drop", (e) => {
    pane.classList.remove("dropping");
    if (!e.dataTransfer.files.length) return;
    e.preventDefault();
    loadFile(e.dataTransfer.files[0]);
  });
}

init();
