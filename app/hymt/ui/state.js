// The page's shared state (the languages, the server's limits, the text's request running) and the element lookup.
// A document keeps its own state in documents.js: it runs beside the text's requests and never shares theirs.
export const $ = (id) => document.getElementById(id);

export const state = { languages: [], charLimit: 20000, busy: false, controller: null, detected: null,
  fileFormats: [".txt", ".md", ".srt"], typingDelay: 500, typingTimer: null, retryTimer: null, lastSent: null };
