// The translation page's entry point: its theme and language first, then the server's languages and settings,
// then each part wired up.
import { showAlternatives } from "./alternatives.js";
import { initApiKey } from "./api-key.js";
import { copyOutput } from "./copy.js";
import { initDocuments } from "./documents.js";
import { initGlossary } from "./glossary.js";
import { pollHealth } from "./health.js";
import { initLanguage, onLanguage, t, tell } from "./i18n.js";
import { initPickers, refreshPickers } from "./pickers.js";
import { $, state } from "./state.js";
import { setBusy } from "./streaming.js";
import { initTheme } from "./theme.js";
import { initTextBox, languagesChanged, translate, updateCounter } from "./translate-text.js";
import { readUrl } from "./url-state.js";
import { initViews } from "./views.js";

// The server's JSON at `path`, asked again until it comes: a server starting, restarting or busy answers with an
// error or not at all meanwhile, and the page would otherwise stay empty. Each second at first, then every five.
async function serverJson(path) {
  for (let wait = 1000; ; wait = Math.min(2 * wait, 5000)) {
    try {
      const response = await fetch(path);
      if (response.ok) return await response.json();
    } catch { /* not reachable yet: asked again */ }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

async function init() {
  initTheme();
  initLanguage();
  tell($("status"), () => t("connecting"));
  tell($("quality-note"), () => t("checkingQuality"));
  tell($("copy"), () => t("copy"));
  setBusy(false);
  initViews();
  const [languages, settings] = await Promise.all([serverJson("/languages"), serverJson("/frontend/settings")]);
  state.languages = languages;
  state.charLimit = settings.charLimit;
  if (settings.filesTranslation) state.fileFormats = settings.supportedFilesFormat;
  $("file").accept = state.fileFormats.join(",");
  initApiKey(settings);
  state.typingDelay = Number(settings.frontendTimeout) || state.typingDelay;
  $("source").add(new Option(t("autoDetect"), "auto"));
  $("target").add(new Option("English", "en"));
  refreshPickers();
  const understood = readUrl();
  refreshPickers();
  onLanguage(refreshPickers);  // the languages' names in the page's language
  updateCounter();
  initPickers(languagesChanged);
  initTextBox();
  $("copy").addEventListener("click", copyOutput);
  $("more").addEventListener("click", showAlternatives);
  initDocuments();
  initGlossary();
  pollHealth();
  setInterval(pollHealth, 5000);
  if (understood && $("input").value.trim()) translate({ typed: true });  // a shared URL with text: its translation
}

init();
