"""DeepL's document API on the document jobs, so that DeepL's own clients (the `deepl` package's
translate_document_from_filepath, deepl-node, the translators' plugins) work with the server URL changed:
POST /v2/document (upload: a document_id and a document_key), POST /v2/document/{id} (status), POST
/v2/document/{id}/result (the translated file).

A key comes as `Authorization: DeepL-Auth-Key KEY` or the older `auth_key` field and is one of hymt's keys (any
key when keys are off); DeepL's language codes (DE, EN-GB, PT-BR, ZH-HANS, ...) map to hymt's. Errors take
DeepL's shape, {"message": ...}, and its statuses: 403 for a missing or wrong key, 503 for a result asked too soon.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import BadRequest, Forbidden, HymtError
from ..languages import Language, resolve
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
# DeepL's formality values (besides none): accepted, since DeepL's clients send them, and ignored.
FORMALITIES = ("default", "more", "less", "prefer_more", "prefer_less")
# How hymt's error statuses read to a DeepL client: DeepL answers 403 for a missing key, and 400 where hymt is finer.
STATUSES = {401: 403, 415: 400, 422: 400}


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


def _deepl_errors(route: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        try:
            return await route(request)
        except HymtError as exc:
            status = STATUSES.get(exc.status, exc.status)
            headers = {k: v for k, v in exc.headers().items() if k == "Retry-After"}
            return JSONResponse({"message": exc.message}, status_code=status, headers=headers)

    return answer


@_deepl_errors
async def upload(request: Request) -> JSONResponse:
    service, data = await jobs.read(request)
    if data.get("glossary_id") or data.get("glossary_ids"):
        # No stored glossaries exist here (yet): any id names none.
        raise HymtError("Glossary not found.", error_type="not_found", status=404)
    file = data.get("file")
    output_format = data.get("output_format")
    if output_format and isinstance(file, UploadFile):
        ext = (file.filename or "").rsplit(".", 1)[-1].lower()
        if str(output_format).lower().lstrip(".") != ext:
            raise BadRequest("output_format: a document is translated into its own format only here.")
    source = language(data, "source_lang", required=False)
    target = language(data, "target_lang", required=True)
    assert target is not None  # required
    _check_formality(data)
    form = {"file": file, "source": source.code if source else "auto", "target": target.code}
    record = await jobs.accept(request, service, jobs.upload_of(form, service), "deepl")
    return JSONResponse({"document_id": record.id, "document_key": record.key})


@_deepl_errors
async def status(request: Request) -> JSONResponse:
    record = await _document(request)
    state = {JobState.CANCELLED: "error"}.get(record.state, record.state.value)
    view = jobs.job_json(request, record)
    body: dict = {"document_id": record.id, "status": state}
    if record.state == JobState.TRANSLATING and view["seconds_remaining"] is not None:
        body["seconds_remaining"] = round(view["seconds_remaining"])
    if record.state == JobState.DONE:
        body["billed_characters"] = record.billed_characters
    if state == "error":
        body["error_message"] = record.error or "the document job was cancelled"
    return JSONResponse(body)


@_deepl_errors
async def result(request: Request) -> Response:
    record = await _document(request)
    if not record.finished:
        raise HymtError("Document not ready.", error_type="not_ready", status=503)
    if record.state != JobState.DONE:
        raise BadRequest(f"Document translation failed: {record.error or 'cancelled'}")
    return jobs.result_response(request, record)


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


def _check_formality(data: dict) -> None:
    """`formality` is accepted (DeepL's clients send it) and ignored: no model of the family has a formality
    prompt. A value DeepL would refuse is refused."""
    value = data.get("formality")
    if value not in (None, "", *FORMALITIES):
        raise BadRequest("Value for 'formality' not supported.")
