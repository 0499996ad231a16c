"""The OpenAPI description of the endpoints, as data built from the settings (served at /openapi.json, rendered by
/docs). It is exact: what it allows the server accepts, what it forbids the server refuses with a 4xx of the
documented shape, so a client generated from it works (schemathesis checks this in the tests)."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..documents import FORMATS, media_types
from ..glossary import MAX_REQUEST_TERMS, MAX_TERM_CHARS
from ..languages import ALIASES, LANGUAGES
from ..planner.tiers import TIERS_BY_NAME
from ..settings import Settings
from .alternatives import ALTERNATIVES_LIMIT
from .openai_compat import MODEL_NAME, ROLES
from .parsing import MAX_STYLE_CHARS

# At least one character that is not white space, as str.strip counts it: spelled out, because regular expression
# engines disagree on \s (ECMA's leaves out U+001C-U+001F and U+0085, and adds U+FEFF).
NONBLANK = r"[^\t\n\x0b\x0c\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


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


def _object(properties: dict, required: list[str], **extra) -> dict:
    return {"type": "object", "properties": properties, "required": required, **extra}


def _instructions(settings: Settings, offered: frozenset[str]) -> tuple[dict, dict]:
    """`style` and `background` in a JSON body and in a form: text where the model served has an official prompt
    for them, else only null (JSON) or nothing (a form), since the server refuses any text with a 422."""
    limits = {"style": MAX_STYLE_CHARS, "background": settings.max_chars}
    says = {
        "style": "the translation's style, e.g. formal or marketing (Hy-MT2's style prompt)",
        "background": "background information the translation takes into account (Hy-MT2's background "
        "prompt; HY-MT1.5's contextual-translation prompt)",
    }
    json_fields, form_fields = {}, {}
    for name, limit in limits.items():
        if name in offered:
            text = {
                "maxLength": limit,
                "pattern": NONBLANK,
                "description": says[name]
                + ("; a segment with glossary terms gets the terminology prompt instead" if name == "style" else ""),
            }
            json_fields[name], form_fields[name] = {"type": ["string", "null"], **text}, {"type": "string", **text}
        else:
            unavailable = f"{says[name]}: not offered by the model served (422)"
            json_fields[name], form_fields[name] = (
                {"type": "null", "description": unavailable},
                {"not": {}, "description": unavailable},
            )
    return json_fields, form_fields


def build_spec(settings: Settings, best: bool = False, offered: frozenset[str] = frozenset()) -> dict:
    """The document for these settings; `best`: whether quality best is available (known once the server is up:
    it needs a fusion model that fits beside the translation model); `offered`: which of style and background the
    model served has official prompts for (known once it is loaded)."""
    keys = bool(settings.api_keys)
    codes = language_codes()
    text = {"type": "string", "maxLength": settings.max_chars, "pattern": NONBLANK}
    any_text = {"type": "string", "maxLength": settings.max_chars}
    texts = {
        "anyOf": [
            text,
            {"type": "array", "items": any_text, "minItems": 1, "maxItems": settings.max_texts, "contains": text},
        ],
        "description": f"a text, or a list of up to {settings.max_texts} (at least one not blank); "
        f"{settings.max_chars} characters each at most",
    }
    target = {"type": "string", "enum": codes, "description": "language code (see /languages) or alias"}
    source = {"type": "string", "enum": ["auto", *codes], "default": "auto"}
    api_key = {
        "type": ["string", "null"],
        "description": "when the server requires keys (or send Authorization: Bearer); null: no key",
    }
    api_key_form = {**api_key, "type": "string"}
    term = {"type": "string", "maxLength": MAX_TERM_CHARS, "pattern": NONBLANK}
    quality_fields = {
        "glossary": {
            "type": ["array", "null"],
            "maxItems": MAX_REQUEST_TERMS,
            "items": _object({"source": term, "target": term}, ["source", "target"], additionalProperties=False),
            "description": (
                "terms to translate a fixed way: only those occurring in a segment go into its prompt; each is checked "
                "in the translation, a miss is retried once with stronger guidance and reported in the answer's "
                "`glossary`. Added to the server's glossaries (HYMT_GLOSSARIES)"
            ),
        },
        "context": {
            "type": "boolean",
            "default": True,
            "description": (
                "translate each segment of a text with its preceding segments as context (HY-MT1.5-7B's context "
                "prompt; models without one ignore it)"
            ),
        },
        "quality": {
            "type": "string",
            "enum": ["standard", "best"] if best else ["standard"],
            "default": "standard",
            "description": "best: six candidate translations under varied decoding settings, fused into "
            "one by Hunyuan-MT-Chimera-7B (about seven times the work); offered only where "
            "the server has a fusion model (/health's quality)",
        },
    }
    instructions, instructions_form = _instructions(settings, offered)
    quality_fields.update(instructions)
    # No official prompt gives both: a body with both as text is refused (422).
    one_instruction = (
        {
            "not": {
                "required": ["style", "background"],
                "properties": {"style": {"type": "string"}, "background": {"type": "string"}},
            }
        }
        if {"style", "background"} <= offered
        else {}
    )
    # In a form every value is text: context "true" or "false". A form's glossary is a JSON string of the list,
    # which a schema cannot describe exactly, so it is said in words only.
    quality_form = {
        "context": {"type": "string", "enum": ["true", "false"]},
        "quality": quality_fields["quality"],
        **instructions_form,
    }
    translate = _object(
        {
            "q": texts,
            "source": source,
            "target": target,
            "format": {"type": "string", "enum": ["text", "html"], "default": "text"},
            "alternatives": {
                "type": "integer",
                "minimum": 0,
                "maximum": ALTERNATIVES_LIMIT,
                "description": "distinct other translations per text, best first "
                "(sampled side by side; format text or html)",
            },
            "api_key": api_key,
            **quality_fields,
        },
        ["q", "target"],
        **one_instruction,
    )
    # In a form every value is text: a list is the field repeated, a number its digits.
    translate_form = _object(
        {
            **{k: v for k, v in translate["properties"].items() if k != "glossary"},
            **quality_form,
            "api_key": api_key_form,
            "alternatives": {"type": "string", "pattern": f"^0*[0-{ALTERNATIVES_LIMIT}]$"},
        },
        ["q", "target"],
        description="a form; glossary may be sent as a JSON string of the list",
        **one_instruction,
    )
    form_content = {
        "application/x-www-form-urlencoded": {"schema": translate_form},
        "multipart/form-data": {"schema": translate_form},
    }
    detect = _object({"q": texts, "api_key": api_key}, ["q"])
    detect_in_form = _object({"q": texts, "api_key": api_key_form}, ["q"])
    detect_form = {
        "application/x-www-form-urlencoded": {"schema": detect_in_form},
        "multipart/form-data": {"schema": detect_in_form},
    }
    page = _object(
        {
            "text": text,
            "source": source,
            "target": target,
            "stream": {"type": "boolean"},
            "greedy": {"type": "boolean"},
            **quality_fields,
        },
        ["text", "target"],
        **one_instruction,
    )
    part = _object({"type": {"type": "string", "const": "text"}, "text": any_text}, ["type", "text"])
    content = {"anyOf": [any_text, {"type": "array", "items": part, "maxItems": settings.max_texts}]}
    message = _object({"role": {"type": "string", "enum": list(ROLES)}, "content": content}, ["role", "content"])
    user_text = _object(
        {
            "role": {"const": "user"},
            "content": {"anyOf": [text, {"type": "array", "contains": _object({"text": text}, ["text"])}]},
        },
        ["role", "content"],
    )
    suffixed = [f"{MODEL_NAME}:{code}" for code in codes]
    chat = _object(
        {
            "model": {
                "type": "string",
                "enum": [MODEL_NAME, *suffixed],
                "default": MODEL_NAME,
                "description": "hunyuan-mt:<target> names the target language",
            },
            "messages": {
                "type": "array",
                "items": message,
                "minItems": 1,
                "contains": user_text,
                "description": "the last user message with text is translated",
            },
            "target_language": target,
            "source_language": source,
            "stream": {"type": "boolean"},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2},
            "stream_options": {
                "type": ["object", "null"],
                "properties": {"include_usage": {"type": "boolean"}},
                "description": "include_usage: a stream's last chunk carries the usage",
            },
            **quality_fields,
        },
        ["messages"],
        anyOf=[{"required": ["target_language"]}, {"required": ["model"], "properties": {"model": {"enum": suffixed}}}],
        **one_instruction,
    )

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
                "schema": _object({"event": {"type": "string"}, "data": {"type": "string"}}, ["data"])
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
                    "schema": _object(
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
                        },
                        ["file", "target"],
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
        return {"post": operation}

    def get(summary: str, response: dict) -> dict:
        return {"summary": summary, "responses": {"200": response}}

    detected = _object({"language": {"type": "string"}, "confidence": {"type": "number"}}, ["language", "confidence"])
    languages = get(
        "The 38 languages and their targets",
        ok(
            "[{code, name, targets}]",
            {
                "type": "array",
                "items": _object(
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
                {"required": True, "content": {"application/json": {"schema": translate}, **form_content}},
                ok(
                    "translatedText (and detectedLanguage when source is auto; glossary {terms_applied, "
                    "segments_with_terms, misses} when terms applied; markup_fallback_segments for format html)",
                    _object(
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
                {"required": True, "content": {"application/json": {"schema": detect}, **detect_form}},
                ok("[{language, confidence}] (confidence in percent)", {"type": "array", "items": detected}),
            ),
            "/languages": {"get": languages, "post": languages},
            "/frontend/settings": get(
                "LibreTranslate front-end settings (limits)",
                ok(
                    "charLimit and friends",
                    _object(
                        {"charLimit": {"type": "integer"}, "keyRequired": {"type": "boolean"}},
                        ["charLimit", "keyRequired"],
                    ),
                ),
            ),
            "/api/translate": post(
                "The web page's endpoint; stream=true answers with Server-Sent Events (start, token and progress "
                "with the partial text, done, or error)",
                _json_body(page),
                ok(
                    "JSON, or text/event-stream when stream=true (quality best: start, candidates, progress per "
                    "fused segment, done)",
                    _object(
                        {"translatedText": {"type": "string"}, "segments": {"type": "integer"}}, ["translatedText"]
                    ),
                    stream=True,
                ),
                quality=True,
            ),
            "/v1/chat/completions": post(
                "OpenAI-compatible: the last user message is translated. Target language from the model name "
                "(hunyuan-mt:de) or the field target_language; source_language optional",
                _json_body(chat),
                ok(
                    "chat.completion (with the extra field glossary), or chat.completion.chunk events (quality "
                    "best: one chunk)",
                    _object(
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
                    _object(
                        {
                            "translatedFileUrl": {"type": "string"},
                            "name": {"type": "string"},
                            "segments": {"type": "integer"},
                            "markup_fallback_segments": {"type": "integer"},
                            "markup_segments": _object(
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
                            "schema": _object(
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
                    _object({"object": {"const": "list"}, "data": {"type": "array"}}, ["object", "data"]),
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
                "Error": _object(
                    {"error": {"type": "string"}, "error_type": {"type": "string"}, "error_id": {"type": "string"}},
                    ["error", "error_type"],
                ),
                "OpenAIError": _object(
                    {
                        "error": _object(
                            {"message": {"type": "string"}, "type": {"type": "string"}, "code": {"type": "string"}},
                            ["message", "type", "code"],
                        ),
                        "error_type": {"type": "string"},
                    },
                    ["error"],
                ),
                "Health": _object(
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
