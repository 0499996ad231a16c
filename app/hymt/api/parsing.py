"""Request bodies (JSON, urlencoded or multipart forms) into checked values, or a 4xx that says what is wrong."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Literal, overload
from urllib.parse import parse_qsl

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from ..errors import BadRequest, Forbidden, PayloadTooLarge, Unauthorized, UnsupportedMediaType
from ..glossary import parse_request
from ..languages import Language, resolve
from ..settings import Settings
from ..translation.jobs import Options
from .ratelimit import Limits

JSON_TYPES = ("application/json", "")  # no content type: read as JSON, as curl --json and most clients mean it
MAX_FORM_FIELDS = 1000


class FormData(dict):
    """A form body: every value is a string (or a file), so fields that are numbers in JSON come as digits."""


class _NotText(MultiPartException):
    pass


class _TextPartsChecked(MultiPartParser):
    """Starlette's multipart parser, except that a text part whose bytes are not in its charset (UTF-8 unless the
    part says otherwise) is refused: Starlette would read it as Latin-1 and the garbled text would be translated."""

    def on_part_end(self) -> None:
        part = self._current_part
        if part.file is None:
            charset = self._charset or "utf-8"
            try:
                part.data.decode(charset)
            except UnicodeDecodeError:
                raise _NotText(f"form field {part.field_name!r} is not {charset.upper()} text") from None
        super().on_part_end()


async def read_body(request: Request, settings: Settings, forms: bool = True, limit: int | None = None) -> dict:
    """The body as a dict: JSON (an object), or with `forms` an urlencoded or multipart form, whose fields given
    more than once (q=a&q=b) become lists; with `forms`, the query string's fields fill in what a form or an
    empty body lacks, as LibreTranslate reads them (deep-translator sends a POST with its fields there). Any
    other content type is a 415. `limit`: the largest body in bytes (default: the upload limit for text
    requests; documents have their own)."""
    data = await _read_body(request, settings, forms, limit)
    if forms and request.url.query and (isinstance(data, FormData) or not data):
        fields = _form_data(_url_encoded(request.url.query, "query string"))
        data = FormData({**fields, **data})
    return data


def _url_encoded(text: str | bytes, what: str) -> list[tuple[str, str]]:
    """A query string or an urlencoded form's fields, refused in one line where it is not UTF-8 or has too many."""
    try:
        return parse_qsl(
            text if isinstance(text, str) else text.decode("utf-8"),
            keep_blank_values=True,
            encoding="utf-8",
            errors="strict",
            max_num_fields=MAX_FORM_FIELDS,
        )
    except UnicodeDecodeError:
        raise BadRequest(f"the {what} is not UTF-8 text", error_type="invalid_text") from None
    except ValueError as exc:
        raise BadRequest(f"invalid {what}: {exc}") from None


async def _read_body(request: Request, settings: Settings, forms: bool, limit: int | None) -> dict:
    limit = limit or settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"request body of {declared} bytes is over the limit of {limit}")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if forms and content_type == "application/x-www-form-urlencoded":
        # Parsed here rather than by Starlette, which turns bytes that are not UTF-8 into U+FFFD silently.
        return _form_data(_url_encoded(await _read_limited(request, limit), "form"))
    if forms and content_type == "multipart/form-data":
        parser = _TextPartsChecked(
            request.headers,
            request.stream(),
            max_part_size=limit,
            max_fields=MAX_FORM_FIELDS,
            max_files=MAX_FORM_FIELDS,
        )
        try:
            form = await parser.parse()
        except _NotText as exc:
            raise BadRequest(exc.message, error_type="invalid_text") from None
        except MultiPartException as exc:
            raise BadRequest(exc.message) from None
        return _form_data(form.multi_items())
    if content_type not in JSON_TYPES and not content_type.endswith("+json"):
        accepted = "application/json" + (", application/x-www-form-urlencoded or multipart/form-data" if forms else "")
        raise UnsupportedMediaType(f"content type {content_type!r} is not accepted here; send {accepted}")
    body = await _read_limited(request, limit)
    if not body.strip():
        return {}
    try:
        # A UTF-8 byte order mark is allowed before JSON text (RFC 8259 lets a parser ignore it); NaN and
        # Infinity are not JSON.
        data = json.loads(body.removeprefix(b"\xef\xbb\xbf"), parse_constant=_no_constant)
    except RecursionError:
        raise BadRequest("the JSON body is nested too deeply", error_type="invalid_json") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"invalid JSON body: {exc}", error_type="invalid_json") from None
    if not isinstance(data, dict):
        raise BadRequest("the JSON body must be an object", error_type="invalid_json")
    _check_strings(data)
    return data


def _form_data(fields) -> FormData:
    """Form fields as a dict; a field given more than once (q=a&q=b) becomes a list."""
    data = FormData()
    for key, value in fields:
        if isinstance(value, str):
            _check_text(value)
        if key in data:
            data[key] = data[key] + [value] if isinstance(data[key], list) else [data[key], value]
        else:
            data[key] = value
    return data


async def _read_limited(request: Request, limit: int) -> bytes:
    """The body, read in chunks and refused as soon as it passes the limit (a chunked body declares no length)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"request body over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def _check_strings(data) -> None:
    """Every string in the body (keys too) must be encodable text: JSON escapes can carry lone surrogates
    ("\\ud800"), which no tokenizer, log or response can encode."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(
            f"the text holds an invalid character (a lone surrogate at position {exc.start}): send valid Unicode",
            error_type="invalid_text",
        ) from None


