"""The HTTP side: app factory, the LibreTranslate, OpenAI and page endpoints, health and metrics."""
