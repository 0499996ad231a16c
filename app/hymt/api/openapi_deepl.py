"""The OpenAPI description of DeepL's text, language, usage and glossary routes (deepl.py, deepl_text.py,
deepl_glossaries.py), merged into the document openapi.py builds. As exact as the rest: what it allows is accepted,
what it forbids is refused with DeepL's error shape."""

from __future__ import annotations

from ..glossary import ENTRY_FORMATS, entries_pattern
from ..settings import Settings
from .deepl import FORMALITIES
from .deepl_glossaries import MAX_NAME_CHARS
from .deepl_text import FORM_FLAGS, MAX_CONTEXT_CHARS, SPLIT_SENTENCES, TAG_HANDLINGS
from .glossaries import MAX_GLOSSARIES
from .schemas import NONBLANK, deepl_language_codes, error_response, json_object, text_schemas


def _error(description: str, retry_after: bool = False) -> dict:
    return error_response("DeepLError", description, retry_after)


def _json(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def deepl_paths(settings: Settings, keys: bool) -> tuple[dict, dict]:
    """(paths, component schemas) of DeepL's routes but its documents (openapi.py describes those)."""
    codes = deepl_language_codes()
    target_lang = {"type": "string", "enum": codes, "description": "DeepL's code (DE, EN-GB, PT-BR, ZH-HANS, ...)"}
    source_lang = {"type": "string", "enum": ["", *codes], "description": "left out or empty: detected per text"}
    _, _, texts = text_schemas(settings)
    tag_names = {
        "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        "description": "element names: a list, or one comma-separated string",
    }
    glossary_id = {
        "type": "string",
        "description": "a stored glossary (/v2/glossaries) for the request's languages; empty: none",
    }
    auth_key = {"type": "string", "description": "DeepL's older way to send the key (or Authorization)"}

    def translate_fields(flag: dict, many: dict, one: dict) -> dict:
        return {
            "text": texts,
            "target_lang": target_lang,
            "source_lang": source_lang,
            "tag_handling": {
                "type": "string",
                "enum": ["", *TAG_HANDLINGS],
                "description": "html: tags and links kept, as documents keep them; xml: a fragment of any elements "
                "(one not well-formed is translated as plain text)",
            },
            "ignore_tags": {**tag_names, "description": "elements whose content is not translated"},
            "splitting_tags": {**tag_names, "description": "xml: elements whose content stands apart"},
            "non_splitting_tags": {**tag_names, "description": "accepted: elements not splitting are inline here"},
            "outline_detection": {**flag, "description": "accepted"},
            "preserve_formatting": {**flag, "description": "accepted: hymt keeps a text's whitespace and lines"},
            "show_billed_characters": {**flag, "description": "accepted: billed_characters is always given"},
            "split_sentences": {
                "type": "string",
                "enum": list(SPLIT_SENTENCES),
                "description": "accepted: hymt packs whole sentences of a line into segments, whatever the value",
            },
            "context": {
                "type": "string",
                "maxLength": MAX_CONTEXT_CHARS,
                "description": "text before the texts, not translated: the model's context prompt where it has one",
            },
            "formality": {
                "type": "string",
                "enum": ["", *FORMALITIES],
                "description": "more / less: the style prompt's formal / informal where the model has one; "
                "accepted and ignored elsewhere",
            },
            "glossary_id": one,
            "glossary_ids": many,
            "auth_key": auth_key,
        }

    # Not both glossary_id and glossary_ids (the server refuses the two together, even empty).
    one_glossary = {"not": {"required": ["glossary_id", "glossary_ids"]}}
    json_fields = translate_fields(
        {"type": "boolean"},
        {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": MAX_GLOSSARIES},
        {**glossary_id, "type": ["string", "null"]},
    )
    # In JSON a null option is the option left out (the key's field aside: a null key is refused).
    translate_json = json_object(
        {
            name: field if name in ("text", "target_lang", "auth_key") else {"anyOf": [field, {"type": "null"}]}
            for name, field in json_fields.items()
        },
        ["text", "target_lang"],
        **one_glossary,
    )
    translate_form = json_object(
        translate_fields(
            {"type": "string", "enum": list(FORM_FLAGS)},
            {
                "type": "string",
                "pattern": f"^[^,]*(,[^,]*){{0,{MAX_GLOSSARIES - 1}}}$",
                "description": f"up to {MAX_GLOSSARIES} ids, comma-separated; empty: none",
            },
            glossary_id,
        ),
        ["text", "target_lang"],
        description="a form; its fields may be sent in the query string instead",
        **one_glossary,
    )
    # What /docs fills in to try it out (each valid against its schema: tests/server/test_docs.py).
    translate_example = {"text": "Hello, world!"[: settings.max_chars], "target_lang": "DE"}
    forbidden = ["403"] if keys else []

    def responses(ok: dict | None, errors: dict[str, str | dict]) -> dict:
        """An operation's answers: `ok` as 200 (None: a status of `errors` is its success), the errors (a text:
        DeepL's error shape), and those every route here can give."""
        answers: dict = {} if ok is None else {"200": ok}
        for status, said in errors.items():
            answers[status] = _error(said) if isinstance(said, str) else said
        answers["429"] = _error("A rate limit is reached (HYMT_RATE_LIMIT_PER_KEY / _PER_ADDRESS)", True)
        for status in forbidden:
            answers[status] = _error("No API key, or a wrong one")
        return answers

    def operation(summary: str, operation_id: str, answers: dict, **more) -> dict:
        op = {"summary": summary, "operationId": operation_id, "responses": answers, **more}
        if keys:
            op["security"] = [{"deepl": []}, {"bearer": []}]
        return op

    not_ready = _error("Starting, stopped or shutting down (draining)", retry_after=True)
    translations = json_object(
        {
            "translations": {
                "type": "array",
                "items": json_object(
                    {
                        "detected_source_language": {
                            "type": "string",
                            "description": "the given source_lang, or the one detected (empty: undetectable)",
                        },
                        "text": {"type": "string"},
                        "billed_characters": {"type": "integer", "minimum": 0},
                    },
                    ["detected_source_language", "text", "billed_characters"],
                ),
            }
        },
        ["translations"],
    )
    translate = operation(
        "Translate text (DeepL API v2)",
        "deeplTranslateText",
        responses(
            _json("the translations, in the order of the texts", translations),
            {
                "400": "A malformed body; a missing or unsupported field; a text over HYMT_MAX_CHARS characters or "
                "more than HYMT_MAX_TEXTS texts",
                "404": "A glossary_id that names no glossary of this key's",
                "409": "A glossary for other languages than the request's",
                "413": "A body over HYMT_MAX_UPLOAD_BYTES",
                "456": "The key's characters of the month are used up (HYMT_CHARACTER_LIMIT)",
                "503": not_ready,
            },
        ),
        requestBody={
            "required": True,
            "content": {
                "application/json": {"schema": translate_json, "example": translate_example},
                "application/x-www-form-urlencoded": {"schema": translate_form, "example": translate_example},
            },
        },
    )
    language = json_object(
        {
            "language": {"type": "string"},
            "name": {"type": "string"},
            "supports_formality": {"type": "boolean", "description": "targets only"},
        },
        ["language", "name"],
    )
    languages = operation(
        "hymt's languages in DeepL's codes (type=target: with DeepL's regional targets)",
        "deeplLanguages",
        responses(
            _json("source or target languages", {"type": "array", "items": language}),
            {"400": "A type other than source or target"},
        ),
        parameters=[
            {
                "name": "type",
                "in": "query",
                "required": False,
                "schema": {"type": "string", "enum": ["source", "target"]},
            }
        ],
    )
    usage = operation(
        "Characters the key (the server, when keys are off) had translated this month (UTC), on every API",
        "deeplUsage",
        responses(
            _json(
                "the month's count and the limit (10^12 when HYMT_CHARACTER_LIMIT sets none)",
                json_object(
                    {
                        "character_count": {"type": "integer", "minimum": 0},
                        "character_limit": {"type": "integer", "minimum": 1},
                    },
                    ["character_count", "character_limit"],
                ),
            ),
            {},
        ),
    )
    pair = json_object(
        {"source_lang": {"type": "string"}, "target_lang": {"type": "string"}}, ["source_lang", "target_lang"]
    )
    pairs = operation(
        "Every pair of hymt's languages, as glossaries name them",
        "deeplGlossaryLanguagePairs",
        responses(
            _json(
                "the pairs",
                json_object({"supported_languages": {"type": "array", "items": pair}}, ["supported_languages"]),
            ),
            {},
        ),
    )

    entries_fields = {
        "name": {"type": "string", "maxLength": MAX_NAME_CHARS, "pattern": NONBLANK},
        "source_lang": {**target_lang, "description": "the source terms' language"},
        "target_lang": {**target_lang, "description": "the target terms' language"},
        "auth_key": auth_key,
    }
    by_format = [
        {
            "properties": {
                "entries_format": {"const": "csv"},
                "entries": {"type": "string", "pattern": entries_pattern("csv")},
            },
            "required": ["entries_format"],
        },
        {
            "properties": {
                "entries_format": {"const": "tsv"},
                "entries": {"type": "string", "pattern": entries_pattern("tsv")},
            },
        },
    ]
    glossary_body = json_object(
        {
            **entries_fields,
            "entries": {
                "type": "string",
                "description": f"one entry a line: source and target term (each up to 200 characters) split by a "
                f"tab (tsv) or a comma (csv, CSV-quoted; two more columns, the languages, allowed); blank lines "
                f"passed over; a source term given again is dropped; at most {settings.max_glossary_entries} "
                f"entries (HYMT_MAX_GLOSSARY_ENTRIES)",
            },
            "entries_format": {"type": "string", "enum": list(ENTRY_FORMATS), "default": "tsv"},
        },
        ["name", "source_lang", "target_lang", "entries"],
        oneOf=by_format,
    )
    glossary_example = {
        "name": "Hardware",
        "source_lang": "EN",
        "target_lang": "DE",
        "entries": "GPU\tGrafikkarte\ndriver\tTreiber\n",
        "entries_format": "tsv",
    }
    info = {"$ref": "#/components/schemas/DeepLGlossary"}
    glossary_id_param = {
        "name": "glossary_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "a glossary_id that creating it answered",
    }
    links = {
        name: {"operationId": op, "parameters": {"glossary_id": "$response.body#/glossary_id"}}
        for name, op in (
            ("GetGlossary", "deeplGetGlossary"),
            ("GlossaryEntries", "deeplGlossaryEntries"),
            ("DeleteGlossary", "deeplDeleteGlossary"),
        )
    }
    no_glossary = "No such glossary: unknown, deleted, or another key's"
    glossaries = {
        "get": operation(
            "The key's glossaries (and those made with keys off)",
            "deeplListGlossaries",
            responses(
                _json("the glossaries", json_object({"glossaries": {"type": "array", "items": info}}, ["glossaries"])),
                {},
            ),
        ),
        "post": operation(
            "Store a glossary (DeepL API v2): a name, a language pair and entries as TSV or CSV",
            "deeplCreateGlossary",
            responses(
                None,
                {
                    "201": {**_json("the glossary", info), "links": links},
                    "400": "A malformed body; a missing or unsupported field; entries not as the format says",
                    "413": "A body over HYMT_MAX_UPLOAD_BYTES",
                },
            ),
            requestBody={
                "required": True,
                "content": {
                    "application/json": {"schema": glossary_body, "example": glossary_example},
                    "application/x-www-form-urlencoded": {"schema": glossary_body, "example": glossary_example},
                },
            },
        ),
    }
    one = {
        "get": operation(
            "One glossary", "deeplGetGlossary", responses(_json("the glossary", info), {"404": no_glossary})
        ),
        "delete": operation(
            "Delete a glossary",
            "deeplDeleteGlossary",
            responses(None, {"204": {"description": "deleted"}, "404": no_glossary}),
        ),
        "parameters": [glossary_id_param],
    }
    entries = {
        "get": operation(
            "A glossary's entries, as TSV",
            "deeplGlossaryEntries",
            responses(
                {
                    "description": "source TAB target, a line each",
                    "content": {"text/tab-separated-values": {"schema": {"type": "string"}}},
                },
                {"400": "An Accept header without text/tab-separated-values", "404": no_glossary},
            ),
        ),
        "parameters": [glossary_id_param],
    }
    paths = {
        "/v2/translate": {"post": translate},
        "/v2/languages": {"get": languages},
        "/v2/usage": {"get": usage},
        "/v2/glossary-language-pairs": {"get": pairs},
        "/v2/glossaries": glossaries,
        "/v2/glossaries/{glossary_id}": one,
        "/v2/glossaries/{glossary_id}/entries": entries,
    }
    schemas = {
        "DeepLGlossary": json_object(
            {
                "glossary_id": {"type": "string"},
                "name": {"type": "string"},
                "ready": {"type": "boolean"},
                "source_lang": {"type": "string"},
                "target_lang": {"type": "string"},
                "creation_time": {"type": "string", "format": "date-time"},
                "entry_count": {"type": "integer", "minimum": 1},
            },
            ["glossary_id", "name", "ready", "source_lang", "target_lang", "creation_time", "entry_count"],
        )
    }
    return paths, schemas
