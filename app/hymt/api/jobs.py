"""Document jobs over HTTP: how every route that takes a document makes it a job (accept: the hostile-file checks
and the document queue's bounds first, then a row in the store for the worker), what a job looks like to its
client, and hymt's own job endpoints: /api/jobs (submit, list), /api/jobs/{id} (status, cancel) and
/api/jobs/{id}/result. A job is visible to its owner alone (the API key that made it; everyone when keys are off):
another key's job is a 404, as an unknown one is."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from .. import documents
from ..errors import BadRequest, Cancelled, GenerationError, HymtError, Overloaded
from ..languages import Language
from ..store.jobs import JobRecord, JobState, JobStore
from ..translation.jobs import Options
from . import glossaries, parsing, pipeline, usage
from .service import Service
from .worker import JobWorker

# How often a waiting request looks at its job (and at whether its client is still there).
POLL_S = 0.25
# Retry-After of a full document queue: documents take minutes, so there is no point asking again at once.
QUEUE_FULL_RETRY_S = 60


@dataclass(frozen=True)
class Upload:
    """A document request's fields, read and checked."""

    file: UploadFile
    source: Language | None
    target: Language
    options: Options
    glossary_ids: list[object]  # stored glossaries to join the request's own terms (glossaries.ids_of)


async def read(request: Request) -> tuple[Service, dict]:
    """A document request's body (up to HYMT_MAX_FILE_BYTES), its key checked and its rate limits counted."""
    service: Service = request.app.state.service
    service.ready_translator()
    data = await parsing.read_request(request, service.settings, service.limits, limit=service.settings.max_file_bytes)
    return service, data


def upload_of(data: dict, service: Service, source_field: str = "source", target_field: str = "target") -> Upload:
    """The file and the languages and options of a document request (hymt's field names, or DeepL's)."""
    file = data.get("file")
    if not isinstance(file, UploadFile):
        raise BadRequest(
            "missing field 'file' (send the document as a multipart/form-data file)", error_type="missing_field"
        )
    options = parsing.options(data, service.settings)
    service.ready_translator().check_instructions(options)  # a 422 before the file is read
    return Upload(
        file,
        parsing.language(data, source_field, allow_auto=True, default="auto"),
        parsing.language(data, target_field, allow_auto=False),
        options,
        glossaries.ids_of(data),
    )


async def accept(request: Request, service: Service, upload: Upload, api: str) -> JobRecord:
    """The document made a queued job: read after the hostile-file checks (its language detected where none is
    given), refused with 429 when the queue of unfinished documents would pass its bounds, then stored."""
    settings, store = service.settings, _store(request)
    options = await glossaries.with_stored(request, upload.glossary_ids, upload.options, upload.source, upload.target)
    await usage.check(request)
    ext = documents.extension(upload.file.filename or "", upload.file.content_type)
    content = await upload.file.read()
    name = documents.download_name(upload.file.filename or "", ext, upload.target.code)
    opened = await pipeline.open_upload(settings, ext, name, content, upload.source, upload.target, options)
    texts = opened.prepared.texts
    _, segments, size = await run_in_threadpool(store.queued_totals)
    if segments + len(texts) > settings.max_queued_job_segments or size + len(content) > settings.max_queued_job_bytes:
        raise Overloaded(
            f"the document queue is full ({segments} texts, {size} bytes of unfinished documents; the limits are "
            f"{settings.max_queued_job_segments} and {settings.max_queued_job_bytes}); try again later",
            QUEUE_FULL_RETRY_S,
        )
    caller = parsing.caller(request)
    record = await run_in_threadpool(
        lambda: store.create(
            content,
            name=name,
            ext=ext,
            media_type=documents.media_type(ext),
            source=opened.source.code if opened.source else None,
            target=upload.target.code,
            options=options.to_json(),
            owner=caller.key_hash,
            client=caller.client,
            api=api,
            billed_characters=sum(len(t) for t in texts),
            segments_total=len(texts),
        )
    )
    _worker(request).wake()
    return record


async def owned(request: Request, job_id: str) -> JobRecord:
    """The caller's job of that id, or a 404."""
    record = await run_in_threadpool(_store(request).get, job_id)
    caller = parsing.caller(request)
    if record is None or (record.owner is not None and record.owner != caller.key_hash):
        raise HymtError("no such document job (it may have expired)", error_type="not_found", status=404)
    return record


async def until_ended(request: Request, record: JobRecord, watch_client: bool) -> JobRecord:
    """The job once it has ended; with `watch_client`, a client that leaves first has it cancelled."""
    worker = _worker(request)
    waiting = asyncio.ensure_future(worker.wait(record.id))
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=POLL_S * 4)
            if done:
                return waiting.result()
            if watch_client and await request.is_disconnected():
                await worker.cancel(record.id)
                raise Cancelled("the request was cancelled")
    finally:
        waiting.cancel()


