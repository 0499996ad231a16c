// Documents: upload or drop one, translate it whole with streamed progress, then offer the download.
import { glossaryTerms } from "./glossary.js";
import { say, showError } from "./messages.js";
import { instructions } from "./options.js";
import { $, state } from "./state.js";
import { postStream } from "./streaming.js";

// Documents whose translation is text worth showing on the page as well as offering for download.
const TEXT_FORMATS = [".txt", ".md", ".srt", ".vtt", ".po", ".pot"];

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
  // The glossary, style and background apply to a document as to text (a form carries the glossary as JSON).
  const terms = glossaryTerms();
  if (terms.length) form.append("glossary", JSON.stringify(terms));
  for (const [name, value] of Object.entries(instructions())) form.append(name, value);
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
  initDrop();
}
