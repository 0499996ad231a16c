// What the page tells the person: errors in the alert line, and the one screen-reader announcement.
import { askForKey } from "./api-key.js";
import { $ } from "./state.js";

// What a status means, said before the server's own words unless those already say it.
const PREFIXES = { 429: "The server is busy", 413: "Too long", 503: "Not ready" };

export function sentence(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function errorText(status, body) {
  // One clean sentence for a refusal or a failure: the server's words, said once, with what the status means.
  const text = body && body.error ? body.error : `the server answered ${status}`;
  const prefix = PREFIXES[status];
  if (!prefix || (body && body.error_type === "rate_limited") || text.toLowerCase().startsWith(prefix.toLowerCase())) {
    return sentence(text);
  }
  return `${prefix}: ${text}`;
}

export function showError(status, body) {
  if (status === 401 || status === 403) {
    const text = body && body.error ? body.error : `the server answered ${status}`;
    askForKey($("api-key").value ? `This API key was refused: ${text}` : "This server requires an API key: enter it above.");
    return;
  }
  $("message").textContent = errorText(status, body);
}

export function retryText(seconds, body) {
  // A 429: what happened, and when the page asks again by itself (a clause: sentence() starts a sentence with it).
  const why = body && body.error_type === "rate_limited" ? "too many requests for now (the server's rate limit)"
    : "the server is busy";
  return `${why}; trying again in ${seconds} s`;
}

export function say(text) {
  // The one place screen readers hear from: once per finished translation (the output itself is not live).
  $("announce").textContent = text;
}
