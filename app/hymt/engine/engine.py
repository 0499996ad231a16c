"""The engine: one thread that owns the model, fed by a bounded queue of segments from every request.

Callers (HTTP handlers, the CLI, the benchmark) submit texts and get a Job: its segments are batched with other
jobs' segments, and the job reports each finished segment to an optional listener, then ends in a full answer or
an explicit error. Start-up loads the tier the planner chose and proves it with a warm-up batch of the full token
budget, stepping down (smaller budget, then the next tier) on out-of-memory.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import cleanup, prompts, segment
from ..errors import Cancelled, HymtError
from ..languages import Language
from ..profiles import MIN_BATCH_TOKENS, TIERS, Decision
from ..settings import Settings
from . import adapters as adapter_registry
from .loader import load
from .runner import ModelRunner
from .scheduler import Scheduler, Work

log = logging.getLogger("hymt.engine")


@dataclass
class Event:
    kind: str  # "segment", "done" or "error"
    job: "Job"
    index: int = -1
    num_done: int = 0  # segments finished when the event was sent
    error: HymtError | None = None


@dataclass(eq=False)
class Job:
    id: int
    target: Language
    documents: list[segment.Document]
    refs: list[tuple[int, int]]  # segment number -> (document, segment within it)
    listener: Callable[[Event], None] | None = None
    results: list[cleanup.Cleaned | None] = field(default_factory=list)
    error: HymtError | None = None
    ended: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def num_segments(self) -> int:
        return len(self.refs)

    @property
    def num_done(self) -> int:
        return sum(r is not None for r in self.results)

    @property
    def cancelled(self) -> bool:
        return isinstance(self.error, Cancelled)

    def texts(self) -> list[str]:
        """The translated documents, each put back together around its segments (complete jobs only)."""
        per_doc: list[list[str]] = [[""] * len(d.segments) for d in self.documents]
        for (d, s), result in zip(self.refs, self.results):
            per_doc[d][s] = result.text if result else ""
        return [doc.join(parts) for doc, parts in zip(self.documents, per_doc)]

    def settled_texts(self) -> list[str]:
        """Each document translated up to its first unfinished segment: what a stream can show so far."""
        per_doc: list[list[str | None]] = [[None] * len(d.segments) for d in self.documents]
        for (d, s), result in zip(self.refs, self.results):
            if result is not None:
                per_doc[d][s] = result.text
        return [doc.join_prefix(parts) for doc, parts in zip(self.documents, per_doc)]

    def flags(self) -> dict:
        finished = [r for r in self.results if r is not None]
        return {"echo_segments": sum(r.echo for r in finished), "loop_cut_segments": sum(r.loop_cut for r in finished)}

    def wait(self, timeout: float | None = None) -> list[str]:
        if not self.done.wait(timeout):
            raise TimeoutError(f"job {self.id} not done after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.texts()


class Engine:
    def __init__(self, settings: Settings, decision: Decision, runner: ModelRunner, adapters: list,
                 attention: str, load_s: float, warmup: dict):
        self.settings = settings
        self.decision = decision
        self.runner = runner
        self.adapters = adapters
        self.attention = attention
        self.load_s = load_s
        self.warmup = warmup
        self.scheduler = Scheduler(decision.batch_tokens, settings.max_batch_size, settings.max_queue_segments)
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._stopping = False
        self.running_segments = 0
        self.last_oom_at: float | None = None
        self._thread = threading.Thread(target=self._loop, name="hymt-engine", daemon=True)
        self._thread.start()

    # -- submitting -------------------------------------------------------------------------------------------
    def submit(self, items: list[tuple[str, Language | None]], target: Language, sampling: prompts.Sampling,
               listener: Callable[[Event], None] | None = None, min_new_tokens: int = 0) -> Job:
        """Segment and queue texts (each with its source language, None if unknown). Raises Overloaded at once
        when the queue cannot take all of them."""
        count = self.runner.count_tokens
        documents = [segment.split(text, count, self.settings.max_segment_tokens, src.code if src else "en")
                     for text, src in items]
        job = Job(id=next(self._ids), target=target, documents=documents,
                  refs=[(d, s) for d, doc in enumerate(documents) for s in range(len(doc.segments))],
                  listener=listener)
        job.results = [None] * job.num_segments
        works = []
        for n, (d, s) in enumerate(job.refs):
            source, text = items[d][1], documents[d].segments[s]
            prompt = prompts.render(self.runner.loaded.tokenizer, prompts.user_message(source, target, text))
            adapter = adapter_registry.choose(self.adapters, source.code if source else None, target.code)
            works.append(Work(job_id=job.id, index=n, prompt_ids=self.runner.encode(prompt),
                              max_new_tokens=cleanup.max_new_tokens(count(text), self.settings.max_new_tokens),
                              group=(adapter, sampling), min_new_tokens=min_new_tokens, payload=(job, text)))
        if not works:
            self._end(job, None)
            return job
        with self._cond:
            self.scheduler.add(works)
            self._cond.notify()
        return job

    def cancel(self, job: Job) -> None:
        """Drop the job's queued segments and stop its running ones; the job ends as cancelled."""
        if self._end(job, Cancelled("the request was cancelled")):
            log.info("job %d cancelled", job.id)

    @property
    def queue_depth(self) -> int:
        return self.scheduler.num_waiting

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    # -- the engine thread --------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                if not self.scheduler.waiting and not self._stopping:
                    while not self._stopping and not self.scheduler.waiting:
                        self._cond.wait()
                    self._gather_arrivals()
                if self._stopping:
                    return
                batch = self.scheduler.next_batch()
                self.running_segments = len(batch)
            ooms = self.runner.stats.oom_events
            outputs = self.runner.run(batch, [w.payload[0].done.is_set for w in batch])
            if self.runner.stats.oom_events > ooms:
                self.last_oom_at = time.monotonic()
            with self._cond:
                self.running_segments = 0
            for work, output in zip(batch, outputs):
                self._deliver(work, output)

    def _gather_arrivals(self) -> None:
        """Coming out of idle, let requests that arrive together share the first batch: wait while the queue keeps
        growing (a pause of 10 ms ends it), at most `batch_wait_ms`. Called with the lock held."""
        deadline = time.monotonic() + self.settings.batch_wait_ms / 1000
        quiet_s = min(0.01, self.settings.batch_wait_ms / 1000)
        while not self._stopping:
            waiting = self.scheduler.num_waiting
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._cond.wait(min(quiet_s, remaining))
            if self.scheduler.num_waiting == waiting:
                return

    def _deliver(self, work: Work, output: str | HymtError) -> None:
        job, source_text = work.payload
        if job.done.is_set():
            return
        if isinstance(output, HymtError):
            self._end(job, output)
            return
        job.results[work.index] = cleanup.clean(source_text, output)
        self._emit(job, Event("segment", job, index=work.index, num_done=job.num_done))
        if job.num_done == job.num_segments:
            self._end(job, None)

    def _end(self, job: Job, error: HymtError | None) -> bool:
        """End a job exactly once: done, failed or cancelled. Its queued segments go; its listener hears the end
        before `done` is set, so a waiter that sees `done` has every event already queued."""
        with self._cond:
            if job.ended:
                return False
            job.ended = True
            job.error = error
            if error is not None:
                self.scheduler.cancel(job.id)
        self._emit(job, Event("error", job, error=error) if error else Event("done", job))
        job.done.set()
        return True

    @staticmethod
    def _emit(job: Job, event: Event) -> None:
        if job.listener is not None:
            try:
                job.listener(event)
            except Exception:  # noqa: BLE001 - a broken listener must not stop the engine thread
                log.exception("listener of job %d failed", job.id)


