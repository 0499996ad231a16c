// Copy the translation: the clipboard API where the page is a secure context, else through a selection.
import { t, tell } from "./i18n.js";
import { showMessage } from "./messages.js";
import { $ } from "./state.js";

export async function copyOutput() {
  // navigator.clipboard exists only in secure contexts (HTTPS, localhost); over plain HTTP on a LAN the page
  // copies through a selection instead, and says so when the browser refuses both.
  const text = $("output").textContent;
  if (!text) { showMessage(() => t("nothingToCopy")); return; }
  let copied = false;
  if (navigator.clipboard && window.isSecureContext) {
    copied = await navigator.clipboard.writeText(text).then(() => true, () => false);
  }
  if (!copied) copied = copyBySelection(text);
  if (copied) {
    tell($("copy"), () => t("copied"));
    setTimeout(() => tell($("copy"), () => t("copy")), 1500);
    return;
  }
  const range = document.createRange();
  range.selectNodeContents($("output"));
  getSelection().removeAllRanges(); getSelection().addRange(range);
  showMessage(() => t("copyRefused"));
}

function copyBySelection(text) {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed"; area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
  area.remove();
  return ok;
}
