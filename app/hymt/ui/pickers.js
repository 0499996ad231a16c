// The language pickers: search that narrows each list and keeps the selection, and the detected source language.
import { t, tell } from "./i18n.js";
import { $, state } from "./state.js";

// A detection less sure than this is shown as a guess.
const GUESS_BELOW = 60;

function languageLabel(code) {
  if (code === "auto") return t("autoDetect");
  const lang = state.languages.find((l) => l.code === code);
  return lang ? t("languageLabel", { lang }) : code;
}

export function languageName(code) {
  // A language's name in the page's language.
  const lang = state.languages.find((l) => l.code === code);
  return lang ? t("languageName", { lang }) : code;
}

function fillSelect(select, filter, withAuto, hint) {
  // The search narrows the list; the selected language stays selected (listed first) until one is picked.
  const keep = select.value || (withAuto ? "auto" : "en");
  const needle = filter.trim().toLowerCase();
  const codes = (withAuto ? ["auto"] : []).concat(state.languages.map((l) => l.code));
  // A language is found by its English, native or Chinese name, whichever the page's language.
  const names = (code) => {
    const lang = state.languages.find((l) => l.code === code);
    return [languageLabel(code), ...(lang ? [lang.name, lang.native, lang.chinese] : [t("autoDetect", {}, "en")])];
  };
  const matches = codes.filter((code) => !needle || names(code).some((n) => n.toLowerCase().includes(needle)));
  select.replaceChildren();
  if (!matches.includes(keep)) select.add(new Option(t("selected", { label: languageLabel(keep) }), keep));
  for (const code of matches) select.add(new Option(languageLabel(code), code));
  select.value = keep;
  const found = matches.filter((c) => c !== "auto").length;
  hint.textContent = !needle ? "" : found ? t("matches", { n: found }) : t("noMatch", { filter: filter.trim() });
  return matches;
}

export function refreshPickers() {
  fillSelect($("source"), $("source-filter").value, true, $("source-hint"));
  fillSelect($("target"), $("target-filter").value, false, $("target-hint"));
}

function pickFirstMatch(select, filter, withAuto, hint, languagesChanged) {
  // Enter in a search box: the first matching language is picked, as if chosen from the list.
  const first = fillSelect(select, filter.value, withAuto, hint).find((c) => c !== select.value);
  if (!first) return;
  select.value = first;
  filter.value = "";
  fillSelect(select, "", withAuto, hint);
  languagesChanged();
}

export function showDetected(d) {
  // Beside the source picker: what auto-detection found, a low confidence shown as a guess.
  const lang = d && state.languages.find((l) => l.code === d.language);
  state.detected = lang ? d.language : null;
  const el = $("detected");
  el.classList.toggle("guess", Boolean(lang) && d.confidence < GUESS_BELOW);
  if (!d) { tell(el, ""); return; }
  if (!lang) { tell(el, () => t("detectedUnsure")); return; }
  const pct = Math.round(d.confidence);
  tell(el, () => t(d.confidence < GUESS_BELOW ? "detectedGuess" : "detected", { name: languageName(lang.code), pct }));
}

export function initPickers(languagesChanged) {
  // languagesChanged: called once a new language is picked, from the list or by Enter in a search box.
  for (const [select, filter, hint, auto] of [["source", "source-filter", "source-hint", true],
                                              ["target", "target-filter", "target-hint", false]]) {
    $(filter).addEventListener("input", refreshPickers);
    $(filter).addEventListener("keydown", (e) => {
      if (e.key !== "Enter") return;
      e.preventDefault();
      pickFirstMatch($(select), $(filter), auto, $(hint), languagesChanged);
    });
    $(select).addEventListener("change", () => { $(filter).value = ""; refreshPickers(); languagesChanged(); });
  }
}
