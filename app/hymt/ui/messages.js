// What the page tells the person: errors in the alert line, and the one screen-reader announcement.
import { askForKey } from "./api-key.js";
import { $ } from "./state.js";

export function showError(status, body) {
  const text = body && body.error ? body.error : `the server answered ${status}`;
  if (status === 401 || status === 403) {
    askForKey($("api-key").value ? `This API key was refused: ${text}` : "This server requires an API key: enter it above.");
    return;
  }
  const prefix = { 429: "The server is busy. ", 413: "Too long. ", 503: "Not ready. " }[status] || "";
  $("message").textContent = prefix + text;
}

export function say(text) {
  // The one place screen readers hear from: once per finished translation (the output itself is not live).
  $("announce").textContent = text;
}