@dataclass(frozen=True)
class Caller:
    """Who sent a request: its API key (by position in HYMT_API_KEYS and by a hash that names it across restarts
    and reordered keys; None when keys are off) and its address."""

    key_index: int | None
    key_hash: str | None
    address: str | None

    @property
    def client(self) -> str:
        """Its turn in the engine's fair order: the key when keys are on, else the address."""
        return f"key:{self.key_index}" if self.key_index is not None else f"address:{self.address}"


async def read_request(
    request: Request, settings: Settings, limits: Limits | None = None, forms: bool = True, limit: int | None = None
) -> dict:
    """The body of a request that needs an API key (when keys are configured): read, the key checked, then the
    rate limits of the key and of the client's address. Who sent it is kept for the route (`caller`)."""
    data = await read_body(request, settings, forms, limit)
    key_index, key_hash = _check_api_key(data, request, settings)
    address = request.client.host if request.client else None
    if limits is not None:
        limits.check(key_index, address)
    request.state.caller = Caller(key_index, key_hash, address)
    return data


def caller(request: Request) -> Caller:
    """Who sent a request that read_request has read."""
    return request.state.caller


# Where a key may come from besides the body's api_key (LibreTranslate clients): Authorization with OpenAI's scheme
# or DeepL's, or DeepL's older auth_key form field.
KEY_SCHEMES = ("bearer", "deepl-auth-key")


def _check_api_key(data: dict, request: Request, settings: Settings) -> tuple[int | None, str | None]:
    """The request's key: its position in HYMT_API_KEYS and its hash ((None, None) when keys are off). The key
    comes from the body's `api_key` or `auth_key`, or `Authorization: Bearer` / `DeepL-Auth-Key`; it is compared
    with every configured key in constant time, so timing tells nothing about how much of it was right."""
    key = data.get("api_key")
    if key is None:  # absent or null (Mastodon without a key configured): no key, as LibreTranslate reads it
        key = data.get("auth_key", "")
    if not isinstance(key, str):
        raise BadRequest("api_key must be a string or null", error_type="invalid_type")
    if not settings.api_keys:
        return None, None
    if not key:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        key = credentials.strip() if scheme.lower() in KEY_SCHEMES else ""
    given = key.encode("utf-8")
    matches = [hmac.compare_digest(given, known.encode("utf-8")) for known in settings.api_keys]
    if not key:
        raise Unauthorized("an API key is required: send api_key or Authorization: Bearer <key>")
    if not any(matches):
        raise Forbidden("invalid API key")
    return matches.index(True), hashlib.sha256(given).hexdigest()


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
        raise BadRequest(
            f"{len(items)} texts in one request; the limit is {settings.max_texts}", error_type="too_many_texts"
        )
    for i, item in enumerate(items):
        if not isinstance(item, str):
            where = f"{field}[{i}]" if as_list else field
            raise BadRequest(f"{where} must be a string, not {type(item).__name__}", error_type="invalid_type")
        check_length(item, settings)
    if not any(item.strip() for item in items):
        raise BadRequest(f"field {field!r} is empty", error_type="empty_text")
    return items, as_list


def check_length(text: str, settings: Settings) -> None:
    if len(text) > settings.max_chars:
        raise BadRequest(
            f"text of {len(text)} characters is over the limit of {settings.max_chars}", error_type="text_too_long"
        )


@overload
def language(data: dict, field: str, *, allow_auto: Literal[False], default: str | None = None) -> Language: ...
@overload
def language(data: dict, field: str, *, allow_auto: bool, default: str | None = None) -> Language | None: ...
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
    if isinstance(data, FormData) and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise BadRequest(f"{field} must be true or false, not {value!r}", error_type="invalid_type")


QUALITIES = ("standard", "best")


MAX_STYLE_CHARS = 200


def options(data: dict, settings: Settings) -> Options:
    """The translation options of a request: `glossary` (a list of {source, target}; a JSON string of it in a
    form), `context` (the document's preceding segments as context; on by default where the model has it), and
    `style` and `background` (for a model with official prompts for them: the engine refuses them otherwise)."""
    value = data.get("glossary")
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else None
        except ValueError:
            raise BadRequest(
                'glossary must be a JSON list of {"source", "target"} objects', error_type="invalid_json"
            ) from None
    return Options(
        glossary=tuple(parse_request(value)),
        context=flag(data, "context", settings.context),
        style=instruction(data, "style", MAX_STYLE_CHARS),
        background=instruction(data, "background", settings.max_chars),
    )


def instruction(data: dict, field: str, max_chars: int) -> str | None:
    """An optional instruction text (`style`, `background`): absent or null for none, else text that is not blank."""
    value = data.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{field} must be a string or null, not {type(value).__name__}", error_type="invalid_type")
    if not value.strip():
        raise BadRequest(f"{field} is blank: leave it out (or null) for none", error_type="empty_text")
    if len(value) > max_chars:
        raise BadRequest(
            f"{field} of {len(value)} characters is over the limit of {max_chars}", error_type="text_too_long"
        )
    return value.strip()


def quality(data: dict) -> str:
    """`quality`: "standard" (one translation) or "best" (six candidates fused by Chimera)."""
    return choice(data, "quality", QUALITIES, "standard")


def count(data: dict, field: str, maximum: int) -> int | None:
    """An optional whole number from 0 to `maximum` (digits in a form)."""
    if field not in data:
        return None
    value = data[field]
    if isinstance(data, FormData) and isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():  # JSON Schema counts 1.0 as an integer
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise BadRequest(
            f"{field} must be a whole number from 0 to {maximum}, not {value!r}", error_type="invalid_value"
        )
    return value
