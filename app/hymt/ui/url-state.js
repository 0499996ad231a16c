// The shareable URL: the languages and (when not too long) the text, kept in the address and read back on arrival.
import { $, state } from "./state.js";

// The shareable URL carries the text up to this length (longer ones carry the languages only).
const URL_TEXT_MAX = 2000;

export function updateUrl() {
  // The address carries the languages and (when not too long) the text, so it can be shared or bookmarked.
  const params = new URLSearchParams({ source: $("source").value, target: $("target").value });
  const text = $("input").value;
  if (text && text.length <= URL_TEXT_MAX) params.set("q", text);
  history.replaceState(null, "", `${location.pathname}?${params}`);
}

export function readUrl() {
  const params = new URLSearchParams(location.search);
  const known = (code, auto) => (auto && code === "auto") || state.languages.some((l) => l.code === code);
  if (known(params.get("source"), true)) $("source").value = params.get("source");
  if (known(params.get("target"), false)) $("target").value = params.get("target");
  if (params.get("q")) $("input").value = params.get("q");
}
