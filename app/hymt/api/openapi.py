"""The OpenAPI description of the endpoints, as data built from the settings (served at /openapi.json, rendered by
/docs). It is exact: what it allows the server accepts, what it forbids the server refuses with a 4xx of the
documented shape, so a client generated from it works (schemathesis checks this in the tests)."""

from __future__ import annotations

from .. import __version__
from ..languages import ALIASES, LANGUAGES
from ..settings import Settings
from .libre import ALTERNATIVES_MAX
from .openai_compat import MODEL_NAME, ROLES

NONBLANK = r"\S"  # at least one character that is not white space (str.strip's white space)


def language_codes() -> list[str]:
    """Every spelling of a language the API accepts: the codes, their aliases, and aliases with a region in
    BCP 47's case (zh-CN, pt-BR)."""
    codes = [lang.code for lang in LANGUAGES]
    for alias in ALIASES:
        head, _, rest = alias.partition("-")
        codes.append(alias)
        if len(rest) == 2:
            codes.append(f"{head}-{rest.upper()}")
    return list(dict.fromkeys(codes))


def _error(schema: str, description: str, retry_after: bool = False) -> dict:
    response = {"description": description,
                "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}}}
    if retry_after:
        response["headers"] = {"Retry-After": {"required": True, "description": "seconds to wait before trying again",
                                               "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
    return response


def _errors(schema: str, keys: bool) -> dict:
    errors = {
        "400": _error(schema, "The request is malformed: invalid JSON or text, a missing or wrong field"),
        "413": _error(schema, "The body is over HYMT_MAX_UPLOAD_BYTES"),
        "415": _error(schema, "The content type is not accepted"),
        "429": _error(schema, "Refused at once: the expected wait is over HYMT_MAX_QUEUE_WAIT_S, the queue is full, "
                              "or a rate limit is reached", retry_after=True),
        "503": _error(schema, "Starting, stopped or shutting down (draining)", retry_after=True),
    }
    if keys:
        errors["401"] = _error(schema, "No API key (api_key or Authorization: Bearer)")
        errors["403"] = _error(schema, "A wrong API key")
    return errors


def _json_body(schema: dict) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _object(properties: dict, required: list[str], **extra) -> dict:
    return {"type": "object", "properties": properties, "required": required, **extra}


def build_spec(settings: Settings) -> dict:
    keys = bool(settings.api_keys)
    codes = language_codes()
    text = {"type": "string", "maxLength": settings.max_chars, "pattern": NONBLANK}
    any_text = {"type": "string", "maxLength": settings.max_chars}
    texts = {"anyOf": [text, {"type": "array", "items": any_text, "minItems": 1, "maxItems": settings.max_texts,
                              "contains": text}],
             "description": f"a text, or a list of up to {settings.max_texts} (at least one not blank); "
                            f"{settings.max_chars} characters each at most"}
    target = {"type": "string", "enum": codes, "description": "language code (see /languages) or alias"}
    source = {"type": "string", "enum": ["auto", *codes], "default": "auto"}
    api_key = {"type": "string", "description": "when the server requires keys (or send Authorization: Bearer)"}
    translate = _object({"q": texts, "source": source, "target": target,
                         "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
                         "alternatives": {"type": "integer", "minimum": 0, "maximum": ALTERNATIVES_MAX},
                         "api_key": api_key}, ["q", "target"])
    # In a form every value is text: a list is the field repeated, a number its digits.
    translate_form = _object({**translate["properties"],
                              "alternatives": {"type": "string", "pattern": "^0*([0-9]|10)$"}}, ["q", "target"])
    form_content = {"application/x-www-form-urlencoded": {"schema": translate_form},
                    "multipart/form-data": {"schema": translate_form}}
    detect = _object({"q": texts, "api_key": api_key}, ["q"])
    detect_form = {"application/x-www-form-urlencoded": {"schema": detect}, "multipart/form-data": {"schema": detect}}
    page = _object({"text": text, "source": source, "target": target, "stream": {"type": "boolean"},
                    "greedy": {"type": "boolean"}}, ["text", "target"])
    part = _object({"type": {"type": "string", "const": "text"}, "text": any_text}, ["type", "text"])
    content = {"anyOf": [any_text, {"type": "array", "items": part, "maxItems": settings.max_texts}]}
    message = _object({"role": {"type": "string", "enum": list(ROLES)}, "content": content}, ["role", "content"])
    user_text = _object({"role": {"const": "user"}, "content": {"anyOf": [
        text, {"type": "array", "contains": _object({"text": text}, ["text"])}]}}, ["role", "content"])
    suffixed = [f"{MODEL_NAME}:{code}" for code in codes]
    chat = _object({
        "model": {"type": "string", "enum": [MODEL_NAME, *suffixed], "default": MODEL_NAME,
                  "description": "hunyuan-mt:<target> names the target language"},
        "messages": {"type": "array", "items": message, "minItems": 1, "contains": user_text,
                     "description": "the last user message with text is translated"},
        "target_language": target, "source_language": source,
        "stream": {"type": "boolean"}, "temperature": {"type": "number", "minimum": 0, "maximum": 2}},
        ["messages"],
        anyOf=[{"required": ["target_language"]},
               {"required": ["model"], "properties": {"model": {"enum": suffixed}}}])

    def post(summary: str, body: dict, ok: dict, errors: str = "Error") -> dict:
        operation = {"summary": summary, "requestBody": body, "responses": {"200": ok, **_errors(errors, keys)}}
        if keys:
            operation["security"] = [{"bearer": []}]
        return {"post": operation}

    def ok(description: str, schema: dict, stream: bool = False) -> dict:
        content = {"application/json": {"schema": schema}}
        if stream:
            content["text/event-stream"] = {"schema": _object({"event": {"type": "string"},
                                                               "data": {"type": "string"}}, ["data"])}
        return {"description": description, "content": content}

    def get(summary: str, response: dict) -> dict:
        return {"summary": summary, "responses": {"200": response}}

    detected = _object({"language": {"type": "string"}, "confidence": {"type": "number"}},
                       ["language", "confidence"])
    languages = get("The 38 languages and their targets", ok("[{code, name, targets}]", {"type": "array", "items": _object(
        {"code": {"type": "string"}, "name": {"type": "string"}, "targets": {"type": "array"}}, ["code", "name"])}))
    health = {"description": "healthy or degraded (200); loading, unhealthy or draining (503)",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}}
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "hymt", "version": __version__,
                 "description": "Self-hosted Hunyuan-MT-7B translation. LibreTranslate- and OpenAI-compatible."},
        "paths": {
            "/translate": post(
                "Translate text (LibreTranslate API)",
                {"required": True, "content": {"application/json": {"schema": translate}, **form_content}},
                ok("translatedText (and detectedLanguage when source is auto)", _object({
                    "translatedText": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
                    "detectedLanguage": {"anyOf": [detected, {"type": "array", "items": detected}]},
                    "alternatives": {"type": "array"}}, ["translatedText"]))),
            "/detect": post("Detect the language of text (LibreTranslate API)",
                            {"required": True, "content": {"application/json": {"schema": detect}, **detect_form}},
                            ok("[{language, confidence}] (confidence in percent)",
                               {"type": "array", "items": detected})),
            "/languages": {"get": languages, "post": languages},
            "/frontend/settings": get("LibreTranslate front-end settings (limits)", ok(
                "charLimit and friends", _object({"charLimit": {"type": "integer"}, "keyRequired": {"type": "boolean"}},
                                                 ["charLimit", "keyRequired"]))),
            "/api/translate": post(
                "The web page's endpoint; stream=true answers with Server-Sent Events (start, token and progress "
                "with the partial text, done, or error)", _json_body(page),
                ok("JSON, or text/event-stream when stream=true", _object(
                    {"translatedText": {"type": "string"}, "segments": {"type": "integer"}}, ["translatedText"]),
                   stream=True)),
            "/v1/chat/completions": post(
                "OpenAI-compatible: the last user message is translated. Target language from the model name "
                "(hunyuan-mt:de) or the field target_language; source_language optional", _json_body(chat),
                ok("chat.completion, or chat.completion.chunk events", _object(
                    {"object": {"const": "chat.completion"}, "choices": {"type": "array", "minItems": 1}},
                    ["object", "choices"]), stream=True), errors="OpenAIError"),
            "/v1/models": get("Model names, one per target language", ok("OpenAI model list", _object(
                {"object": {"const": "list"}, "data": {"type": "array"}}, ["object", "data"]))),
            "/health": {"get": {"summary": "Status, profile, GPU memory, queue; 200 only when it can translate",
                                "responses": {"200": health, "503": health}}},
            "/metrics": get("Prometheus metrics", {"description": "text format",
                                                   "content": {"text/plain": {"schema": {"type": "string"}}}}),
        },
        "components": {"schemas": {
            "Error": _object({"error": {"type": "string"}, "error_type": {"type": "string"},
                              "error_id": {"type": "string"}}, ["error", "error_type"]),
            "OpenAIError": _object({"error": _object({"message": {"type": "string"}, "type": {"type": "string"},
                                                     "code": {"type": "string"}}, ["message", "type", "code"]),
                                    "error_type": {"type": "string"}}, ["error"]),
            "Health": _object({"status": {"type": "string",
                                          "enum": ["healthy", "degraded", "loading", "unhealthy", "draining"]},
                               "phase": {"type": "string"}, "queue_depth": {"type": "integer"}}, ["status"]),
        }},
    }
    if keys:
        spec["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer",
                                                            "description": "an API key (HYMT_API_KEYS)"}}
    return spec
