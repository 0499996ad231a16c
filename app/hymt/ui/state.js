// The page's shared state (the languages, the server's limits, the request running) and the element lookup.
export const $ = (id) => document.getElementById(id);

export const state = { languages: [], charLimit: 20000, busy: false, controller: null, detected: null,
  fileFormats: [".txt", ".md", ".srt"], typingDelay: 500, typingTimer: null, lastSent: null };
