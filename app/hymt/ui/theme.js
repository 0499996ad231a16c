// Light, dark, or the system's theme (the default): chosen in the header, remembered in this browser. The style
// follows the system unless <html data-theme> names a theme.
import { $ } from "./state.js";

const STORAGE = "hymt-theme";
const THEMES = ["system", "light", "dark"];

function apply(theme) {
  if (theme === "system") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
}

export function initTheme() {
  const select = $("theme");
  const stored = localStorage.getItem(STORAGE);
  select.value = THEMES.includes(stored) ? stored : "system";
  apply(select.value);
  select.addEventListener("change", () => { localStorage.setItem(STORAGE, select.value); apply(select.value); });
}
