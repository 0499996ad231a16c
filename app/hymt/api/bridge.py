"""The bridge between async handlers and the translator: a job submitted off the event loop, its events delivered
on an asyncio queue as the translator's text worker sends them, and the job cancelled when its client leaves
(`request` None: nobody can leave, as in the CLI and the document jobs' worker). Plain translations, quality
"best" (candidates, then their fusion), and a document's texts as batch work in parts."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..engine.requests import Priority
from ..engine.sampling_params import Sampling
from ..errors import Cancelled, Overloaded
from ..languages import Language
from ..planner.fusion import best_segment_tokens
from ..translation.candidates import CANDIDATE_SAMPLINGS
from ..translation.jobs import Event, Job, Options
from .service import Service

log = logging.getLogger("hymt.bridge")

# A document's texts go to the engine this many at a time, with PARTS_AHEAD more parts sent while one is translated:
# its segments are tokenized and held as they are needed, not all at once, enough of them wait to fill the rows of
# a large batch alone, and its turns in the fair order never lapse.
PART_TEXTS = 128
PARTS_AHEAD = 2
# A part refused because the batch queue is full is sent again after this many seconds.
RETRY_S = 0.5


@dataclasses.dataclass(frozen=True)
class Turn:
    """Where a request stands in the engine's fair order: its class and its client (an API key or an address)."""

    priority: Priority = Priority.INTERACTIVE
    client: str = ""


def _cancel(job: Job) -> None:
    """Cancel a job on the translator it was submitted to (every submitted job has one)."""
    if job.translator is not None:
        job.translator.cancel(job)


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
    turn: Turn = Turn(),
) -> tuple[Job, asyncio.Queue[Event]]:
    """Submit a job; its events (every token too, when streaming) arrive on the returned asyncio queue.
    Tokenizing runs off the event loop."""
    translator = service.ready_translator()
    events: asyncio.Queue[Event] = asyncio.Queue()
    job = await run_in_threadpool(
        translator.submit,
        items,
        target,
        sampling,
        _listener(events),
        stream=stream,
        options=options,
        priority=turn.priority,
        client=turn.client,
    )
    return job, events


async def queue_candidates(
    service: Service, items: list[tuple[str, Language | None]], target: Language, options: Options, turn: Turn
) -> list[tuple[Job, asyncio.Queue[Event]]]:
    """Quality "best", first half: the texts submitted once per candidate decoding setting, to run side by side in
    the engine's batch. Refused (422) before any work when no fusion model is available; all or none are queued."""
    fusion = service.fusion_translator()
    options = dataclasses.replace(
        options, max_segment_tokens=best_segment_tokens(service.settings, fusion.max_seq_tokens)
    )
    return await queue_samplings(service, items, target, CANDIDATE_SAMPLINGS, options, turn)


async def queue_samplings(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    samplings: tuple[Sampling, ...],
    options: Options,
    turn: Turn,
) -> list[tuple[Job, asyncio.Queue[Event]]]:
    """The texts submitted once per decoding setting, together, so that the engine's batch decodes them side by
    side; all or none are queued (a full queue refuses the request before any work)."""
    queued: list[tuple[Job, asyncio.Queue[Event]]] = []
    try:
        for sampling in samplings:
            queued.append(await submit(service, items, target, sampling, options=options, turn=turn))
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
    job = await run_in_threadpool(service.fusion_translator().submit_fusion, jobs, sampling, _listener(events))
    return job, events


async def run_best(
    service: Service,
    items: list[tuple[str, Language | None]],
    target: Language,
    sampling: Sampling,
    options: Options,
    request: Request | None,
    turn: Turn,
) -> Job:
    jobs = await candidates_done(await queue_candidates(service, items, target, options, turn), request)
    job, events = await submit_fusion(service, jobs, sampling)
    return await finished(job, events, request)


async def events_until_done(job: Job, events: asyncio.Queue[Event], request: Request | None) -> AsyncIterator[Event]:
    """The job's events up to its one terminal event ("done" or "error"); a client that disconnects, or a
    consumer that stops early, has the job cancelled. Token events that queued up while the consumer was busy
    are merged into the latest one (a stream shows the text so far, not each token)."""
    ended = False
    try:
        while True:
            # Not asyncio.wait_for: before Python 3.12 it can swallow a cancellation that comes as the item does
            # (python/cpython#86296), and a cancelled document would go on sending its parts.
            getter = asyncio.ensure_future(events.get())
            try:
                await asyncio.wait({getter}, timeout=0.5)
            finally:
                getter.cancel()  # done or not: an item it did not take stays in the queue
            if not getter.done() or getter.cancelled():
                if request is not None and await request.is_disconnected():
                    log.info("client left: cancelling job %d", job.id)
                    return
                continue
            event = getter.result()
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
    turn: Turn = Turn(),
) -> Job:
    """One request's job to its end: a plain translation, or quality "best" (candidates, then their fusion)."""
    if quality == "best":
        return await run_best(service, items, target, sampling, options, request, turn)
    job, events = await submit(service, items, target, sampling, options=options, turn=turn)
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
    client: str = "",
) -> list[str]:
    """A document's marked texts translated as batch work, in parts of PART_TEXTS texts with PARTS_AHEAD more
    sent while the oldest is translated (a full batch queue: sent again shortly). on_text(index,
    translation) as each text is done. `options`: the request's (glossary, context, style, background), each
    text taking the formatted prompt where it has markup."""
    options = dataclasses.replace(options, formatted=True)
    turn = Turn(Priority.BATCH, client)
    parts = [(base, texts[base : base + PART_TEXTS]) for base in range(0, len(texts), PART_TEXTS)]
    results: list[str] = [""] * len(texts)

    async def send(part: list[str]) -> tuple[Job, asyncio.Queue[Event]]:
        while True:
            try:
                return await submit(service, [(t, source) for t in part], target, sampling, options=options, turn=turn)
            except Overloaded:
                if request is not None and await request.is_disconnected():
                    raise Cancelled("the request was cancelled") from None
                await asyncio.sleep(RETRY_S)

    async def follow(base: int, job: Job, events: asyncio.Queue[Event]) -> None:
        told: set[int] = set()
        async for event in events_until_done(job, events, request):
            if event.kind == "segment" and on_text is not None:
                d = job.refs[event.index][0]
                if d not in told and (text := job.document_text(d)) is not None:
                    told.add(d)
                    on_text(base + d, text)
        if job.error is not None:
            raise job.error
        results[base : base + len(job.documents)] = job.texts()

    sent: collections.deque[tuple[int, Job, asyncio.Queue[Event]]] = collections.deque()
    try:
        for base, part in parts:
            sent.append((base, *await send(part)))
            if len(sent) > PARTS_AHEAD:  # the oldest is followed while the ones after it wait their turn
                await follow(*sent.popleft())
        while sent:
            await follow(*sent.popleft())
    finally:
        for _, job, _ in sent:
            if not job.ended:
                _cancel(job)
    return results
