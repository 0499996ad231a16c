"""DeepL's API, so that DeepL's own clients (the `deepl` package, deepl-node, the translators' plugins) work with
the server URL changed. Here: what its routes share (language codes, errors) and /v2/languages, and the document
API on the document jobs: POST /v2/document (upload: a document_id and a document_key), POST /v2/document/{id}
(status), POST /v2/document/{id}/result (the translated file). Text: deepl_text.py; glossaries: glossaries.py.

A key comes as `Authorization: DeepL-Auth-Key KEY` or the older `auth_key` field and is one of hymt's keys (any
key when keys are off); DeepL's language codes (DE, EN-GB, PT-BR, ZH-HANS, ...) map to hymt's. Errors take
DeepL's shape, {"message": ...}, and its statuses: 403 for a missing or wrong key, 413 for a body too large, 456
for a used-up quota, 503 for a result asked too soon.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import BadRequest, Forbidden, HymtError
from ..languages import LANGUAGES, Language, resolve
from ..store.jobs import JobRecord, JobState, JobStore
from . import jobs, parsing
from .service import Service

# DeepL's codes whose hymt code is not the code itself, lower-cased (regional variants hymt serves as one language).
CODES = {
    "zh-hans": "zh",
    "zh-hant": "zh-Hant",
    "en-gb": "en",
    "en-us": "en",
    "pt-br": "pt",
    "pt-pt": "pt",
    "es-419": "es",
}
# The target codes DeepL has for regional variants hymt serves as one language, with DeepL's names for them.
VARIANTS = {
    "en": (("EN-GB", "English (British)"), ("EN-US", "English (American)")),
    "pt": (("PT-BR", "Portuguese (Brazilian)"), ("PT-PT", "Portuguese (European)")),
    "zh": (("ZH-HANS", "Chinese (simplified)"),),
    "zh-Hant": (("ZH-HANT", "Chinese (traditional)"),),
}
# DeepL's formality values (besides none), and the style each asks of a model with a style prompt (Hy-MT2).
FORMALITIES = {
    "default": None,
    "more": "formal",
    "less": "informal",
    "prefer_more": "formal",
    "prefer_less": "informal",
}
# How hymt's error statuses read to a DeepL client: DeepL answers 403 for a missing key, and 400 where hymt is finer.
STATUSES = {401: 403, 415: 400, 422: 400}


def code_of(language: Language) -> str:
    """A language as DeepL writes a source (and a detected) language: upper case ("DE", "ZH", "ZH-HANT")."""
    return language.code.upper()


def language_list(target: bool, formality: bool) -> list[dict]:
    """/v2/languages: every language hymt serves, in DeepL's codes (its regional variants as targets)."""
    listed = []
    for lang in LANGUAGES:
        entries = VARIANTS.get(lang.code, ()) if target else ()
        for code, name in entries or ((code_of(lang), lang.english),):
            listed.append({"language": code, "name": name, **({"supports_formality": formality} if target else {})})
    return listed


def language(data: dict, field: str, required: bool) -> Language | None:
    value = data.get(field)
    if value is None or value == "":
        if required:
            raise BadRequest(f"Parameter '{field}' not specified.", error_type="missing_field")
        return None
    if not isinstance(value, str):
        raise BadRequest(f"Value for '{field}' not supported.", error_type="invalid_type")
    code = value.strip().lower()
    try:
        return resolve(CODES.get(code, code), field)
    except BadRequest:
        raise BadRequest(f"Value for '{field}' not supported.", error_type="unsupported_language") from None


