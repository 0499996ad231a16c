// The shareable URL: the languages and (when not too long) the text, kept in the address and read back on arrival.
import { t } from "./i18n.js";
import { showMessage } from "./messages.js";
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
  // The address's languages and text. A language this server does not offer is said, not quietly replaced:
  // false then, and the shared text waits for a language to be picked rather than going into the wrong one.
  const params = new URLSearchParams(location.search);
  const known = (code, auto) => (auto && code === "auto") || state.languages.some((l) => l.code === code);
  const unknown = [];
  for (const [name, auto, key] of [["source", true, "unknownSource"], ["target", false, "unknownTarget"]]) {
    const code = params.get(name);
    if (known(code, auto)) $(name).value = code;
    else if (code !== null) unknown.push(() => t(key, { code }));
  }
  if (params.get("q")) $("input").value = params.get("q");
  if (unknown.length) showMessage(() => unknown.map((words) => words()).join(" "));
  return !unknown.length;
}
