// Other translations (LibreTranslate's alternatives): listed best first; picking one shows it as the translation.
import { authHeaders } from "./api-key.js";
import { glossaryTerms, storedGlossaryId } from "./glossary.js";
import { say, showError } from "./messages.js";
import { instructions } from "./options.js";
import { $ } from "./state.js";

export function hideAlternatives() {
  $("alternatives").hidden = true;
  $("alternatives").replaceChildren();
}

export async function showAlternatives() {
  // LibreTranslate's alternatives: other translations of the same text, best first; picking one shows it.
  const text = $("input").value;
  if (!text.trim() || !$("output").textContent) {
    $("message").textContent = "Translate a text first; then other translations of it can be shown.";
    return;
  }
  $("message").textContent = "";
  $("more").disabled = true;
  $("note").textContent = "Looking for other translations…";
  try {
    const response = await fetch("/translate", {
      method: "POST", headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify({ q: text, source: $("source").value, target: $("target").value, alternatives: 3,
                             glossary: glossaryTerms(), glossary_id: storedGlossaryId(), ...instructions() }) });
    const body = await response.json().catch(() => null);
    if (!response.ok) { showError(response.status, body); return; }
    const list = $("alternatives");
    list.replaceChildren();
    for (const alt of [body.translatedText, ...body.alternatives]) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = alt;
      button.addEventListener("click", () => { $("output").textContent = alt; say("Translation replaced."); });
      list.appendChild(document.createElement("li")).append(button);
    }
    list.hidden = false;
    say(`${body.alternatives.length + 1} translations to choose from, the best first.`);
  } catch (err) {
    $("message").textContent = `The server could not be reached: ${err.message}`;
  } finally {
    $("more").disabled = false;
    $("note").textContent = "";
  }
}
