"""Documents over LibreTranslate's and the page's calls, each a document job (api/jobs.py, api/worker.py) under
the hood: LibreTranslate's /translate_file waits for its job and answers a download URL, as LibreTranslate does; the
page's /api/translate_file follows its job as Server-Sent Events (its place in the queue, texts done of total,
seconds remaining, then the download URL); /download_file serves the result. A client that leaves either call has
its job cancelled.

Translated files live in the job store, named by the job's random id; the uploaded name only ever picks the format
and, cleaned, the name offered for download. Each is removed HYMT_FILE_RETENTION_S after its job ended.
"""

from __future__ import annotations

import asyncio

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import HymtError
from ..store.jobs import JobState
from . import jobs, sse


async def translate_file(request: Request) -> JSONResponse:
    """LibreTranslate's file call: the whole file translated, then its download URL."""
    service, data = await jobs.read(request)
    record = await jobs.accept(request, service, jobs.upload_of(data, service), "libre")
    record = jobs.ended_or_raise(await jobs.until_ended(request, record, watch_client=True))
    return JSONResponse(jobs.file_answer(request, record))


async def translate_file_stream(request: Request) -> Response:
    """The page's file call: the job's progress as Server-Sent Events, then the download URL."""
    service, data = await jobs.read(request)
    record = await jobs.accept(request, service, jobs.upload_of(data, service), "page")
    store, worker = request.app.state.jobs, request.app.state.worker

    async def stream():
        yield sse.event("start", {"segments": record.segments_total, "name": record.name, "id": record.id})
        told = None
        ended = False
        try:
            while True:
                now = await run_in_threadpool(store.get, record.id)
                if now.finished or worker.draining:
                    ended = True
                    done = jobs.ended_or_raise(await jobs.until_ended(request, now, watch_client=False))
                    total = done.segments_total
                    if told != ("translating", None, total):  # the bar reaches its end before "done", however fast
                        yield sse.event("progress", {"done": total, "total": total, "seconds_remaining": 0})
                    yield sse.event("done", jobs.file_answer(request, done))
                    return
                view = await jobs.job_json(request, now)
                state = (view["status"], view["queue_position"], view["segments_done"])
                if state != told:
                    told = state
                    if now.state == JobState.QUEUED:
                        yield sse.event("queued", {"position": view["queue_position"]})
                    else:
                        body = {"done": view["segments_done"], "total": view["segments_total"]}
                        yield sse.event("progress", {**body, "seconds_remaining": view["seconds_remaining"]})
                if await request.is_disconnected():
                    return
                await asyncio.sleep(jobs.POLL_S)
        finally:
            if not ended:  # the page left (or the stream broke): its document is not wanted any more
                await worker.cancel(record.id)

    return sse.response(request, stream())


async def download_file(request: Request) -> Response:
    record = await run_in_threadpool(request.app.state.jobs.get, request.path_params["file_id"])
    if record is None or record.state != JobState.DONE:
        raise HymtError("no such file (it may have expired)", error_type="not_found", status=404)
    return await jobs.result_response(request, record)
