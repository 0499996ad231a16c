// The language pickers: search that narrows each list and keeps the selection, and the detected source language.
import { $, state } from "./state.js";

// A detection less sure than this is shown as a guess.
const GUESS_BELOW = 60;

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
  if (!d) { el.textContent = ""; return; }
  if (!lang) { el.textContent = "Detected: not sure which language this is"; return; }
  const pct = Math.round(d.confidence);
  el.textContent = d.confidence < GUESS_BELOW ? `Detected: perhaps ${lang.name} (a guess, ${pct}%)`
    : `Detected: ${lang.name} (${pct}%)`;
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
