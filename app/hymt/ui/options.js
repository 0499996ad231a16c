// The translation options the server offers: quality best, and the style or background instruction.
import { t, tell } from "./i18n.js";
import { $ } from "./state.js";

export function showQuality(quality) {
  if (!quality) return;
  const box = $("quality-best");
  box.disabled = !quality.best;
  if (!quality.best) box.checked = false;
  tell($("quality-note"), () => (quality.best ? t("qualityBest") : t("qualityUnavailable", { reason: quality.reason })));
}

export function showInstructions(family) {
  // Style and background fields only where the model has official prompts for them (the server refuses them else).
  for (const name of ["style", "background"]) $(`${name}-field`).hidden = !(family && family[`${name}_prompt`]);
  $("instructions").hidden = $("style-field").hidden && $("background-field").hidden;
}

export function instructions() {
  // The style and background filled in, where offered; one at a time (no official prompt combines them).
  for (const name of ["style", "background"]) {
    const value = $(name).value.trim();
    if (!$(`${name}-field`).hidden && value) return { [name]: value };
  }
  return {};
}