def deepl_errors(route: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """A route whose errors read as DeepL's: {"message": ...} with DeepL's status for each."""

    async def answer(request: Request) -> Response:
        try:
            return await route(request)
        except HymtError as exc:
            status = STATUSES.get(exc.status, exc.status)
            headers = {k: v for k, v in exc.headers().items() if k == "Retry-After"}
            return JSONResponse({"message": exc.message}, status_code=status, headers=headers)

    return answer


@deepl_errors
async def upload(request: Request) -> JSONResponse:
    service, data = await jobs.read(request)
    file = data.get("file")
    output_format = data.get("output_format")
    if output_format and isinstance(file, UploadFile):
        ext = (file.filename or "").rsplit(".", 1)[-1].lower()
        if str(output_format).lower().lstrip(".") != ext:
            raise BadRequest("output_format: a document is translated into its own format only here.")
    source = language(data, "source_lang", required=False)
    target = language(data, "target_lang", required=True)
    assert target is not None  # required
    form = parsing.FormData(  # hymt's document form, read as a form is (glossary_ids comma-separated)
        {
            "file": file,
            "source": source.code if source else "auto",
            "target": target.code,
            **{name: data[name] for name in ("glossary_id", "glossary_ids") if name in data},
        }
    )
    style = formality_style(data, service)
    if style is not None:
        form["style"] = style
    record = await jobs.accept(request, service, jobs.upload_of(form, service), "deepl")
    return JSONResponse({"document_id": record.id, "document_key": record.key})


@deepl_errors
async def status(request: Request) -> JSONResponse:
    record = await _document(request)
    state = {JobState.CANCELLED: "error"}.get(record.state, record.state.value)
    view = await jobs.job_json(request, record)
    body: dict = {"document_id": record.id, "status": state}
    if record.state == JobState.TRANSLATING and view["seconds_remaining"] is not None:
        body["seconds_remaining"] = round(view["seconds_remaining"])
    if record.state == JobState.DONE:
        body["billed_characters"] = record.billed_characters
    if state == "error":
        body["error_message"] = record.error or "the document job was cancelled"
    return JSONResponse(body)


@deepl_errors
async def result(request: Request) -> Response:
    record = await _document(request)
    if not record.finished:
        raise HymtError("Document not ready.", error_type="not_ready", status=503)
    if record.state != JobState.DONE:
        # The request is well formed; the document has no result to give (as /api/jobs/{id}/result answers).
        raise HymtError(
            f"Document translation failed: {record.error or 'cancelled'}", error_type="no_result", status=409
        )
    return await jobs.result_response(request, record)


async def _document(request: Request) -> JobRecord:
    """The caller's document of the path's id, when the body's document_key is its key."""
    service: Service = request.app.state.service
    data = await parsing.read_request(request, service.settings, service.limits)
    key = data.get("document_key")
    if not isinstance(key, str) or not key:
        raise BadRequest("Parameter 'document_key' not specified.", error_type="missing_field")
    try:
        record = await jobs.owned(request, request.path_params["document_id"])
    except HymtError:
        raise HymtError("Document not found.", error_type="not_found", status=404) from None
    if not JobStore.key_matches(record, key):
        raise Forbidden("Wrong document_key for this document.")
    return record


def formality(data: dict) -> str | None:
    """The style `formality` asks for (None: none); a value DeepL would refuse is refused."""
    value = data.get("formality")
    if value in (None, ""):
        return None
    if not isinstance(value, str) or value not in FORMALITIES:
        raise BadRequest("Value for 'formality' not supported.", error_type="invalid_value")
    return FORMALITIES[value]


def formality_style(data: dict, service: Service) -> str | None:
    """The style `formality` asks for, where the model has a style prompt (Hy-MT2); elsewhere it is accepted, since
    DeepL's clients send it, and ignored."""
    style = formality(data)
    return style if style and service.ready_translator().family.style else None


@deepl_errors
async def languages(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    data = await parsing.read_request(request, service.settings, service.limits)
    kind = data.get("type", "source")
    if kind not in ("source", "target"):
        raise BadRequest("Value for 'type' not supported.", error_type="invalid_value")
    translator = service.translator
    formality = bool(translator is not None and translator.family.style)
    return JSONResponse(language_list(kind == "target", formality))
