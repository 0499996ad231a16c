"""The OpenAPI description of the endpoints, as data built from the settings (served at /openapi.json, rendered by
/docs). It is exact: what it allows the server accepts, what it forbids the server refuses with a 4xx of the
documented shape, so a client generated from it works (schemathesis checks this in the tests)."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..documents import FORMATS, media_types
from ..planner.tiers import TIERS_BY_NAME
from ..settings import Settings
from .schemas import json_object, request_bodies


def _error(schema: str, description: str, retry_after: bool = False) -> dict:
    response = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
    if retry_after:
        response["headers"] = {
            "Retry-After": {
                "required": True,
                "description": "seconds to wait before trying again",
                "schema": {"type": "string", "pattern": "^[0-9]+$"},
            }
        }
    return response


def _errors(schema: str, keys: bool, quality: bool = False) -> dict:
    errors = {
        "400": _error(schema, "The request is malformed: invalid JSON or text, a missing or wrong field"),
        "413": _error(schema, "The body is over HYMT_MAX_UPLOAD_BYTES"),
        "415": _error(schema, "The content type is not accepted"),
        "429": _error(
            schema,
            "Refused at once: the expected wait is over HYMT_MAX_QUEUE_WAIT_S, the queue is full, "
            "or a rate limit is reached",
            retry_after=True,
        ),
        "503": _error(schema, "Starting, stopped or shutting down (draining)", retry_after=True),
    }
    if quality:
        errors["422"] = _error(
            schema,
            "quality best asked where the server has no fusion model, or style or "
            "background where the model served has no official prompt for it, or both "
            "(the reason is said)",
        )
    if keys:
        errors["401"] = _error(schema, "No API key (api_key or Authorization: Bearer)")
        errors["403"] = _error(schema, "A wrong API key")
    return errors


def _json_body(schema: dict) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def build_spec(settings: Settings, best: bool = False, offered: frozenset[str] = frozenset()) -> dict:
    """The document for these settings; `best`: whether quality best is available (known once the server is up:
    it needs a fusion model that fits beside the translation model); `offered`: which of style and background the
    model served has official prompts for (known once it is loaded)."""
    keys = bool(settings.api_keys)
    bodies = request_bodies(settings, best, offered)
    source, target, api_key_form = bodies.source, bodies.target, bodies.api_key_form

    def post(summary: str, body: dict, ok: dict, errors: str = "Error", quality: bool = False) -> dict:
        operation = {
            "summary": summary,
            "requestBody": body,
            "responses": {"200": ok, **_errors(errors, keys, quality)},
        }
        if keys:
            operation["security"] = [{"bearer": []}]
        return {"post": operation}

    def ok(description: str, schema: dict, stream: bool = False) -> dict:
        content = {"application/json": {"schema": schema}}
        if stream:
            content["text/event-stream"] = {
                "schema": json_object({"event": {"type": "string"}, "data": {"type": "string"}}, ["data"])
            }
        return {"description": description, "content": content}

    def file_post(summary: str, ok: dict) -> dict:
        formats = " ".join(FORMATS)
        accepted = list(media_types())
        # The format is the file name's extension, else the part's Content-Type: the encoding names the media
        # types, so a client that sends one of them with any file name is understood.
        body = {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": json_object(
                        {
                            "file": {
                                "type": "string",
                                "format": "binary",
                                "description": (
                                    f"a document, by its file name's extension ({formats}) "
                                    f"or else by the media type it is sent as ({', '.join(accepted)})"
                                ),
                            },
                            "source": source,
                            "target": target,
                            "api_key": api_key_form,
                            **bodies.document_form,
                        },
                        ["file", "target"],
                        description="a form; glossary (terms for the document's texts without inline markup) "
                        "may be sent as a JSON string of the list",
                        **bodies.one_instruction,
                    ),
                    "encoding": {"file": {"contentType": ", ".join(accepted)}},
                }
            },
        }
        operation = post(f"{summary}. Formats: {formats}", body, ok)["post"]
        operation["responses"]["400"] = _error(
            "Error",
            "A malformed form or field; a file its library cannot read "
            "(invalid_file); XML that declares entities (xml_entities)",
        )
        operation["responses"]["413"] = _error(
            "Error",
            (
                "Over HYMT_MAX_FILE_BYTES; an archive past its limits (archive_too_large: members, expanded size, "
                "ratio); more segments than 16 x HYMT_MAX_QUEUE_SEGMENTS (too_many_segments) or one over "
                "HYMT_MAX_CHARS (segment_too_long)"
            ),
        )
        operation["responses"]["415"] = _error("Error", "Not a supported format (the message lists them)")
        operation["responses"]["422"] = _error(
            "Error", "style or background where the model served has no official prompt for it, or both"
        )
        return {"post": operation}

    def get(summary: str, response: dict) -> dict:
        return {"summary": summary, "responses": {"200": response}}

    detected = json_object(
        {"language": {"type": "string"}, "confidence": {"type": "number"}}, ["language", "confidence"]
    )
    languages = get(
        "The 38 languages and their targets",
        ok(
            "[{code, name, targets}]",
            {
                "type": "array",
                "items": json_object(
                    {"code": {"type": "string"}, "name": {"type": "string"}, "targets": {"type": "array"}},
                    ["code", "name"],
                ),
            },
        ),
    )
    health = {
        "description": "healthy or degraded (200); loading, unhealthy or draining (503)",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}},
    }
    spec: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "hymt",
            "version": __version__,
            "description": "Self-hosted Hunyuan-MT-7B translation. LibreTranslate- and OpenAI-compatible.",
        },
        "paths": {
            "/translate": post(
                "Translate text (LibreTranslate API)",
                {
                    "required": True,
                    "content": {"application/json": {"schema": bodies.translate}, **bodies.translate_form},
                },
                ok(
                    "translatedText (and detectedLanguage when source is auto; glossary {terms_applied, "
                    "segments_with_terms, misses} when terms applied; markup_fallback_segments for format html)",
                    json_object(
                        {
                            "translatedText": {
                                "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]
                            },
                            "detectedLanguage": {"anyOf": [detected, {"type": "array", "items": detected}]},
                            "glossary": {"type": "object"},
                            "markup_fallback_segments": {"type": "integer"},
                            "alternatives": {"type": "array"},
                        },
                        ["translatedText"],
                    ),
                ),
                quality=True,
            ),
            "/detect": post(
                "Detect the language of text (LibreTranslate API)",
                {"required": True, "content": {"application/json": {"schema": bodies.detect}, **bodies.detect_form}},
                ok("[{language, confidence}] (confidence in percent)", {"type": "array", "items": detected}),
            ),
            "/languages": {"get": languages, "post": languages},
            "/frontend/settings": get(
                "LibreTranslate front-end settings (limits)",
                ok(
                    "charLimit and friends",
                    json_object(
                        {"charLimit": {"type": "integer"}, "keyRequired": {"type": "boolean"}},
                        ["charLimit", "keyRequired"],
                    ),
                ),
            ),
            "/api/translate": post(
                "The web page's endpoint; stream=true answers with Server-Sent Events (start, token and progress "
                "with the partial text, done, or error)",
                _json_body(bodies.page),
                ok(
                    "JSON, or text/event-stream when stream=true (quality best: start, candidates, progress per "
                    "fused segment, done)",
                    json_object(
                        {"translatedText": {"type": "string"}, "segments": {"type": "integer"}}, ["translatedText"]
                    ),
                    stream=True,
                ),
                quality=True,
            ),
            "/v1/chat/completions": post(
                "OpenAI-compatible: the last user message is translated. Target language from the model name "
                "(hunyuan-mt:de) or the field target_language; source_language optional",
                _json_body(bodies.chat),
                ok(
                    "chat.completion (with the extra field glossary), or chat.completion.chunk events (quality "
                    "best: one chunk)",
                    json_object(
                        {"object": {"const": "chat.completion"}, "choices": {"type": "array", "minItems": 1}},
                        ["object", "choices"],
                    ),
                    stream=True,
                ),
                errors="OpenAIError",
                quality=True,
            ),
            "/translate_file": file_post(
                "Translate a document (LibreTranslate API): the answer's translatedFileUrl downloads the result",
                ok(
                    "translatedFileUrl, name, segments, markup_fallback_segments, markup_segments (segments with "
                    "inline markup by how it came back: markers, strict, runs, safe_form)",
                    json_object(
                        {
                            "translatedFileUrl": {"type": "string"},
                            "name": {"type": "string"},
                            "segments": {"type": "integer"},
                            "markup_fallback_segments": {"type": "integer"},
                            "markup_segments": json_object(
                                {k: {"type": "integer"} for k in ("markers", "strict", "runs", "safe_form")},
                                ["markers", "strict", "runs", "safe_form"],
                            ),
                        },
                        ["translatedFileUrl", "name", "segments", "markup_fallback_segments", "markup_segments"],
                    ),
                ),
            ),
            "/api/translate_file": file_post(
                "The web page's document endpoint: Server-Sent Events (start, progress with segments done of "
                "total, done with translatedFileUrl, or error)",
                {
                    "description": "text/event-stream",
                    "content": {
                        "text/event-stream": {
                            "schema": json_object(
                                {
                                    "event": {"type": "string", "enum": ["start", "progress", "done", "error"]},
                                    "data": {"type": "string"},
                                },
                                ["data"],
                            )
                        }
                    },
                },
            ),
            "/download_file/{file_id}/{name}": {
                "get": {
                    "summary": "A translated document, while it is kept (HYMT_FILE_RETENTION_S)",
                    "parameters": [
                        {"name": "file_id", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                    ],
                    "responses": {
                        "200": {
                            "description": "the file, as the media type of its format",
                            "content": {
                                media: {"schema": {"type": "string", "format": "binary"}}
                                for media in dict.fromkeys(media for _, media in FORMATS.values())
                            },
                        },
                        "404": _error("Error", "No such file, or no longer kept"),
                    },
                }
            },
            "/v1/models": get(
                "Model names, one per target language; root: the model that runs",
                ok(
                    "OpenAI model list",
                    json_object({"object": {"const": "list"}, "data": {"type": "array"}}, ["object", "data"]),
                ),
            ),
            "/health": {
                "get": {
                    "summary": "Status, profile, GPU memory, queue, the model (model_family), quality "
                    "best's availability and placement (quality), glossaries; 200 only when "
                    "it can translate",
                    "responses": {"200": health, "503": health},
                }
            },
            "/metrics": get(
                "Prometheus metrics",
                {"description": "text format", "content": {"text/plain": {"schema": {"type": "string"}}}},
            ),
        },
        "components": {
            "schemas": {
                "Error": json_object(
                    {"error": {"type": "string"}, "error_type": {"type": "string"}, "error_id": {"type": "string"}},
                    ["error", "error_type"],
                ),
                "OpenAIError": json_object(
                    {
                        "error": json_object(
                            {"message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "string"}},
                            ["message", "type", "code"],
                        ),
                        "error_type": {"type": "string"},
                    },
                    ["error"],
                ),
                "Health": json_object(
                    {
                        "status": {
                            "type": "string",
                            "enum": ["healthy", "degraded", "loading", "unhealthy", "draining"],
                        },
                        "phase": {"type": "string"},
                        "queue_depth": {"type": "integer"},
                        "profile": {"type": "string", "enum": list(TIERS_BY_NAME)},
                    },
                    ["status"],
                ),
            }
        },
    }
    if keys:
        spec["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "an API key (HYMT_API_KEYS)"}
        }
    return spec
