"""The OpenAPI description of the endpoints, as data built from the settings (served at /openapi.json, rendered by
/docs). It is exact: what it allows the server accepts, what it forbids the server refuses with a 4xx of the
documented shape, so a client generated from it works (schemathesis checks this in the tests)."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..documents import FORMATS, media_types
from ..settings import Settings
from ..store.jobs import JobState
from ..tiers import TIERS_BY_NAME
from .openai_compat import MODEL_NAME
from .openapi_deepl import deepl_paths
from .schemas import error_response, json_object, request_bodies


def _file_response(description: str) -> dict:
    """A translated document, as the media type of its format."""
    return {
        "description": description,
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in dict.fromkeys(media for _, media in FORMATS.values())
        },
    }


# A document job as /api/jobs answers it (jobs.job_json).
JOB = json_object(
    {
        "id": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "status": {"type": "string", "enum": [state.value for state in JobState]},
        "name": {"type": "string", "description": "the name offered for the translated file"},
        "source": {"type": ["string", "null"], "description": "the language given or detected; null: undetectable"},
        "target": {"type": "string"},
        "segments_done": {"type": "integer", "minimum": 0},
        "segments_total": {"type": "integer", "minimum": 0},
        "queue_position": {"type": ["integer", "null"], "minimum": 1, "description": "1: next; null unless queued"},
        "seconds_remaining": {
            "type": ["number", "null"],
            "minimum": 0,
            "description": "estimated while translating, once a text has settled; else null",
        },
        "billed_characters": {"type": "integer", "minimum": 0},
        "created_at": {"type": "string", "format": "date-time"},
        "started_at": {"type": ["string", "null"], "format": "date-time"},
        "finished_at": {"type": ["string", "null"], "format": "date-time"},
        "error": {"type": ["string", "null"], "description": "why the job failed"},
        "result_url": {"type": ["string", "null"], "description": "where the translated file is, once done"},
        "report": {
            "type": ["object", "null"],
            "description": "once done: what /translate_file answers besides the URL (segments, "
            "markup_fallback_segments, markup_segments)",
        },
    },
    [
        "id",
        "status",
        "name",
        "source",
        "target",
        "segments_done",
        "segments_total",
        "queue_position",
        "seconds_remaining",
        "billed_characters",
        "created_at",
        "started_at",
        "finished_at",
        "error",
        "result_url",
        "report",
    ],
)


def _errors(schema: str, keys: bool, quality: bool = False, glossary: bool = False, counted: bool = False) -> dict:
    errors = {
        "400": error_response(schema, "The request is malformed: invalid JSON or text, a missing or wrong field"),
        "413": error_response(schema, "The body is over HYMT_MAX_UPLOAD_BYTES"),
        "415": error_response(schema, "The content type is not accepted"),
        "429": error_response(
            schema,
            "Refused at once: the expected wait is over HYMT_MAX_QUEUE_WAIT_S, the queue is full, "
            "or a rate limit is reached",
            retry_after=True,
        ),
        "503": error_response(schema, "Starting, stopped or shutting down (draining)", retry_after=True),
    }
    if quality:
        errors["422"] = error_response(
            schema,
            "quality best asked where the server has no fusion model, or style or "
            "background where the model served has no official prompt for it, or both "
            "(the reason is said)",
        )
    if glossary:
        errors["404"] = error_response(schema, "A glossary_id that names no glossary of this key's")
        errors["409"] = error_response(schema, "A glossary for other languages than the request's")
    if counted:
        errors["456"] = error_response(schema, "The key's characters of the month are used up (HYMT_CHARACTER_LIMIT)")
    if keys:
        errors["401"] = error_response(schema, "No API key (api_key or Authorization: Bearer)")
        errors["403"] = error_response(schema, "A wrong API key")
    return errors


def _body(content: dict, example: dict) -> dict:
    """A required request body with its example in each media type: what /docs fills in to try it out."""
    return {"required": True, "content": {media: {**value, "example": example} for media, value in content.items()}}


def _json_body(schema: dict, example: dict) -> dict:
    return _body({"application/json": {"schema": schema}}, example)


# The examples' text and target language.
EXAMPLE_TEXT, EXAMPLE_TARGET = "Hello, world!", "de"
# The example of DeepL's status and result requests: a document_key as its upload answers one (64 hex digits).
EXAMPLE_DOCUMENT_KEY = "5f0c1d9e" * 8


def build_spec(settings: Settings, best: bool = False, offered: frozenset[str] = frozenset()) -> dict:
    """The document for these settings; `best`: whether quality best is available (known once the server is up:
    it needs a fusion model that fits beside the translation model); `offered`: which of style and background the
    model served has official prompts for (known once it is loaded)."""
    keys = bool(settings.api_keys)
    bodies = request_bodies(settings, best, offered)
    example_text = EXAMPLE_TEXT[: settings.max_chars]  # within HYMT_MAX_CHARS, however low it is set
    source, target, api_key_form = bodies.source, bodies.target, bodies.api_key_form

    def post(
        summary: str,
        body: dict,
        ok: dict,
        errors: str = "Error",
        quality: bool = False,
        status: str = "200",
        glossary: bool = True,
        counted: bool = True,
    ) -> dict:
        """`glossary`: the route takes glossary_id (404 among its answers); `counted`: its characters count
        against HYMT_CHARACTER_LIMIT (456)."""
        operation = {
            "summary": summary,
            "requestBody": body,
            "responses": {status: ok, **_errors(errors, keys, quality, glossary, counted)},
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

    formats = " ".join(FORMATS)
    accepted = list(media_types())
    document = {
        "type": "string",
        "format": "binary",
        "description": (
            f"a document, by its file name's extension ({formats}) "
            f"or else by the media type it is sent as ({', '.join(accepted)})"
        ),
        # A text file's content (sent as text/plain, the first of the encoding's types); /docs has one chosen.
        "examples": [f"{example_text}\n"],
    }
    # The format is the file name's extension, else the part's Content-Type: the encoding names the media types, so
    # a client that sends one of them with any file name is understood.
    document_encoding = {"file": {"contentType": ", ".join(accepted)}}
    bad_file = (
        "a file its library cannot read (invalid_file); XML that declares entities (xml_entities); "
        f"not a supported format ({formats})"
    )
    too_large_file = (
        "Over HYMT_MAX_FILE_BYTES; an archive past its limits (archive_too_large: members, expanded size, "
        "ratio); more segments than 16 x HYMT_MAX_QUEUE_SEGMENTS (too_many_segments) or one over "
        "HYMT_MAX_CHARS (segment_too_long)"
    )
    queue_full = (
        "Refused at once: the queue of unfinished documents is full (HYMT_MAX_QUEUED_JOB_SEGMENTS, "
        "HYMT_MAX_QUEUED_JOB_BYTES), or a rate limit is reached"
    )

    # A document's form as /docs shows it, which fills each field with a sample (sent unless emptied): an example
    # target; empty (so left out) the key fields, whose header Authorize sets, and glossary_id; readOnly (not sent)
    # the instructions the model has no prompt for, which the server refuses whatever they hold.
    empty = {"examples": [""]}
    document_options = {
        name: {**field, "readOnly": True}
        if name in ("style", "background") and name not in offered
        else {**field, **empty}
        if name == "glossary_id"
        else field
        for name, field in bodies.document_form.items()
    }

    def file_post(summary: str, ok: dict, status: str = "200") -> dict:
        body = {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": json_object(
                        {
                            "file": document,
                            "source": source,
                            "target": {**target, "examples": [EXAMPLE_TARGET]},
                            "api_key": {**api_key_form, **empty},
                            **document_options,
                        },
                        ["file", "target"],
                        description="a form; glossary (terms for the document's texts without inline markup) "
                        "may be sent as a JSON string of the list",
                        **bodies.one_instruction,
                    ),
                    "encoding": document_encoding,
                }
            },
        }
        operation = post(f"{summary}. Formats: {formats}", body, ok, status=status)["post"]
        operation["responses"]["400"] = error_response(
            "Error",
            "A malformed form or field; a file its library cannot read "
            "(invalid_file); XML that declares entities (xml_entities)",
        )
        operation["responses"]["413"] = error_response("Error", too_large_file)
        operation["responses"]["415"] = error_response("Error", "Not a supported format (the message lists them)")
        operation["responses"]["422"] = error_response(
            "Error", "style or background where the model served has no official prompt for it, or both"
        )
        operation["responses"]["429"] = error_response("Error", queue_full, retry_after=True)
        return {"post": operation}

    # hymt's document jobs: read like any request with a key (a query string's api_key too), each job its key's
    # alone (another key's is a 404, as an unknown one).
    job_id = {
        "name": "job_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "description": "the id POST /api/jobs answered",
    }
    api_key_query = {
        "name": "api_key",
        "in": "query",
        "required": False,
        "schema": {"type": "string"},
        "description": "when the server requires keys (or send Authorization: Bearer)",
    }
    job = {"$ref": "#/components/schemas/Job"}

    def job_read(summary: str, operation_id: str, response: dict, errors: dict | None = None, one: bool = True) -> dict:
        """An operation on the caller's jobs (`one`: on the job of the path's id): the key and rate limits as a
        POST's, no body to send."""
        common = _errors("Error", keys)
        for status in ("400", "413", "415"):
            common[status] = error_response(
                "Error",
                {
                    "400": "A query string that is not UTF-8 text, or a malformed body",
                    "413": "A body over HYMT_MAX_UPLOAD_BYTES",
                    "415": "A body of a content type not accepted",
                }[status],
            )
        common.pop("503")  # the jobs are in the store: listed and read while the engine loads or drains
        operation = {
            "summary": summary,
            "operationId": operation_id,
            "parameters": [job_id, api_key_query] if one else [api_key_query],
            "responses": {"200": response, **common, **(errors or {})},
        }
        if keys:
            operation["security"] = [{"bearer": []}]
        return operation

    not_found = error_response(
        "Error", "No such job: unknown, expired (HYMT_FILE_RETENTION_S after it ended), or another key's"
    )
    job_links = {
        name: {"operationId": operation, "parameters": {"job_id": "$response.body#/id"}}
        for name, operation in (("GetJob", "getJob"), ("CancelJob", "cancelJob"), ("GetJobResult", "getJobResult"))
    }
    submit = file_post(
        "Submit a document job: answered at once (202) with the job, which the server translates in the background "
        "(its progress at /api/jobs/{job_id}, its file at /api/jobs/{job_id}/result once done); unfinished jobs "
        "resume after a restart",
        {
            "description": "the job, queued",
            "content": {"application/json": {"schema": job}},
            "links": job_links,
        },
        status="202",
    )
    submit["post"]["operationId"] = "submitJob"

    # DeepL's document API: DeepL's error shape ({"message"}) and statuses (403 for a missing key too; 400 where
    # hymt says 415 or 422).
    def deepl_operation(summary: str, operation_id: str, body: dict, ok: dict, errors: dict) -> dict:
        responses = {
            "200": ok,
            "400": error_response("DeepLError", errors.pop("400")),
            "413": error_response("DeepLError", errors.pop("413", "A body over HYMT_MAX_UPLOAD_BYTES")),
            "429": error_response("DeepLError", errors.pop("429", "A rate limit is reached"), retry_after=True),
        }
        forbidden = ["no API key, or a wrong one"] if keys else []
        if "403" in errors:
            forbidden.append(errors.pop("403"))
        if forbidden:
            said = "; ".join(forbidden)
            responses["403"] = error_response("DeepLError", said[0].upper() + said[1:])
        for status, description in errors.items():
            responses[status] = (
                description if isinstance(description, dict) else error_response("DeepLError", description)
            )
        operation = {"summary": summary, "operationId": operation_id, "requestBody": body, "responses": responses}
        if keys:
            operation["security"] = [{"deepl": []}, {"bearer": []}]
        return {"post": operation}

    document_id = {
        "name": "document_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
        "description": "the document_id the upload answered",
    }
    document_body = _body(bodies.deepl_document, {"document_key": EXAMPLE_DOCUMENT_KEY})
    document_links = {
        name: {
            "operationId": operation,
            "parameters": {"document_id": "$response.body#/document_id"},
            "requestBody": {"document_key": "$response.body#/document_key"},
        }
        for name, operation in (("DocumentStatus", "deeplDocumentStatus"), ("DocumentResult", "deeplDocumentResult"))
    }
    no_document = "No such document: unknown, expired, or another key's"
    deepl_upload = deepl_operation(
        f"DeepL's document upload (DeepL API v2): the document becomes a job; its document_id and document_key "
        f"ask for its status and result. Formats: {formats}",
        "deeplUploadDocument",
        {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": json_object(
                        {
                            "file": document,
                            **bodies.deepl_upload,
                            "target_lang": {**bodies.deepl_upload["target_lang"], "examples": [EXAMPLE_TARGET.upper()]},
                            "glossary_id": {**bodies.deepl_upload["glossary_id"], **empty},
                            "auth_key": {**bodies.deepl_upload["auth_key"], **empty},
                        },
                        ["file", "target_lang"],
                        description="DeepL's form; output_format, where sent, must be the file name's own "
                        "extension (a document is translated into its own format only), else a 400",
                    ),
                    "encoding": document_encoding,
                }
            },
        },
        {
            "description": "the document's id and key",
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/DeepLDocument"}},
            },
            "links": document_links,
        },
        {
            "400": "A malformed form; a missing or unsupported field (target_lang, source_lang, formality, "
            f"output_format); {bad_file}",
            "404": "A glossary_id that names no glossary of this key's",
            "409": "A glossary for other languages than the document's",
            "413": too_large_file,
            "456": "The key's characters of the month are used up (HYMT_CHARACTER_LIMIT)",
            "429": queue_full,
            "503": error_response("DeepLError", "Starting, stopped or shutting down (draining)", retry_after=True),
        },
    )
    deepl_status = deepl_operation(
        "DeepL's document status: queued, translating (seconds_remaining once known), done (billed_characters) "
        "or error (error_message; a cancelled job too)",
        "deeplDocumentStatus",
        document_body,
        {
            "description": "the document's status",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/DeepLDocumentStatus"}}},
        },
        {
            "400": "A malformed body, one of a content type not accepted, or no document_key",
            "403": "a wrong document_key",
            "404": no_document,
        },
    )
    deepl_status["post"]["parameters"] = [document_id]
    deepl_result = deepl_operation(
        "DeepL's translated document, once its status is done",
        "deeplDocumentResult",
        document_body,
        _file_response("the translated file, as the media type of its format"),
        {
            "400": "A malformed body, one of a content type not accepted, or no document_key",
            "403": "a wrong document_key",
            "404": f"{no_document}; its file no longer kept",
            "409": "A document whose translation failed or was cancelled: it has no result",
            # DeepL's answer to a result asked for too soon; its clients wait for the status to be done first.
            "503": error_response("DeepLError", "The document is not translated yet (queued or translating)"),
        },
    )
    deepl_result["post"]["parameters"] = [document_id]

    # LibreTranslate's suggestion (its fields), which this server refuses whatever is sent.
    suggestion = json_object(
        {
            "q": {"type": "string", "description": "the original text"},
            "s": {"type": "string", "description": "the suggested translation"},
            "source": {"type": "string", "description": "the original's language"},
            "target": {"type": "string", "description": "the suggestion's language"},
        },
        ["q", "s", "source", "target"],
    )

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
            "description": "Self-hosted Hunyuan-MT-7B translation. LibreTranslate- and OpenAI-compatible, with "
            "DeepL's document API (/v2/document) and document jobs of its own (/api/jobs).",
        },
        "paths": {
            "/translate": post(
                "Translate text (LibreTranslate API)",
                _body(
                    {"application/json": {"schema": bodies.translate}, **bodies.translate_form},
                    {"q": example_text, "source": "auto", "target": EXAMPLE_TARGET},
                ),
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
                _body(
                    {"application/json": {"schema": bodies.detect}, **bodies.detect_form},
                    {"q": example_text},
                ),
                ok("[{language, confidence}] (confidence in percent)", {"type": "array", "items": detected}),
                glossary=False,
                counted=False,
            ),
            "/languages": {"get": languages, "post": languages},
            "/frontend/settings": {
                "get": get(
                    "LibreTranslate front-end settings (limits)",
                    ok(
                        "charLimit and friends",
                        json_object(
                            {"charLimit": {"type": "integer"}, "keyRequired": {"type": "boolean"}},
                            ["charLimit", "keyRequired"],
                        ),
                    ),
                )
            },
            "/suggest": {
                "post": {
                    "summary": "LibreTranslate's translation suggestions: off on this server (/frontend/settings: "
                    "suggestions false), so refused as LibreTranslate refuses them then, whatever the body or key",
                    "requestBody": _body(
                        {
                            media: {"schema": suggestion}
                            for media in (
                                "application/json",
                                "application/x-www-form-urlencoded",
                                "multipart/form-data",
                            )
                        },
                        {"q": EXAMPLE_TEXT, "s": "Hallo, Welt!", "source": "en", "target": EXAMPLE_TARGET},
                    ),
                    "responses": {"403": error_response("Error", "Suggestions are disabled on this server.")},
                }
            },
            "/api/translate": post(
                "The web page's endpoint; stream=true answers with Server-Sent Events (start, token and progress "
                "with the partial text, done, or error)",
                _json_body(bodies.page, {"text": example_text, "source": "auto", "target": EXAMPLE_TARGET}),
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
                _json_body(
                    bodies.chat,
                    {
                        "model": f"{MODEL_NAME}:{EXAMPLE_TARGET}",
                        "messages": [{"role": "user", "content": example_text}],
                    },
                ),
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
                glossary=False,
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
                "The web page's document endpoint, a document job followed as Server-Sent Events: start "
                "({segments, name, id: the job's}), queued ({position} in the queue of documents, as it changes), "
                "progress ({done, total, seconds_remaining}: texts done of total), done (translatedFileUrl and the "
                "report /translate_file answers), or error; a client that leaves has its job cancelled",
                {
                    "description": "text/event-stream",
                    "content": {
                        "text/event-stream": {
                            "schema": json_object(
                                {
                                    "event": {
                                        "type": "string",
                                        "enum": ["start", "queued", "progress", "done", "error"],
                                    },
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
                        "200": _file_response("the file, as the media type of its format"),
                        "404": error_response("Error", "No such file, or no longer kept"),
                    },
                }
            },
            "/api/jobs": {
                **submit,
                "get": job_read(
                    "The caller's document jobs (every job when the server requires no keys), newest first",
                    "listJobs",
                    ok(
                        "{jobs: [job, ...]}",
                        json_object({"jobs": {"type": "array", "items": job}}, ["jobs"]),
                    ),
                    one=False,
                ),
            },
            "/api/jobs/{job_id}": {
                "get": job_read(
                    "A document job: its status and progress", "getJob", ok("the job", job), {"404": not_found}
                ),
                "delete": job_read(
                    "Cancel a document job (one that has ended is left as it is): the job afterwards, kept until "
                    "it expires",
                    "cancelJob",
                    ok("the job", job),
                    {"404": not_found},
                ),
            },
            "/api/jobs/{job_id}/result": {
                "get": job_read(
                    "A done job's translated file",
                    "getJobResult",
                    _file_response("the translated file, as the media type of its format"),
                    {
                        "404": error_response(
                            "Error", "No such job (unknown, expired, another key's), or its file no longer kept"
                        ),
                        "409": error_response(
                            "Error",
                            "The job is not done: queued or translating (not_ready), or failed or cancelled "
                            "(no_result)",
                        ),
                    },
                )
            },
            "/v2/document": deepl_upload,
            "/v2/document/{document_id}": deepl_status,
            "/v2/document/{document_id}/result": deepl_result,
            "/v1/models": {
                "get": get(
                    "Model names, one per target language; root: the model that runs",
                    ok(
                        "OpenAI model list",
                        json_object({"object": {"const": "list"}, "data": {"type": "array"}}, ["object", "data"]),
                    ),
                )
            },
            "/health": {
                "get": {
                    "summary": "Status, profile, GPU memory, queue, the model (model_family), quality "
                    "best's availability and placement (quality), glossaries; 200 only when "
                    "it can translate",
                    "responses": {"200": health, "503": health},
                }
            },
            "/metrics": {
                "get": get(
                    "Prometheus metrics",
                    {"description": "text format", "content": {"text/plain": {"schema": {"type": "string"}}}},
                )
            },
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
                "Job": JOB,
                "DeepLError": json_object({"message": {"type": "string"}}, ["message"]),
                "DeepLDocument": json_object(
                    {"document_id": {"type": "string"}, "document_key": {"type": "string"}},
                    ["document_id", "document_key"],
                ),
                "DeepLDocumentStatus": json_object(
                    {
                        "document_id": {"type": "string"},
                        "status": {"type": "string", "enum": ["queued", "translating", "done", "error"]},
                        "seconds_remaining": {"type": "integer", "minimum": 0},
                        "billed_characters": {"type": "integer", "minimum": 0},
                        "error_message": {"type": "string"},
                    },
                    ["document_id", "status"],
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
            "bearer": {"type": "http", "scheme": "bearer", "description": "an API key (HYMT_API_KEYS)"},
            "deepl": {
                "type": "apiKey",
                "in": "header",
                "name": "Authorization",
                "description": "DeepL's scheme: `Authorization: DeepL-Auth-Key <key>`, the key one of "
                "HYMT_API_KEYS (or the form field auth_key)",
            },
        }
    deepl_text_paths, deepl_schemas = deepl_paths(settings, keys)
    spec["paths"].update(deepl_text_paths)
    spec["components"]["schemas"].update(deepl_schemas)
    return spec
