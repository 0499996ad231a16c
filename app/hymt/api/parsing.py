"""Request bodies (JSON, urlencoded or multipart forms) into checked values, or a 4xx that says what is wrong."""

from __future__ import annotations

import json

from starlette.datastructures import UploadFile
from starlette.requests import Request

from ..engine.engine import Options
from ..errors import BadRequest, Forbidden, PayloadTooLarge
from ..glossary import parse_request
from ..languages import Language, resolve
from ..settings import Settings


async def read_body(request: Request, settings: Settings, limit: int | None = None) -> dict:
    """The body as a dict. Form fields given more than once (q=a&q=b) become lists. `limit`: the largest body in
    bytes (default: the upload limit for text requests)."""
    limit = limit or settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes is over the limit of {limit}")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        form = await request.form(max_part_size=settings.max_upload_bytes)
        data: dict = {}
        for key, value in form.multi_items():
            if key in data:
                data[key] = data[key] + [value] if isinstance(data[key], list) else [data[key], value]
            else:
                data[key] = value
        return data
    body = await request.body()
    if len(body) > limit:
        raise PayloadTooLarge(f"request body of {len(body)} bytes is over the limit of {limit}")
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"invalid JSON body: {exc}", error_type="invalid_json") from None
    if not isinstance(data, dict):
        raise BadRequest("the JSON body must be an object", error_type="invalid_json")
    return data


async def read_request(request: Request, settings: Settings, limit: int | None = None) -> dict:
    """The body of a request that needs an API key (when keys are configured): read, then the key checked."""
    data = await read_body(request, settings, limit)
    _check_api_key(data, request, settings)
    return data


def _check_api_key(data: dict, request: Request, settings: Settings) -> None:
    if not settings.api_keys:
        return
    key = data.get("api_key") or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
    if key not in settings.api_keys:
        raise Forbidden("invalid or missing API key" if key else "an API key is required (api_key)")


def texts(data: dict, field: str, settings: Settings) -> tuple[list[str], bool]:
    """The text(s) to translate: a string or a list of strings. Returns (texts, whether a list was sent)."""
    if field not in data or data[field] is None:
        raise BadRequest(f"missing field {field!r}", error_type="missing_field")
    value = data[field]
    if isinstance(value, UploadFile):
        raise BadRequest(f"field {field!r} must be text, not a file", error_type="invalid_type")
    as_list = isinstance(value, list)
    items = value if as_list else [value]
    if as_list and not items:
        raise BadRequest(f"field {field!r} is an empty list", error_type="empty_text")
    if len(items) > settings.max_texts:
        raise BadRequest(f"{len(items)} texts in one request; the limit is {settings.max_texts}",
                         error_type="too_many_texts")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            where = f"{field}[{i}]" if as_list else field
            raise BadRequest(f"{where} must be a string, not {type(item).__name__}", error_type="invalid_type")
        if len(item) > settings.max_chars:
            raise PayloadTooLarge(f"text of {len(item)} characters is over the limit of {settings.max_chars}")
    if not any(item.strip() for item in items):
        raise BadRequest(f"field {field!r} is empty", error_type="empty_text")
    return items, as_list


def language(data: dict, field: str, *, allow_auto: bool, default: str | None = None) -> Language | None:
    """A language field; None means auto-detect (only where allowed)."""
    value = data.get(field, default)
    if value is None or value == "":
        raise BadRequest(f"missing field {field!r}", error_type="missing_field")
    if not isinstance(value, str):
        raise BadRequest(f"field {field!r} must be a language code string", error_type="invalid_type")
    if value.strip().lower() == "auto":
        if allow_auto:
            return None
        raise BadRequest(f"{field} cannot be auto", error_type="unsupported_language")
    return resolve(value, f"{field} language")


def choice(data: dict, field: str, allowed: tuple[str, ...], default: str) -> str:
    value = data.get(field, default)
    if value not in allowed:
        raise BadRequest(f"{field} must be one of {', '.join(allowed)}, not {value!r}", error_type="invalid_value")
    return value


def flag(data: dict, field: str, default: bool = False) -> bool:
    value = data.get(field, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on", "false", "0", "no", "off", ""):
        return value.lower() in ("true", "1", "yes", "on")
    raise BadRequest(f"{field} must be true or false, not {value!r}", error_type="invalid_type")


QUALITIES = ("standard", "best")


def options(data: dict, settings: Settings) -> Options:
    """The translation options of a request: `glossary` (a list of {source, target}; a JSON string of it in a
    form) and `context` (the document's preceding segments as context; on by default where the model has it)."""
    value = data.get("glossary")
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            raise BadRequest("glossary must be a JSON list of {\"source\", \"target\"} objects",
                             error_type="invalid_json") from None
    return Options(glossary=tuple(parse_request(value)), context=flag(data, "context", settings.context))


def quality(data: dict) -> str:
    """`quality`: "standard" (one translation) or "best" (six candidates fused by Chimera)."""
    return choice(data, "quality", QUALITIES, "standard")
