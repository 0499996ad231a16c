// The glossary: terms kept for this browser tab, imported from .tsv or .csv, a glossary stored on the server (made
// through DeepL's /v2/glossaries) to use beside them, and the report of terms missed.
import { authHeaders } from "./api-key.js";
import { onLanguage, t, tell } from "./i18n.js";
import { showError } from "./messages.js";
import { $, state } from "./state.js";

const GLOSSARY_KEY = "hymt.glossary";  // sessionStorage: the glossary lives as long as the tab
const STORED_KEY = "hymt.glossary-id";
let stored = [];  // the stored glossaries this key may use, as /v2/glossaries last listed them

function glossaryRow(source = "", target = "") {
  const row = document.createElement("tr");
  for (const [value, label] of [[source, "sourceTerm"], [target, "termTranslation"]]) {
    const input = document.createElement("input");
    input.value = value;
    input.dataset.i18nAriaLabel = label;  // worded again with the page
    input.setAttribute("aria-label", t(label));
    input.addEventListener("input", saveGlossary);
    row.insertCell().append(input);
  }
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = "✕";
  remove.dataset.i18nAriaLabel = "removeTerm";
  remove.setAttribute("aria-label", t("removeTerm"));
  remove.addEventListener("click", () => { row.remove(); saveGlossary(); });
  row.insertCell().append(remove);
  $("glossary-rows").append(row);
  return row;
}

export function glossaryTerms() {
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
  tell($("glossary-count"), () => t("termCount", { n: terms.length }));
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
  if (!rows.length) { showError(400, { error: t("noTermRows", { name: file.name }) }); return; }
  for (const [source, target] of rows) glossaryRow(source, target);
  saveGlossary();
  $("glossary").open = true;
}

// The stored glossaries this key may use; the field shows only where there are some.
export async function loadStoredGlossaries() {
  let glossaries = [];
  try {
    const response = await fetch("/v2/glossaries", { headers: authHeaders() });
    if (response.ok) glossaries = (await response.json()).glossaries;
  } catch { /* the server is not reachable: the field stays hidden */ }
  stored = glossaries;
  listStoredGlossaries();
  $("glossary-stored-field").hidden = !stored.length;
}

function listStoredGlossaries() {
  const select = $("glossary-stored");
  const chosen = sessionStorage.getItem(STORED_KEY) || "";
  select.replaceChildren(new Option(t("none"), ""), ...stored.map((g) =>
    new Option(t("storedLabel", { name: g.name, source: g.source_lang, target: g.target_lang, n: g.entry_count }),
               g.glossary_id)));
  select.value = stored.some((g) => g.glossary_id === chosen) ? chosen : "";
}

// The chosen stored glossary's id, or undefined (left out of a JSON body).
export function storedGlossaryId() {
  return $("glossary-stored").value || undefined;
}

export function showGlossaryReport(report) {
  const el = $("glossary-report");
  el.classList.remove("missed");
  if (!report) { tell(el, ""); return; }
  if (!report.misses.length) {
    tell(el, () => t("glossaryAllFound", { n: report.terms_applied }));
    return;
  }
  const missed = () => report.misses.map((m) => t("glossaryMissedIn", { n: m.segment + 1,
    terms: m.missing.map((term) => `${term.source} → ${term.target}`).join(", ") })).join("; ");
  tell(el, () => t("glossaryMissed", { n: report.terms_applied, missed: missed() }));
  el.classList.add("missed");
}

export function initGlossary() {
  for (const { source, target } of JSON.parse(sessionStorage.getItem(GLOSSARY_KEY) || "[]")) glossaryRow(source, target);
  saveGlossary();
  $("glossary-add").addEventListener("click", () => { glossaryRow().querySelector("input").focus(); });
  $("glossary-clear").addEventListener("click", () => { $("glossary-rows").replaceChildren(); saveGlossary(); });
  $("glossary-file").addEventListener("change", (e) => { if (e.target.files[0]) importGlossary(e.target.files[0]); e.target.value = ""; });
  $("glossary-stored").addEventListener("change", (e) => sessionStorage.setItem(STORED_KEY, e.target.value));
  $("api-key").addEventListener("change", loadStoredGlossaries);  // another key may use other glossaries
  onLanguage(listStoredGlossaries);
  loadStoredGlossaries();
}
