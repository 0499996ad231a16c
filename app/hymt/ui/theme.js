// Light, dark, or the system's theme (the default): chosen in the header, remembered in this browser. The style
// follows the system unless <html data-theme> names a theme; early.js sets it from storage before the page
// is first drawn.
import { $ } from "./state.js";

const STORAGE = "hymt-theme";

export function initTheme() {
  const select = $("theme");
  select.value = document.documentElement.dataset.theme || "system";
  select.addEventListener("change", () => {
    localStorage.setItem(STORAGE, select.value);
    if (select.value === "system") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = select.value;
  });
}
