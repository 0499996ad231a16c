"""The bridge between async handlers and engine jobs: a job queued off the event loop, its events delivered on an
asyncio queue as the engine's text worker sends them, and the job cancelled when its client leaves (`request`
None: nobody can leave, as in the CLI). Plain translations, quality "best" (candidates, then their fusion), and a
document's texts in parts that fit the queue."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..engine.jobs import Event, Job, Options
from ..errors import Cancelled, Overloaded
from ..languages import Language
from ..planner.fusion import best_segment_tokens
from ..prompts import CANDIDATE_SAMPLINGS, Sampling
from .service import Service

log = logging.getLogger("hymt.bridge")

# A document's part of one text may wait this long for room in a full queue before the document fails with the
# queue's error; it asks again every RETRY_S.
MAX_QUEUE_WAIT_S = 120.0
RETRY_S = 0.5


def _cancel(job: Job) -> None:
    """Cancel a job on the engine it was submitted to (every submitted job has one)."""
    if job.engine is not None:
        job.engine.cancel(job)


def _listener(events: asyncio.Queue[Event]) -> Callable[[Event], None]:
    loop = asyncio.get_running_loop()

    def listener(event: Event) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    return listener


async def submit(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    sampling: Sampling,
    stream: bool = False,
    options: Options = Options(),
) -> tuple[Job, asyncio.Queue[Event]]:
    """Queue a job; its events (every token too, when streaming) arrive on the returned asyncio queue.
    Tokenizing runs off the event loop."""
    engine = service.ready_engine()
    events: asyncio.Queue[Event] = asyncio.Queue()
    job = await run_in_threadpool(
        engine.submit, items, target, sampling, _listener(events), stream=stream, options=options
    )
    return job, events


async def queue_candidates(
    service: Service, items: list[tuple[str, Language | None]], target: Language, options: Options
) -> list[tuple[Job, asyncio.Queue[Event]]]:
    """Quality "best", first half: the texts queued once per candidate decoding setting, to run side by side in
    the engine's batch. Refused (422) before any work when no fusion model is available; all or none are queued."""
    fusion = service.fusion_engine()
    options = dataclasses.replace(
        options, max_segment_tokens=best_segment_tokens(service.settings, fusion.max_seq_tokens)
    )
    return await queue_samplings(service, items, target, CANDIDATE_SAMPLINGS, options)


async def queue_samplings(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    samplings: tuple[Sampling, ...],
    options: Options,
) -> list[tuple[Job, asyncio.Queue[Event]]]:
    """The texts queued once per decoding setting, together, so that the engine's batch decodes them side by
    side; all or none are queued (a full queue refuses the request before any work)."""
    queued: list[tuple[Job, asyncio.Queue[Event]]] = []
    try:
        for sampling in samplings:
            queued.append(await submit(service, items, target, sampling, options=options))
    except BaseException:
        for job, _ in queued:
            _cancel(job)
        raise
    return queued


async def candidates_done(queued: list[tuple[Job, asyncio.Queue[Event]]], request: Request | None) -> list[Job]:
    """The queued candidates once all are translated; the first failure (or the client leaving) cancels the rest."""
    try:
        for job, events in queued:
            await finished(job, events, request)
    finally:
        for job, _ in queued:
            if not job.ended:
                _cancel(job)
    return [job for job, _ in queued]


async def submit_fusion(service: Service, jobs: list[Job], sampling: Sampling) -> tuple[Job, asyncio.Queue[Event]]:
    """Quality "best", second half: the candidates fused segment by segment by the fusion model."""
    events: asyncio.Queue[Event] = asyncio.Queue()
    job = await run_in_threadpool(service.fusion_engine().submit_fusion, jobs, sampling, _listener(events))
    return job, events


async def run_best(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    sampling: Sampling,
    options: Options,
    request: Request | None,
) -> Job:
    jobs = await candidates_done(await queue_candidates(service, items, target, options), request)
    job, events = await submit_fusion(service, jobs, sampling)
    return await finished(job, events, request)


async def events_until_done(job: Job, events: asyncio.Queue[Event], request: Request | None) -> AsyncIterator[Event]:
    """The job's events up to its one terminal event ("done" or "error"); a client that disconnects, or a
    consumer that stops early, has the job cancelled. Token events that queued up while the consumer was busy
    are merged into the latest one (a stream shows the text so far, not each token)."""
    ended = False
    try:
        while True:
            try:
                event = await asyncio.wait_for(events.get(), timeout=0.5)
            except TimeoutError:
                if request is not None and await request.is_disconnected():
                    log.info("client left: cancelling job %d", job.id)
                    return
                continue
            while event.kind == "token" and not events.empty():
                event = events.get_nowait()
            ended = event.kind in ("done", "error")
            yield event
            if ended:
                return
    finally:
        if not ended:
            _cancel(job)


async def run_to_end(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    sampling: Sampling,
    request: Request | None,
    options: Options = Options(),
    quality: str = "standard",
) -> Job:
    """One request's job to its end: a plain translation, or quality "best" (candidates, then their fusion)."""
    if quality == "best":
        return await run_best(service, items, target, sampling, options, request)
    job, events = await submit(service, items, target, sampling, options=options)
    return await finished(job, events, request)


async def finished(job: Job, events: asyncio.Queue[Event], request: Request | None) -> Job:
    """The job once it has ended; its error raised."""
    async for _ in events_until_done(job, events, request):
        pass
    if job.error is not None:
        raise job.error
    return job


async def translate_parts(
    service: Service,
    texts: list[str],
    source: Language | None,
    target: Language,
    sampling: Sampling,
    request: Request | None,
    on_text: Callable[[int, str], None] | None = None,
    options: Options = Options(),
) -> list[str]:
    """A document's marked texts translated in parts that fit the queue: a long document is not refused for being
    longer than the queue, and other requests keep their turn between its parts. A full queue halves the part,
    down to one text, which then waits for room. on_text(index, translation) as each text is done. `options`: the
    request's (glossary, context, style, background), each text taking the formatted prompt where it has markup."""
    options = dataclasses.replace(options, formatted=True)
    results: list[str] = []
    part_size = max(1, service.settings.max_queue_segments // 4)
    waited = 0.0
    while len(results) < len(texts):
        base = len(results)
        part = texts[base : base + part_size]
        try:
            job, events = await submit(service, [(t, source) for t in part], target, sampling, options=options)
        except Overloaded:
            if part_size > 1:
                part_size = max(1, part_size // 2)
            elif waited >= MAX_QUEUE_WAIT_S:
                raise
            elif request is not None and await request.is_disconnected():
                raise Cancelled("the request was cancelled") from None
            else:
                await asyncio.sleep(RETRY_S)
                waited += RETRY_S
            continue
        told: set[int] = set()
        async for event in events_until_done(job, events, request):
            if event.kind == "segment" and on_text is not None:
                d = job.refs[event.index][0]
                if d not in told and all(r is not None for (doc, _), r in zip(job.refs, job.results) if doc == d):
                    told.add(d)
                    on_text(base + d, job.texts()[d])
        if job.error is not None:
            raise job.error
        results.extend(job.texts())
    return results
