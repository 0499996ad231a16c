// Documents: upload or drop one, translate it whole as a job on the server (its place in the queue, then its
// progress, streamed), then offer the download. A document has its own state and its own place on the page
// (#document, by the upload button, shown in both views while there is one): the text box keeps translating
// beside it, and neither touches the other. A text document's translation is shown in the files view.
import { authHeaders } from "./api-key.js";
import { glossaryTerms, storedGlossaryId } from "./glossary.js";
import { t, tell } from "./i18n.js";
import { errorText, retryText, say, showError } from "./messages.js";
import { instructions } from "./options.js";
import { $, state } from "./state.js";
import { askLater, openStream, readEvents, retryAfter } from "./streaming.js";
import { showView } from "./views.js";

// Documents whose translation is text worth showing on the page as well as offering for download.
const TEXT_FORMATS = [".txt", ".md", ".srt", ".vtt", ".po", ".pot"];
// A job whose stream was lost is asked after every this many seconds (doubled, up to the most, while the server
// is not reached).
const FOLLOW_S = 2;
const FOLLOW_MAX_S = 16;

// The document on its way (one at a time: a newer upload replaces it): { file, ext, form, controller, id,
// retryTimer, result, cancelling, resumes }; null once it has ended.
let current = null;

function show(words, { failed = false } = {}) {
  // words: a function that words the status (as tell() takes it).
  $("document").hidden = false;
  tell($("doc-status"), words);
  $("doc-status").classList.toggle("failed", failed);
}

function running(on) {
  // While a document is on its way: its progress bar and its Cancel button.
  $("doc-progress").hidden = !on;
  $("doc-cancel").hidden = !on;
  $("doc-cancel").disabled = false;
}

function timeLeft(seconds) {
  if (seconds === null || seconds === undefined || !(seconds > 0)) return "";
  return seconds < 90 ? t("secondsLeft", { n: Math.max(1, Math.round(seconds)) })
    : t("minutesLeft", { n: Math.round(seconds / 60) });
}

function ended(doc) {
  // The document is done with, whichever way: the page forgets it (a later one may already have replaced it).
  clearTimeout(doc.retryTimer);
  if (current !== doc) return false;
  current = null;
  running(false);
  return true;
}

function failed(doc, status, body) {
  if (!ended(doc)) return;
  const words = () => t("notTranslated", { name: doc.file.name, error: errorText(status, body) });
  show(words, { failed: true });
  if (status === 401 || status === 403) showError(status, body);  // the API key field asks for a key
  say(words());
}

function cancelled(doc) {
  if (current !== doc) return;
  if (doc.controller) doc.controller.abort();  // the server cancels the job of a stream that closed, too
  ended(doc);
  show(() => t("cancelled", { name: doc.file.name }));
  say(t("cancelledSaid", { name: doc.file.name }));
}

function onEvent(doc, kind, body) {
  const name = doc.file.name, progress = $("doc-progress");
  if (kind === "start") {
    doc.id = body.id;
    progress.max = Math.max(1, body.segments);
    show(() => t("starting", { name, n: body.segments }));
  } else if (doc.cancelling && (kind === "queued" || kind === "progress")) {
    // Cancelling: the status says so until the server answers.
  } else if (kind === "queued") {
    progress.removeAttribute("value");  // indeterminate while it waits
    const ahead = body.position - 1;
    show(() => (ahead > 0 ? t("ahead", { name, n: ahead }) : t("nextInLine", { name })));
  } else if (kind === "progress") {
    progress.max = Math.max(1, body.total);
    progress.value = body.done;
    show(() => t("progress", { name, done: body.done, total: body.total,
                               left: body.done < body.total ? timeLeft(body.seconds_remaining) : "" }));
  } else if (kind === "done") {
    doc.result = body;
  } else if (kind === "error") {
    if (body.error_type === "cancelled") cancelled(doc);
    else if (body.error_type === "draining" && doc.id) doc.resumes = true;  // followed once the stream ends
    else failed(doc, 0, body);
  }
}

async function send(doc) {
  // The upload and its stream of events; a 429 (the document queue is full) or a 503 with Retry-After (the server
  // starting or restarting) is sent again after Retry-After.
  const controller = new AbortController();
  doc.controller = controller;
  running(true);
  $("doc-progress").removeAttribute("value");
  show(() => t("sending", { name: doc.file.name }));
  try {
    const response = await openStream("/api/translate_file", { body: doc.form, signal: controller.signal });
    if (current !== doc) return;
    if (!response.ok) {
      const answer = await response.json().catch(() => null);
      if (current !== doc) return;
      if (!askLater(response)) { failed(doc, response.status, answer); return; }
      const seconds = retryAfter(response);
      show(() => t("sendingRetry", { name: doc.file.name, retry: retryText(seconds, answer) }));
      doc.retryTimer = setTimeout(() => { if (current === doc) send(doc); }, seconds * 1000);
      return;
    }
    await readEvents(response, (kind, body) => { if (current === doc) onEvent(doc, kind, body); });
    if (current !== doc) return;
    if (doc.result) await showResult(doc, doc.result);
    else if (doc.id) follow(doc);
    else failed(doc, 0, { error: t("streamEnded") });
  } catch (err) {
    if (err.name === "AbortError" || current !== doc) return;
    if (doc.id) follow(doc);
    else failed(doc, 0, { error: t("unreachableClause", { error: err.message }) });
  }
}

