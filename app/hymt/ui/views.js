// Text or files: the page shows the controls of one at a time. A document uploaded or dropped opens the files
// view; its report stays by the text box in the text view while it runs.
import { $ } from "./state.js";

export function showView(view) {
  document.querySelector("main").dataset.view = view;
  $("view-text").setAttribute("aria-pressed", String(view === "text"));
  $("view-files").setAttribute("aria-pressed", String(view === "files"));
}

export function initViews() {
  $("view-text").addEventListener("click", () => { showView("text"); $("input").focus(); });
  $("view-files").addEventListener("click", () => showView("files"));
}
