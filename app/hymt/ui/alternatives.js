// Other translations (LibreTranslate's alternatives): listed best first; picking one shows it as the translation.
import { authHeaders } from "./api-key.js";
import { glossaryTerms, storedGlossaryId } from "./glossary.js";
import { t, tell } from "./i18n.js";
import { say, showError, showMessage } from "./messages.js";
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
    showMessage(() => t("translateFirst"));
    return;
  }
  showMessage("");
  $("more").disabled = true;
  tell($("note"), () => t("lookingForOthers"));
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
      button.addEventListener("click", () => { $("output").textContent = alt; say(t("replaced")); });
      list.appendChild(document.createElement("li")).append(button);
    }
    list.hidden = false;
    say(t("choices", { n: body.alternatives.length + 1 }));
  } catch (err) {
    showMessage(() => t("unreachable", { error: err.message }));
  } finally {
    $("more").disabled = false;
    tell($("note"), "");
  }
}