def ended_or_raise(record: JobRecord) -> JobRecord:
    """A done job, or its end as the error a synchronous caller gets."""
    if record.state == JobState.CANCELLED:
        raise Cancelled("the document job was cancelled")
    if record.state == JobState.ERROR:
        raise GenerationError(record.error or "the document could not be translated")
    return record


def file_answer(request: Request, record: JobRecord) -> dict:
    """LibreTranslate's answer for a done job: the download URL, the name, and the translation's report."""
    url = str(request.url_for("download_file", file_id=record.id, name=record.name))
    return {"translatedFileUrl": url, "name": record.name, **json.loads(record.report or "{}")}


async def job_json(request: Request, record: JobRecord) -> dict:
    """A job as /api/jobs answers it."""
    return _job_view(request, record, await _queue_positions(request, [record]))


async def _queue_positions(request: Request, records: list[JobRecord]) -> dict[str, int]:
    """The queued ones' positions, in one read of the store off the event loop (on PostgreSQL a round trip)."""
    queued = [r.id for r in records if r.state == JobState.QUEUED]
    return await run_in_threadpool(_store(request).queue_positions, queued) if queued else {}


def _job_view(request: Request, record: JobRecord, positions: dict[str, int]) -> dict:
    worker = _worker(request)
    done = record.state == JobState.DONE
    return {
        "id": record.id,
        "status": record.state.value,
        "name": record.name,
        "source": record.source,
        "target": record.target,
        "segments_done": record.segments_total if done else worker.segments_done(record),
        "segments_total": record.segments_total,
        "queue_position": positions.get(record.id),
        "seconds_remaining": worker.seconds_remaining(record) if record.state == JobState.TRANSLATING else None,
        "billed_characters": record.billed_characters,
        "created_at": _iso(record.created_at),
        "started_at": _iso(record.started_at),
        "finished_at": _iso(record.finished_at),
        "error": record.error,
        "result_url": str(request.url_for("job_result", job_id=record.id)) if done else None,
        "report": json.loads(record.report) if record.report else None,
    }


async def result_response(request: Request, record: JobRecord) -> Response:
    found = await run_in_threadpool(_store(request).result, record.id)
    if found is None:
        raise HymtError("no such file (it may have expired)", error_type="not_found", status=404)
    if isinstance(found, bytes):  # kept in the database (HYMT_DATABASE_URL): the same headers as a file's
        return Response(found, media_type=record.media_type, headers={"Content-Disposition": _disposition(record.name)})
    return FileResponse(found, media_type=record.media_type, filename=record.name)


# -- /api/jobs ------------------------------------------------------------------------------------------------
async def jobs(request: Request) -> JSONResponse:
    """POST: a document submitted (202, the job); GET: the caller's jobs, newest first. One route for both, so that
    a 405 names both methods in its Allow."""
    if request.method == "POST":
        service, data = await read(request)
        record = await accept(request, service, upload_of(data, service), "jobs")
        return JSONResponse(await job_json(request, record), status_code=202)
    settings, limits = request.app.state.service.settings, request.app.state.service.limits
    await parsing.read_request(request, settings, limits)
    owner = parsing.caller(request).key_hash
    records = await run_in_threadpool(_store(request).list, owner)
    positions = await _queue_positions(request, records)
    return JSONResponse({"jobs": [_job_view(request, r, positions) for r in records]})


async def job(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    await parsing.read_request(request, service.settings, service.limits)
    record = await owned(request, request.path_params["job_id"])
    if request.method == "DELETE" and not record.finished:
        record = await _worker(request).cancel(record.id) or record
    return JSONResponse(await job_json(request, record))


async def job_result(request: Request) -> Response:
    service: Service = request.app.state.service
    await parsing.read_request(request, service.settings, service.limits)
    record = await owned(request, request.path_params["job_id"])
    if record.state != JobState.DONE:
        raise HymtError(
            f"the document job is {record.state.value}: no result" + (f" ({record.error})" if record.error else ""),
            error_type="not_ready" if not record.finished else "no_result",
            status=409,
        )
    return await result_response(request, record)


def _store(request: Request) -> JobStore:
    return request.app.state.jobs


def _worker(request: Request) -> JobWorker:
    return request.app.state.worker


def _disposition(name: str) -> str:
    """Content-Disposition for a download named `name`, as Starlette's FileResponse writes it."""
    quoted = urllib.parse.quote(name)
    return f"attachment; filename*=utf-8''{quoted}" if quoted != name else f'attachment; filename="{name}"'


def _iso(stamp: float | None) -> str | None:
    return None if stamp is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))
