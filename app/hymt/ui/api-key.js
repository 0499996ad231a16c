// The API key, where the server requires one: the field, kept in this browser, sent as a Bearer.
import { t, tell } from "./i18n.js";
import { $ } from "./state.js";

const KEY_STORAGE = "hymt-api-key";

export function askForKey(words) {
  // The server requires API keys: the field shows, keeps what is typed in this browser, and is sent as a Bearer.
  // words: what the alert line says (as tell() takes it), or nothing.
  $("key-field").hidden = false;
  if (words) { tell($("message"), words); $("api-key").focus(); }
}

export function authHeaders() {
  const key = $("api-key").value.trim();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

export function initApiKey(settings) {
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  $("api-key").addEventListener("change", () => localStorage.setItem(KEY_STORAGE, $("api-key").value.trim()));
  if (settings.keyRequired) askForKey($("api-key").value ? null : () => t("keyRequired"));
}
