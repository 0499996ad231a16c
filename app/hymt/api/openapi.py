"""The OpenAPI description of the endpoints, as data (served at /openapi.json, rendered by /docs)."""

from __future__ import annotations

from .. import __version__

_ERROR = {"description": "Error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_ERRORS = {"400": _ERROR, "403": _ERROR, "413": _ERROR, "429": _ERROR, "503": _ERROR}
_TRANSLATION_ERRORS = {**_ERRORS, "422": _ERROR}


def _body(properties: dict, required: list[str], forms: bool = True) -> dict:
    schema = {"type": "object", "properties": properties, "required": required}
    content = {"application/json": {"schema": schema}}
    if forms:
        content["application/x-www-form-urlencoded"] = {"schema": schema}
    return {"required": True, "content": content}


_LANG = {"type": "string", "description": "language code (see /languages); aliases such as zh-CN, pt-BR accepted"}
_Q = {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}], "description": "text(s)"}
_GLOSSARY = {"type": "array", "maxItems": 500, "description": (
    "terms to translate a fixed way: only those occurring in a segment go into its prompt; each is checked in the "
    "translation, a miss is retried once with stronger guidance and reported in the answer's `glossary`. Added to "
    "the server's glossaries (HYMT_GLOSSARIES). In a form, a JSON string of the list"),
    "items": {"type": "object", "required": ["source", "target"],
              "properties": {"source": {"type": "string", "maxLength": 200},
                             "target": {"type": "string", "maxLength": 200}}}}
_CONTEXT = {"type": "boolean", "default": True, "description": (
    "translate each segment of a text with its preceding segments as context (HY-MT1.5-7B's context prompt; "
    "models without one ignore it)")}
_QUALITY = {"enum": ["standard", "best"], "default": "standard", "description": (
    "best: six candidate translations under varied decoding settings, fused into one by Hunyuan-MT-Chimera-7B "
    "(about seven times the work); 422 with the reason where the server has no fusion model")}
_QUALITY_FIELDS = {"glossary": _GLOSSARY, "context": _CONTEXT, "quality": _QUALITY}

_FILE_BODY = {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file", "target"],
    "properties": {"file": {"type": "string", "format": "binary"}, "source": {**_LANG, "default": "auto"},
                   "target": _LANG, "api_key": {"type": "string"}}}}}}

SPEC = {
    "openapi": "3.1.0",
    "info": {"title": "hymt", "version": __version__,
             "description": "Self-hosted Hunyuan-MT-7B translation. LibreTranslate- and OpenAI-compatible."},
    "paths": {
        "/translate": {"post": {
            "summary": "Translate text (LibreTranslate API)",
            "requestBody": _body({"q": _Q, "source": {**_LANG, "default": "auto"}, "target": _LANG,
                                  "format": {"enum": ["text", "html"], "default": "text"},
                                  "api_key": {"type": "string"}, **_QUALITY_FIELDS}, ["q", "target"]),
            "responses": {"200": {"description": "translatedText (and detectedLanguage when source is auto; glossary "
                                                 "{terms_applied, segments_with_terms, misses} when terms applied)"},
                          **_TRANSLATION_ERRORS}}},
        "/detect": {"post": {
            "summary": "Detect the language of text (LibreTranslate API)",
            "requestBody": _body({"q": _Q, "api_key": {"type": "string"}}, ["q"]),
            "responses": {"200": {"description": "[{language, confidence}] (confidence in percent)"}, **_ERRORS}}},
        "/languages": {"get": {"summary": "The 38 languages and their targets",
                               "responses": {"200": {"description": "[{code, name, targets}]"}}}},
        "/frontend/settings": {"get": {"summary": "LibreTranslate front-end settings (limits)",
                                       "responses": {"200": {"description": "charLimit and friends"}}}},
        "/api/translate": {"post": {
            "summary": "The web page's endpoint; stream=true answers with Server-Sent Events "
                       "(start, progress per segment with the partial text, done, or error)",
            "requestBody": _body({"text": {"type": "string"}, "source": {**_LANG, "default": "auto"},
                                  "target": _LANG, "stream": {"type": "boolean"}, "greedy": {"type": "boolean"},
                                  **_QUALITY_FIELDS},
                                 ["text", "target"], forms=False),
            "responses": {"200": {"description": "JSON, or text/event-stream when stream=true (quality best: start, "
                                                 "candidates, progress per fused segment, done)"},
                          **_TRANSLATION_ERRORS}}},
        "/translate_file": {"post": {
            "summary": "Translate a document (LibreTranslate API): .txt .md .html .srt .vtt .docx .pptx .xlsx .po "
                       ".pot .xliff .xlf .epub; the answer's translatedFileUrl downloads the result",
            "requestBody": _FILE_BODY,
            "responses": {"200": {"description": "translatedFileUrl, name, segments, markup_fallback_segments"},
                          "415": _ERROR, **_ERRORS}}},
        "/api/translate_file": {"post": {
            "summary": "The web page's document endpoint: Server-Sent Events (start, progress with segments done "
                       "of total, done with translatedFileUrl, or error)",
            "requestBody": _FILE_BODY,
            "responses": {"200": {"description": "text/event-stream"}, "415": _ERROR, **_ERRORS}}},
        "/download_file/{file_id}/{name}": {"get": {
            "summary": "A translated document, while it is kept (HYMT_FILE_RETENTION_S)",
            "parameters": [{"name": "file_id", "in": "path", "required": True, "schema": {"type": "string"}},
                           {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "the file"}, "404": _ERROR}}},
        "/v1/chat/completions": {"post": {
            "summary": "OpenAI-compatible: the last user message is translated. Target language from the model "
                       "name (hunyuan-mt:de) or the field target_language; source_language optional",
            "requestBody": _body({"model": {"type": "string", "example": "hunyuan-mt:de"},
                                  "messages": {"type": "array", "items": {"type": "object"}},
                                  "target_language": _LANG, "source_language": _LANG,
                                  "stream": {"type": "boolean"}, "temperature": {"type": "number"},
                                  **_QUALITY_FIELDS},
                                 ["messages"], forms=False),
            "responses": {"200": {"description": "chat.completion (with the extra field glossary), or "
                                                 "chat.completion.chunk events (quality best: one chunk)"},
                          **_TRANSLATION_ERRORS}}},
        "/v1/models": {"get": {"summary": "Model names, one per target language; root: the model that runs",
                               "responses": {"200": {"description": "OpenAI model list"}}}},
        "/health": {"get": {"summary": "Status, profile, GPU memory, queue, the model (model_family), quality best's "
                                       "availability and placement (quality), glossaries; 200 only when it can "
                                       "translate",
                            "responses": {"200": {"description": "healthy or degraded"},
                                          "503": {"description": "loading or unhealthy"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": {"description": "text format"}}}},
    },
    "components": {"schemas": {"Error": {"type": "object", "required": ["error", "error_type"], "properties": {
        "error": {"type": "string"}, "error_type": {"type": "string"}, "error_id": {"type": "string"}}}}},
}
