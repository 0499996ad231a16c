// What the page tells the person: errors in the alert line, and the one screen-reader announcement.
import { askForKey } from "./api-key.js";
import { t, tell } from "./i18n.js";
import { $ } from "./state.js";

// What a status means, said before the server's own words unless those already say it (the server speaks
// English: its words are compared with the English prefix).
const PREFIXES = { 429: "busy", 413: "tooLong", 503: "notReady" };
// The error types of the server's 503s for now (its NotReady: starting, restarting, shutting down, its database
// out of reach), whose own words say why.
const NOT_READY = ["not_ready", "draining", "store_unavailable"];

export function sentence(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function errorText(status, body) {
  // One clean sentence for a refusal or a failure: the server's words, said once, with what the status means.
  const text = body && body.error ? body.error : t("answered", { status });
  const prefix = PREFIXES[status];
  if (!prefix || (body && body.error_type === "rate_limited") ||
      text.toLowerCase().startsWith(t(prefix, {}, "en").toLowerCase())) {
    return sentence(text);
  }
  return t("prefixed", { prefix: t(prefix), text });
}

export function showMessage(words) {
  // words: as tell() takes them (a function, worded again in another page language, or a fixed text).
  tell($("message"), words);
}

export function showError(status, body) {
  if (status === 401 || status === 403) {
    const text = body && body.error ? body.error : t("answered", { status });
    askForKey($("api-key").value ? () => t("keyRefused", { text }) : () => t("keyRequired"));
    return;
  }
  showMessage(() => errorText(status, body));
}

export function retryText(seconds, body) {
  // A 429 or 503: what happened, and when the page asks again by itself (a clause: sentence() starts a sentence
  // with it). A server not ready says why in its own words ("the server is starting (loading weights)"), less its
  // own "try again shortly".
  let why = body && body.error_type === "rate_limited" ? t("rateLimited") : t("serverBusy");
  if (notReady(body) && body.error) why = body.error.replace(/;\s*try again[^;]*$/i, "");
  return t("retrying", { why, seconds });
}

export function notReady(body) {
  // A 503's answer for now: the server not ready, not busy (/health says how it stands).
  return Boolean(body && NOT_READY.includes(body.error_type));
}

export function say(text) {
  // The one place screen readers hear from: once per finished translation (the output itself is not live).
  $("announce").textContent = text;
}
