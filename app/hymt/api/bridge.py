"""The bridge between async handlers and engine jobs: a job queued off the event loop, its events delivered on an
asyncio queue as the engine's text worker sends them, and the job cancelled when its client leaves (`request`
None: nobody can leave). Plain translations, and quality "best" (candidates, then their fusion)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..engine.jobs import Event, Job, Options
from ..languages import Language
from ..planner.fusion import best_segment_tokens
from ..prompts import CANDIDATE_SAMPLINGS, Sampling
from .service import Service

log = logging.getLogger("hymt.bridge")

def _listener(events: "asyncio.Queue[Event]") -> Callable[[Event], None]:
    loop = asyncio.get_running_loop()

    def listener(event: Event) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    return listener


async def submit(service: Service, items: list[tuple[str, Language | None]], target: Language, sampling: Sampling,
                 stream: bool = False, options: Options = Options()) -> tuple[Job, "asyncio.Queue[Event]"]:
    """Queue a job; its events (every token too, when streaming) arrive on the returned asyncio queue.
    Tokenizing runs off the event loop."""
    engine = service.ready_engine()
    events: asyncio.Queue[Event] = asyncio.Queue()
    job = await run_in_threadpool(engine.submit, items, target, sampling, _listener(events), stream=stream,
                                  options=options)
    return job, events


async def queue_candidates(service: Service, items: list[tuple[str, Language | None]], target: Language,
                           options: Options) -> list[tuple[Job, "asyncio.Queue[Event]"]]:
    """Quality "best", first half: the texts queued once per candidate decoding setting, to run side by side in
    the engine's batch. Refused (422) before any work when no fusion model is available; all or none are queued."""
    fusion = service.fusion_engine()
    options = dataclasses.replace(options, max_segment_tokens=best_segment_tokens(service.settings,
                                                                                   fusion.max_seq_tokens))
    return await queue_samplings(service, items, target, CANDIDATE_SAMPLINGS, options)


async def queue_samplings(service: Service, items: list[tuple[str, Language | None]], target: Language,
                          samplings: tuple[Sampling, ...], options: Options
                          ) -> list[tuple[Job, "asyncio.Queue[Event]"]]:
    """The texts queued once per decoding setting, together, so that the engine's batch decodes them side by
    side; all or none are queued (a full queue refuses the request before any work)."""
    queued: list[tuple[Job, asyncio.Queue[Event]]] = []
    try:
        for sampling in samplings:
            queued.append(await submit(service, items, target, sampling, options=options))
    except BaseException:
        for job, _ in queued:
            job.engine.cancel(job)
        raise
    return queued


async def candidates_done(queued: list[tuple[Job, "asyncio.Queue[Event]"]],
                          request: Request | None) -> list[Job]:
    """The queued candidates once all are translated; the first failure (or the client leaving) cancels the rest."""
    try:
        for job, events in queued:
            await finished(job, events, request)
    finally:
        for job, _ in queued:
            if not job.ended:
                job.engine.cancel(job)
    return [job for job, _ in queued]


async def submit_fusion(service: Service, jobs: list[Job], sampling: Sampling) -> tuple[Job, "asyncio.Queue[Event]"]:
    """Quality "best", second half: the candidates fused segment by segment by the fusion model."""
    events: asyncio.Queue[Event] = asyncio.Queue()
    job = await run_in_threadpool(service.fusion_engine().submit_fusion, jobs, sampling, _listener(events))
    return job, events


async def run_best(service: Service, items: list[tuple[str, Language | None]], target: Language,
                   sampling: Sampling, options: Options, request: Request | None) -> Job:
    jobs = await candidates_done(await queue_candidates(service, items, target, options), request)
    job, events = await submit_fusion(service, jobs, sampling)
    return await finished(job, events, request)


async def events_until_done(job: Job, events: "asyncio.Queue[Event]",
                            request: Request | None) -> AsyncIterator[Event]:
    """The job's events up to its one terminal event ("done" or "error"); a client that disconnects, or a
    consumer that stops early, has the job cancelled. Token events that queued up while the consumer was busy
    are merged into the latest one (a stream shows the text so far, not each token)."""
    ended = False
    try:
        while True:
            try:
                event = await asyncio.wait_for(events.get(), timeout=0.5)
            except asyncio.TimeoutError:
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
            job.engine.cancel(job)


async def run_to_end(service: Service, items: list[tuple[str, Language | None]], target: Language,
                     sampling: Sampling, request: Request | None, options: Options = Options(),
                     quality: str = "standard") -> Job:
    """One request's job to its end: a plain translation, or quality "best" (candidates, then their fusion)."""
    if quality == "best":
        return await run_best(service, items, target, sampling, options, request)
    job, events = await submit(service, items, target, sampling, options=options)
    return await finished(job, events, request)


async def finished(job: Job, events: "asyncio.Queue[Event]", request: Request | None) -> Job:
    """The job once it has ended; its error raised."""
    async for _ in events_until_done(job, events, request):
        pass
    if job.error is not None:
        raise job.error
    return job

