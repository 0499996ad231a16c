// Run in <head>, before the first paint (a classic script: modules run later).
try {
  // The theme chosen in this browser (theme.js offers the choice and keeps it under this key), so that a page in
  // the chosen theme never shows the other one while it loads.
  const theme = localStorage.getItem("hymt-theme");
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  // A page in another language than English (saved by i18n.js, or the browser's) is worded by i18n.js, which runs
  // once the page is parsed: until then it is hidden (style.css), rather than shown in English for a moment. The
  // modules run before DOMContentLoaded, so that event shows the page whatever became of them.
  const saved = localStorage.getItem("hymt-page-language");
  const browser = (navigator.languages?.[0] || navigator.language || "en").toLowerCase();
  if (saved ? saved !== "en" : !browser.startsWith("en")) {
    document.documentElement.classList.add("wording");
    document.addEventListener("DOMContentLoaded", () => document.documentElement.classList.remove("wording"));
  }
} catch { /* storage refused (a privacy setting): the system's theme, the page shown as it loads */ }
