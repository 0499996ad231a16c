// Run in <head>, before the first paint (a classic script: modules run later): the theme chosen in this browser
// (theme.js offers the choice and keeps it under this key), so that a page in the chosen theme never shows the
// other one while it loads.
try {
  const theme = localStorage.getItem("hymt-theme");
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
} catch { /* storage refused (a privacy setting): the system's theme */ }
