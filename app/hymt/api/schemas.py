"""The request bodies the OpenAPI description (openapi.py) documents, built from the settings: the exact limits and
enums the parsers enforce, so that what a schema allows the server accepts."""

from __future__ import annotations

from dataclasses import dataclass

from ..glossary import MAX_REQUEST_TERMS, MAX_TERM_CHARS
from ..languages import ALIASES, LANGUAGES
from ..settings import Settings
from .alternatives import ALTERNATIVES_LIMIT
from .deepl import CODES, FORMALITIES
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


def deepl_language_codes() -> list[str]:
    """Every spelling of a language DeepL's document API accepts here: DeepL's own codes in its upper case (DE, EN-GB,
    PT-BR, ZH-HANS), and hymt's codes and aliases as /translate spells them (the field is read without regard to
    case)."""
    codes = language_codes()
    return list(dict.fromkeys([*(code.upper() for code in [*codes, *CODES]), *codes]))


def error_response(schema: str, description: str, retry_after: bool = False) -> dict:
    """An error answer: its description, the body as the named component schema, and Retry-After where it says."""
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


def json_object(properties: dict, required: list[str], **extra) -> dict:
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


@dataclass(frozen=True)
class Bodies:
    """The schemas of the endpoints' requests (JSON, and the forms LibreTranslate's clients send) and the fields
    the document uploads share."""

    translate: dict
    translate_form: dict  # content by form media type
    detect: dict
    detect_form: dict
    page: dict
    chat: dict
    source: dict
    target: dict
    api_key_form: dict
    document_form: dict  # a document form's translation options: context, style, background
    one_instruction: dict  # a body's constraint: not style and background both
    deepl_upload: dict  # DeepL's POST /v2/document form, less its file
    deepl_document: dict  # content by media type: the body naming a document (status, result)


def text_schemas(settings: Settings) -> tuple[dict, dict, dict]:
    """A text to translate (not blank), any text, and a text or a list of them (at least one not blank), within the
    limits of HYMT_MAX_CHARS and HYMT_MAX_TEXTS."""
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
    return text, any_text, texts


def request_bodies(settings: Settings, best: bool, offered: frozenset[str]) -> Bodies:
    """`best`: whether quality best is offered; `offered`: which of style and background the model served has
    official prompts for."""
    codes = language_codes()
    text, any_text, texts = text_schemas(settings)
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
            "items": json_object({"source": term, "target": term}, ["source", "target"], additionalProperties=False),
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
    stored_glossary = {
        "description": "a stored glossary (/v2/glossaries) whose terms join `glossary`'s: its target must be the "
        "request's, and its source the request's where one is given (else a 409); an unknown id is a 404",
    }
    quality_form = {
        "glossary_id": {"type": "string", **stored_glossary},
        "context": {"type": "string", "enum": ["true", "false"]},
        "quality": quality_fields["quality"],
        **instructions_form,
    }
    translate = json_object(
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
            "glossary_id": {"type": ["string", "null"], **stored_glossary},
        },
        ["q", "target"],
        **one_instruction,
    )
    # In a form every value is text: a list is the field repeated, a number its digits.
    translate_form = json_object(
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
    detect = json_object({"q": texts, "api_key": api_key}, ["q"])
    detect_in_form = json_object({"q": texts, "api_key": api_key_form}, ["q"])
    detect_form = {
        "application/x-www-form-urlencoded": {"schema": detect_in_form},
        "multipart/form-data": {"schema": detect_in_form},
    }
    page = json_object(
        {
            "text": text,
            "source": source,
            "target": target,
            "stream": {"type": "boolean"},
            "greedy": {"type": "boolean"},
            **quality_fields,
            "glossary_id": {"type": ["string", "null"], **stored_glossary},
        },
        ["text", "target"],
        **one_instruction,
    )
    part = json_object({"type": {"type": "string", "const": "text"}, "text": any_text}, ["type", "text"])
    content = {"anyOf": [any_text, {"type": "array", "items": part, "maxItems": settings.max_texts}]}
    message = json_object({"role": {"type": "string", "enum": list(ROLES)}, "content": content}, ["role", "content"])
    user_text = json_object(
        {
            "role": {"const": "user"},
            "content": {"anyOf": [text, {"type": "array", "contains": json_object({"text": text}, ["text"])}]},
        },
        ["role", "content"],
    )
    suffixed = [f"{MODEL_NAME}:{code}" for code in codes]
    chat = json_object(
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
    deepl_codes = deepl_language_codes()
    deepl_key = {
        "type": "string",
        "description": "DeepL's older way to send the key (or send Authorization: DeepL-Auth-Key); any key "
        "when the server requires none",
    }
    deepl_upload = {
        "target_lang": {
            "type": "string",
            "enum": deepl_codes,
            "description": "DeepL's language code (DE, EN-GB, PT-BR, ZH-HANS, ...) or hymt's, in any case",
        },
        "source_lang": {
            "type": "string",
            "enum": ["", *deepl_codes],
            "description": "left out or empty: detected from the document",
        },
        "formality": {
            "type": "string",
            "enum": ["", *FORMALITIES],
            "description": "more / less: the style prompt's formal / informal where the model has one; accepted "
            "and ignored elsewhere",
        },
        "glossary_id": {
            "type": "string",
            "description": "a stored glossary (/v2/glossaries) for the document's languages; empty: none",
        },
        "auth_key": deepl_key,
    }
    key_field = {"type": "string", "minLength": 1, "description": "the document_key its upload answered"}
    # The query string's fields fill in what a form (or an empty body) lacks, as for every form here (parsing.py).
    document_form = json_object(
        {"document_key": key_field, "auth_key": deepl_key},
        ["document_key"],
        description="a form; its fields may be sent in the query string instead",
    )
    deepl_document = {
        "application/json": {"schema": json_object({"document_key": key_field}, ["document_key"])},
        "application/x-www-form-urlencoded": {"schema": document_form},
        "multipart/form-data": {"schema": document_form},
    }
    return Bodies(
        translate=translate,
        translate_form=form_content,
        detect=detect,
        detect_form=detect_form,
        page=page,
        chat=chat,
        source=source,
        target=target,
        api_key_form=api_key_form,
        document_form={k: v for k, v in quality_form.items() if k != "quality"},
        one_instruction=one_instruction,
        deepl_upload=deepl_upload,
        deepl_document=deepl_document,
    )
