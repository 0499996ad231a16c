// The translation page's entry point: reads the server's languages and settings, then wires up each part.
import { showAlternatives } from "./alternatives.js";
import { initApiKey } from "./api-key.js";
import { copyOutput } from "./copy.js";
import { initDocuments } from "./documents.js";
import { initGlossary } from "./glossary.js";
import { pollHealth } from "./health.js";
import { initPickers, refreshPickers } from "./pickers.js";
import { $, state } from "./state.js";
import { initTextBox, languagesChanged, translate, updateCounter } from "./translate-text.js";
import { readUrl } from "./url-state.js";

async function init() {
  const [languages, settings] = await Promise.all([
    fetch("/languages").then((r) => r.json()), fetch("/frontend/settings").then((r) => r.json()),
  ]);
  state.languages = languages;
  state.charLimit = settings.charLimit;
  if (settings.filesTranslation) state.fileFormats = settings.supportedFilesFormat;
  $("file").accept = state.fileFormats.join(",");
  initApiKey(settings);
  state.typingDelay = Number(settings.frontendTimeout) || state.typingDelay;
  $("source").add(new Option("Auto-detect", "auto"));
  $("target").add(new Option("English", "en"));
  refreshPickers();
  readUrl();
  refreshPickers();
  updateCounter();
  initPickers(languagesChanged);
  initTextBox();
  $("copy").addEventListener("click", copyOutput);
  $("more").addEventListener("click", showAlternatives);
  initDocuments();
  initGlossary();
  pollHealth();
  setInterval(pollHealth, 5000);
  if ($("input").value.trim()) translate({ typed: true });  // a shared URL with text: its translation
}

init();
