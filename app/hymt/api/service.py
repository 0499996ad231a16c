"""The service behind the routes: the engine once loaded (in a background thread, so /health answers "loading"
meanwhile), and the bridge that lets async handlers wait on engine jobs without blocking the event loop."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import AsyncIterator, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..engine.engine import Engine, Event, Job, start
from ..errors import HymtError, NotReady
from ..hardware import GIB, apply_memory_cap, process_gpu_memory_bytes
from ..languages import Language
from ..profiles import Decision
from ..prompts import Sampling
from ..settings import Settings
from .ratelimit import Limits

log = logging.getLogger("hymt.service")

DEGRADED_AFTER_OOM_S = 300


@dataclass
class Service:
    settings: Settings
    decision: Decision
    engine: Engine | None = None
    load_error: str | None = None
    started_at: float = field(default_factory=time.monotonic)
    started_at_wall: float = field(default_factory=time.time)
    on_fatal: Callable[[str], None] | None = None
    phase: str = "starting"  # what start-up is doing, for /health until the engine is ready
    draining: bool = False  # SIGTERM came: requests in flight finish, new ones get 503
    limits: Limits = field(init=False)

    def __post_init__(self):
        self.limits = Limits(self.settings.rate_limit_per_key, self.settings.rate_limit_per_address)

    def load_in_background(self, engine_factory: Callable[..., Engine] | None = None) -> threading.Thread:
        def on_phase(text: str) -> None:
            log.info("start-up: %s", text)
            self.phase = text

        def load():
            try:
                apply_memory_cap(self.settings.gpu_memory_gb)
                self.engine = (engine_factory or start)(self.settings, self.decision, on_phase)
                self.phase = "ready"
                self.decision = self.engine.decision
            except Exception as exc:  # noqa: BLE001 - any start-up failure makes the service unhealthy, with a reason
                message = exc.message if isinstance(exc, HymtError) else f"{type(exc).__name__}: {exc}"
                log.error("start-up failed: %s", message)
                self.load_error = message
                if self.on_fatal is not None:
                    self.on_fatal(message)

        thread = threading.Thread(target=load, name="hymt-load", daemon=True)
        thread.start()
        return thread

    def ready_engine(self) -> Engine:
        if self.draining:
            raise NotReady("the server is shutting down and takes no new requests; try again shortly",
                           max(1, round(self.settings.drain_grace_s)), error_type="draining")
        if self.engine is None:
            raise NotReady(self.load_error or f"the server is starting ({self.phase}); try again shortly")
        if not self.engine.alive:
            raise NotReady("the engine stopped; the service is restarting")
        return self.engine

    def busy(self) -> bool:
        """Whether the engine still holds segments (waiting or in flight)."""
        return self.engine is not None and (self.engine.queue_depth > 0 or self.engine.in_flight > 0)

    def status(self) -> str:
        if self.draining:
            return "draining"
        if self.load_error is not None or (self.engine is not None and not self.engine.alive):
            return "unhealthy"
        if self.engine is None:
            return "loading"
        recent_oom = (self.engine.last_oom_at is not None
                      and time.monotonic() - self.engine.last_oom_at < DEGRADED_AFTER_OOM_S)
        if recent_oom or self.engine.queue_depth > 0.8 * self.settings.max_queue_segments:
            return "degraded"
        return "healthy"

    def gpu_memory(self) -> tuple[float, float | None]:
        """(used by this process, card total) in GiB; (0, None) without a GPU."""
        gpu = self.decision.gpu
        if gpu is None:
            return 0.0, None
        used = process_gpu_memory_bytes(os.getpid())
        if used is None:
            try:
                import torch

                used = torch.cuda.memory_reserved() if torch.cuda.is_available() else 0
            except ImportError:
                used = 0
        return round(used / GIB, 3), round(gpu["total_bytes"] / GIB, 3)


async def submit(service: Service, items: list[tuple[str, Language | None]], target: Language, sampling: Sampling,
                 stream: bool = False) -> tuple[Job, "asyncio.Queue[Event]"]:
    """Queue a job; its events (every token too, when streaming) arrive on the returned asyncio queue.
    Tokenizing runs off the event loop."""
    engine = service.ready_engine()
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[Event] = asyncio.Queue()

    def listener(event: Event) -> None:
        loop.call_soon_threadsafe(events.put_nowait, event)

    job = await run_in_threadpool(engine.submit, items, target, sampling, listener, stream=stream)
    return job, events


async def events_until_done(service: Service, job: Job, events: "asyncio.Queue[Event]",
                            request: Request) -> AsyncIterator[Event]:
    """The job's events up to its one terminal event ("done" or "error"); a client that disconnects, or a
    consumer that stops early, has the job cancelled. Token events that queued up while the consumer was busy
    are merged into the latest one (a stream shows the text so far, not each token)."""
    ended = False
    try:
        while True:
            try:
                event = await asyncio.wait_for(events.get(), timeout=0.5)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
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
            service.engine.cancel(job)


async def run_to_end(service: Service, items: list[tuple[str, Language | None]], target: Language,
                     sampling: Sampling, request: Request) -> Job:
    job, events = await submit(service, items, target, sampling)
    async for _ in events_until_done(service, job, events, request):
        pass
    if job.error is not None:
        raise job.error
    return job