async function follow(doc) {
  // The stream was lost after the job began (the server restarting, the connection cut): the job is asked after
  // (/api/jobs/{id}) until it ends. The server keeps a job over a restart and resumes it; one whose stream it saw
  // close it has cancelled.
  const name = doc.file.name;
  show(() => t(doc.resumes ? "resuming" : "following", { name }));
  for (let wait = FOLLOW_S; current === doc;) {
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
    if (current !== doc) return;
    let response;
    try {
      response = await fetch(`/api/jobs/${encodeURIComponent(doc.id)}`, { headers: authHeaders() });
    } catch {
      wait = Math.min(FOLLOW_MAX_S, 2 * wait);  // not reached yet: asked again, less often
      continue;
    }
    const job = await response.json().catch(() => null);
    if (current !== doc) return;
    if (askLater(response)) { wait = retryAfter(response); continue; }
    if (!response.ok || !job) { failed(doc, response.status, job); return; }
    wait = FOLLOW_S;
    if (job.status === "done") {
      const url = `/download_file/${encodeURIComponent(job.id)}/${encodeURIComponent(job.name)}`;
      await showResult(doc, { ...job.report, translatedFileUrl: url, name: job.name });
      return;
    }
    if (job.status === "cancelled") {
      if (doc.cancelling) cancelled(doc);
      else failed(doc, 0, { error: t("connectionLost") });
      return;
    }
    if (job.status === "error") { failed(doc, 0, { error: job.error }); return; }
    if (job.status === "queued") onEvent(doc, "queued", { position: job.queue_position });
    else onEvent(doc, "progress", { done: job.segments_done, total: job.segments_total,
                                    seconds_remaining: job.seconds_remaining });
  }
}

async function showResult(doc, body) {
  const link = $("download");
  link.href = body.translatedFileUrl;
  link.download = body.name;
  tell(link, () => t("downloadName", { name: body.name }));
  link.hidden = false;
  ended(doc);
  const fallbacks = body.markup_fallback_segments;
  show(() => t("documentDone", { name: body.name, n: body.segments }) +
    (fallbacks ? t("markupLost", { n: fallbacks }) : ""));
  // A text document's translation is shown in the files view too (the text view's translation is the text's).
  if (TEXT_FORMATS.includes(doc.ext)) {
    const text = await fetch(body.translatedFileUrl).then((r) => (r.ok ? r.text() : null), () => null);
    if (text !== null && current === null) { $("doc-preview").textContent = text; $("doc-preview").hidden = false; }
  }
  say(t("documentReady", { name: body.name }));
}

async function cancelDocument() {
  // Cancel: the job is cancelled on the server (DELETE /api/jobs/{id}); one that ended first keeps its result.
  const doc = current;
  if (!doc) return;
  $("doc-cancel").disabled = true;
  doc.cancelling = true;
  clearTimeout(doc.retryTimer);
  show(() => t("cancelling", { name: doc.file.name }));
  if (doc.id) {
    try {
      const response = await fetch(`/api/jobs/${encodeURIComponent(doc.id)}`, { method: "DELETE", headers: authHeaders() });
      const job = await response.json().catch(() => null);
      if (response.ok && job && job.status !== "cancelled") {  // it ended first: its stream tells how
        doc.cancelling = false;
        return;
      }
    } catch (err) {
      // The server could not be asked: closing the stream cancels the job as well.
    }
  }
  cancelled(doc);
}

export function clearDocumentReport() {
  // Clear: a finished document's report and download go; one still on its way carries on.
  if (current) return;
  $("document").hidden = true;
  tell($("doc-status"), "");
  $("download").hidden = true;
  hidePreview();
}

function hidePreview() {
  $("doc-preview").hidden = true;
  $("doc-preview").textContent = "";
}

function loadFile(file) {
  // Any supported document goes to the server whole, so its structure and markup come back; progress streams.
  const dot = file.name.lastIndexOf(".");
  const ext = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  showView("files");
  if (!state.fileFormats.includes(ext)) {
    showError(415, { error: t("unsupportedFile", { ext: ext || t("thisFile"), formats: state.fileFormats.join(" ") }) });
    return;
  }
  if (current) {  // a newer document replaces the one on its way (its stream closes: the server cancels it)
    const old = current;
    if (old.controller) old.controller.abort();
    ended(old);
  }
  $("download").hidden = true;
  hidePreview();
  const form = new FormData();
  form.append("file", file);
  form.append("source", $("source").value);
  form.append("target", $("target").value);
  // The glossary, style and background apply to a document as to text (a form carries the glossary as JSON).
  const terms = glossaryTerms();
  if (terms.length) form.append("glossary", JSON.stringify(terms));
  if (storedGlossaryId()) form.append("glossary_id", storedGlossaryId());
  for (const [name, value] of Object.entries(instructions())) form.append(name, value);
  current = { file, ext, form, controller: null, id: null, retryTimer: null, result: null, cancelling: false,
              resumes: false };
  send(current);
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

export function initDocuments() {
  $("file").addEventListener("change", (e) => { if (e.target.files[0]) loadFile(e.target.files[0]); e.target.value = ""; });
  $("doc-cancel").addEventListener("click", cancelDocument);
  initDrop();
  tell($("formats"), () => t("formats", { formats: state.fileFormats.join(" ") }));
}