def start(settings: Settings, decision: Decision) -> Engine:
    """Load the decided tier and prove it with a full-budget warm-up; step down on out-of-memory."""
    tiers = [decision.tier]
    if decision.device == "cuda" and settings.profile == "auto":
        tiers += [t for t in TIERS[TIERS.index(decision.tier) + 1:] if t.auto]
    adapters = adapter_registry.read_manifest(settings.adapters) if settings.adapters else []
    steps: list[str] = []
    for tier in tiers:
        if tier is not decision.tier:
            decision = decision.with_tier(tier, decision.batch_tokens, f"stepped down: {'; '.join(steps)}")
        try:
            loaded = load(settings.model, tier)
        except torch.OutOfMemoryError:
            steps.append(f"{tier.name} weights did not fit")
            log.warning("out of memory loading %s; trying the next tier", tier.name)
            _release()
            continue
        loaded.model = adapter_registry.attach(loaded.model, adapters)
        if tier.device == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(settings.cudnn_attention)
            if settings.cudnn_attention and loaded.attention == "sdpa":
                loaded.attention = "sdpa+cudnn"
        runner = ModelRunner(loaded, tier.kv_cache, settings.empty_cache_after_batch, has_adapters=bool(adapters))
        budget = decision.batch_tokens
        while True:
            try:
                warmup = _warm_up(runner, budget, settings.max_batch_size, tier.device)
                if budget != decision.batch_tokens:
                    decision = decision.with_batch_tokens(budget, f"{decision.reason}; warm-up: {'; '.join(steps)}")
                log.info("profile %s ready: %d batch tokens, attention %s, loaded in %.1f s",
                         decision.profile, budget, loaded.attention, loaded.load_s)
                return Engine(settings, decision, runner, adapters, loaded.attention, loaded.load_s, warmup)
            except torch.OutOfMemoryError:
                steps.append(f"{tier.name} out of memory at {budget} batch tokens")
                log.warning("warm-up out of memory at %d batch tokens on %s", budget, tier.name)
                _release()
                budget //= 2
                if budget < MIN_BATCH_TOKENS:
                    break
        del runner, loaded
        _release()
    raise HymtError(f"no profile survived its warm-up: {'; '.join(steps)}", error_type="out_of_memory")


def _release() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _warm_up(runner: ModelRunner, budget: int, max_batch_size: int, device: str) -> dict:
    """One batch as large as the budget allows (random prompt tokens, forced output length), so the peak memory of
    serving is reached before the first user request instead of during it. On the CPU a small batch proves the path."""
    if device == "cpu":
        rows, prompt_len, new_tokens = 1, 8, 4
    else:
        rows = max(1, min(max_batch_size, budget // 512))
        new_tokens = 32
        prompt_len = max(8, budget // rows - new_tokens)
    vocab = min(runner.loaded.config.vocab_size, runner.loaded.pad_id)
    generator = torch.Generator().manual_seed(0)
    batch = [Work(job_id=0, index=i, prompt_ids=torch.randint(0, vocab, (prompt_len,), generator=generator).tolist(),
                  max_new_tokens=new_tokens, min_new_tokens=new_tokens, group=(None, prompts.Sampling(greedy=True)))
             for i in range(rows)]
    started = time.perf_counter()
    runner.generate(batch, [lambda: False] * rows)
    if device == "cuda":
        torch.cuda.synchronize()
    runner.stats = type(runner.stats)()
    return {"rows": rows, "prompt_tokens": prompt_len, "new_tokens": new_tokens,
            "seconds": round(time.perf_counter() - started, 3)}
