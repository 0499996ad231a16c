"""The translation layer above the token engine: prompts, jobs and their events, the text worker, and the one
facade (translator.Translator) that the API, the CLI and the document pipeline use."""
