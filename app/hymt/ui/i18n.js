// The page in the person's language: its words from the catalogue (catalogue.js), the page-language picker
// (remembered in this browser; at first the browser's own language where the page has it), and the texts shown
// so far worded again when the language changes, so that a report on its way (a document's progress) follows.
import { CATALOGUE, PAGE_LANGUAGES } from "./catalogue.js";
import { $ } from "./state.js";

const STORAGE = "hymt-page-language";
let current = "en";
// Each element whose text the page words, with the function that words it (asked again on a change).
const worded = new Map();
const listeners = [];

export function t(key, vars = {}, language = current) {
  const entry = CATALOGUE[language][key] ?? CATALOGUE.en[key];
  return typeof entry === "function" ? entry(vars) : entry.replace(/\{(\w+)\}/g, (_, name) => vars[name]);
}

export function tell(el, words) {
  // words: a function that words the text (asked again when the language changes), or a fixed text ("" clears).
  if (typeof words === "function") worded.set(el, words);
  else worded.delete(el);
  el.textContent = typeof words === "function" ? words() : words;
}

export function onLanguage(listener) {
  // For what the page words itself on a change (option lists, button labels).
  listeners.push(listener);
}

function wordPage() {
  // The page's fixed words: data-i18n is an element's text, data-i18n-<attribute> one of its attributes.
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const attr of ["placeholder", "aria-label", "title"]) {
    for (const el of document.querySelectorAll(`[data-i18n-${attr}]`)) el.setAttribute(attr, t(el.getAttribute(`data-i18n-${attr}`)));
  }
  document.title = t("title");
}

function setLanguage(code) {
  current = code;
  document.documentElement.lang = PAGE_LANGUAGES.find((l) => l.code === code).tag;
  wordPage();
  for (const [el, words] of worded) {
    if (el.isConnected) el.textContent = words();
    else worded.delete(el);
  }
  for (const listener of listeners) listener();
  document.documentElement.classList.remove("wording");  // early.js hid the page until its words were in
}

function browserLanguage() {
  // The first of the browser's languages the page has (zh-TW and zh-HK read the Chinese page too), else English.
  for (const tag of navigator.languages || [navigator.language]) {
    const code = tag.toLowerCase().split("-")[0];
    if (PAGE_LANGUAGES.some((l) => l.code === code)) return code;
  }
  return "en";
}

export function initLanguage() {
  const select = $("page-language");
  for (const { code, name, tag } of PAGE_LANGUAGES) {
    const option = new Option(name, code);
    option.lang = tag;  // each language named in itself, read out in its own voice
    select.add(option);
  }
  const stored = localStorage.getItem(STORAGE);
  select.value = PAGE_LANGUAGES.some((l) => l.code === stored) ? stored : browserLanguage();
  setLanguage(select.value);
  select.addEventListener("change", () => { localStorage.setItem(STORAGE, select.value); setLanguage(select.value); });
}
