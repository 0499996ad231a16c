// The text box: translation as you type or on request (streamed), the counter, swap and clear. A busy or starting
// server (429, 503) is asked again by itself after its Retry-After, and a server not reached after a few seconds,
// each time with the latest text.
import { hideAlternatives } from "./alternatives.js";
import { glossaryTerms, showGlossaryReport, storedGlossaryId } from "./glossary.js";
import { clearDocumentReport } from "./documents.js";
import { showStatus } from "./health.js";
import { t, tell } from "./i18n.js";
import { notReady, retryText, say, sentence, showError, showMessage } from "./messages.js";
import { instructions } from "./options.js";
import { languageName, refreshPickers, showDetected } from "./pickers.js";
import { $, state } from "./state.js";
import { cancelRunning, postStream } from "./streaming.js";
import { updateUrl } from "./url-state.js";

// A translation that got no answer is sent again after this many seconds, doubled each time it gets none again.
const UNREACHABLE_FIRST_S = 2;
const UNREACHABLE_MAX_S = 30;
let unreachableWait = UNREACHABLE_FIRST_S;

export function updateCounter() {
  const n = $("input").value.length;
  $("counter").textContent = `${n.toLocaleString()} / ${state.charLimit.toLocaleString()}`;
  $("counter").classList.toggle("over", n > state.charLimit);
}

export async function translate({ typed = false } = {}) {
  // typed: from translate-as-you-type (quiet when there is nothing to do); otherwise the button or Ctrl+Enter.
  clearTimeout(state.typingTimer);
  if (state.retryTimer) showStatus();  // this request goes instead of the pending retry (a press of Translate)
  clearTimeout(state.retryTimer);
  state.retryTimer = null;
  const text = $("input").value;
  if (!text.trim()) {
    cancelRunning();
    if (!typed) showMessage(() => t("nothingToTranslate"));
    return;
  }
  if (text.length > state.charLimit) {
    showError(413, { error: t("overLimit", { n: text.length, limit: state.charLimit }) });
    return;
  }
  const request = { text, source: $("source").value, target: $("target").value,
                    quality: $("quality-best").checked ? "best" : "standard", glossary: glossaryTerms(),
                    glossary_id: storedGlossaryId(), ...instructions() };
  if (typed && state.lastSent === JSON.stringify(request)) return;  // nothing changed since the last translation
  state.lastSent = JSON.stringify(request);
  updateUrl();
  if (!typed) $("output-pane").scrollIntoView({ block: "nearest" });  // on a phone the result is below the text
  $("output").textContent = "";
  showGlossaryReport(null);
  const progress = $("progress");
  await postStream("/api/translate", {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...request, stream: true }),
  }, (kind, body) => {
    unreachableWait = UNREACHABLE_FIRST_S;  // answered
    if (kind === "start") {
      progress.max = Math.max(1, body.segments);
      showDetected(body.detectedLanguage);
      if (body.quality === "best") $("output").textContent = t("translatingCandidates");
    } else if (kind === "candidates") {
      $("output").textContent = t("fusing");
    } else if (kind === "progress" || kind === "token") {
      progress.value = body.done;
      $("output").textContent = body.partial;
    } else if (kind === "done") {
      progress.value = progress.max;
      $("output").textContent = body.translatedText;
      showGlossaryReport(body.glossary);
      say(t("finished", { name: languageName(request.target), text: body.translatedText.slice(0, 300) }));
    } else if (kind === "error") {
      showError(0, body);
    }
  }, { onBusy: retryLater, onUnreachable: retryUnreachable });
}

function retryLater(seconds, body) {
  // Refused with 429 (or 503: starting, restarting): said once, then asked again after Retry-After. For a 429 the
  // status line says so meanwhile, rather than the "Ready" of the last /health.
  unreachableWait = UNREACHABLE_FIRST_S;
  sendAgain(seconds, () => sentence(retryText(seconds, body)));
  if (!notReady(body)) showStatus(seconds);
}

function retryUnreachable(err) {
  // No answer, or one cut off: said, then asked again, sooner at first (a network change, a server restarting)
  // and less often while the server stays away (the status line follows /health meanwhile).
  const seconds = unreachableWait;
  unreachableWait = Math.min(UNREACHABLE_MAX_S, 2 * unreachableWait);
  sendAgain(seconds, () => sentence(t("retrying", { why: t("unreachableClause", { error: err.message }), seconds })));
}

function sendAgain(seconds, message) {
  // One pending retry, with whatever the text is by then: edits meanwhile send nothing of their own
  // (scheduleTyping).
  state.lastSent = null;  // what was not translated goes again, the same text too
  showMessage(message);
  clearTimeout(state.retryTimer);
  state.retryTimer = setTimeout(() => {
    state.retryTimer = null;
    showMessage("");  // the retry goes now (or, the text emptied meanwhile, is not needed)
    showStatus();
    translate({ typed: true });
  }, seconds * 1000);
}

export function languagesChanged() {
  // A new pair: the URL follows, and the text (if any) is translated again as if typed.
  state.detected = $("source").value === "auto" ? state.detected : null;
  if ($("source").value !== "auto") showDetected(null);
  updateUrl();
  scheduleTyping();
}

function scheduleTyping() {
  // Translate as you type: once the typing pauses for the server's frontendTimeout; a newer request cancels the
  // one running. While a busy server's retry is pending, that retry sends the latest text when its time comes.
  clearTimeout(state.typingTimer);
  if (state.retryTimer) return;
  state.typingTimer = setTimeout(() => translate({ typed: true }), state.typingDelay);
}

function clearAll() {
  // Back to an empty page: the text, the translation and every report about them (a document still on its way
  // carries on in its own place).
  cancelRunning();
  clearTimeout(state.typingTimer);
  clearTimeout(state.retryTimer);
  if (state.retryTimer) showStatus();
  state.retryTimer = null;
  state.lastSent = null;
  $("input").value = ""; $("output").textContent = ""; showMessage(""); tell($("note"), "");
  showDetected(null); showGlossaryReport(null); hideAlternatives(); say("");
  clearDocumentReport();
  updateCounter(); updateUrl(); $("input").focus();
}

function swap() {
  const source = $("source"), target = $("target");
  const from = source.value === "auto" ? state.detected : source.value;
  if (!from) {
    showMessage(() => t("nothingToSwap"));
    return;
  }
  showMessage("");
  const to = target.value;
  $("source-filter").value = ""; $("target-filter").value = "";
  refreshPickers();
  source.value = to; target.value = from;
  const out = $("output").textContent;
  if (out) { $("input").value = out; $("output").textContent = ""; updateCounter(); }
  showDetected(null);
  languagesChanged();
}

export function initTextBox() {
  $("input").addEventListener("input", () => { updateCounter(); scheduleTyping(); });
  for (const name of ["style", "background"]) $(name).addEventListener("input", scheduleTyping);
  $("input").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translate(); } });
  $("translate").addEventListener("click", () => translate());
  $("swap").addEventListener("click", swap);
  $("clear").addEventListener("click", clearAll);
}
