"""The engine: one thread that owns the model and runs it step by step, fed by every request's segments.

Callers (HTTP handlers, the CLI, the benchmark) submit texts and get a Job. Each step the scheduler picks the
segments in flight (a segment joins at the next step and leaves the step it ends), the runner prefills or decodes
them, and the job hears of each new token (when streaming), each finished segment and its end: a full answer or an
explicit error. Out-of-memory in a step preempts segments back to the queue, with what they generated, and shrinks
the budget; nothing accepted is lost. Start-up loads the planned tier, allocates the KV arena, captures the decoding
graphs and proves the memory plan with a full-size warm-up, shrinking the arena, then stepping down a tier, on
out-of-memory.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import cleanup, glossary, prompts, segment
from ..errors import BadRequest, Cancelled, GenerationError, HymtError, NotReady, Overloaded
from ..glossary import Glossaries, Term
from ..languages import Language
from ..profiles import TIERS, Decision, in_flight, segment_kv_tokens
from ..settings import Settings
from . import adapters as adapter_registry
from .admission import Admission
from .loader import load
from .runner import ModelRunner, RunnerPlan
from .scheduler import Scheduler, Sequence, State, Step

log = logging.getLogger("hymt.engine")

# A segment that runs out of memory even alone this many times fails instead of being requeued again.
MAX_PREEMPTIONS_ALONE = 2


@dataclass
class Event:
    kind: str  # "token" (streaming jobs only), "segment", "done" or "error"
    job: "Job"
    index: int = -1
    num_done: int = 0  # segments finished when the event was sent
    error: HymtError | None = None


@dataclass(frozen=True)
class Options:
    """Per-request translation options beside the languages and decoding settings."""

    glossary: tuple[Term, ...] = ()  # the request's own entries; the server's glossaries are added after them
    context: bool = True  # the preceding segments as context, where the model has a context prompt
    max_segment_tokens: int | None = None  # shorter segments than the setting's (quality best: fusion prompts fit)
    formatted: bool = False  # the texts carry inline markup markers (documents) that the translation must keep


@dataclass(eq=False)
class Job:
    id: int
    target: Language
    documents: list[segment.Document]
    refs: list[tuple[int, int]]  # segment number -> (document, segment within it)
    listener: Callable[[Event], None] | None = None
    stream: bool = False  # whether the listener hears every token
    sequences: list[Sequence] = field(default_factory=list)
    results: list[cleanup.Cleaned | None] = field(default_factory=list)
    sources: list[Language | None] = field(default_factory=list)  # per segment
    terms: list[list[Term]] = field(default_factory=list)  # per segment: the glossary entries occurring in it
    misses: dict[int, list[Term]] = field(default_factory=dict)  # segment -> entries its translation lacks
    retried: set[int] = field(default_factory=set)  # segments translated again after a missed term
    retry_terms: bool = True
    unfused: set[int] = field(default_factory=set)  # quality best: segments whose fusion prompt did not fit
    error: HymtError | None = None
    ended: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    engine: "Engine | None" = field(default=None, repr=False)  # the engine it runs on: the one to cancel it

    @property
    def num_segments(self) -> int:
        return len(self.refs)

    @property
    def num_done(self) -> int:
        return sum(r is not None for r in self.results)

    @property
    def cancelled(self) -> bool:
        return isinstance(self.error, Cancelled)

    @property
    def tokens_out(self) -> int:
        return sum(len(s.output_ids) for s in self.sequences)

    def texts(self) -> list[str]:
        """The translated documents, each put back together around its segments (complete jobs only)."""
        per_doc: list[list[str]] = [[""] * len(d.segments) for d in self.documents]
        for (d, s), result in zip(self.refs, self.results):
            per_doc[d][s] = result.text if result else ""
        return [doc.join(parts) for doc, parts in zip(self.documents, per_doc)]

    def settled_texts(self, decode: Callable[[list[int]], str] | None = None) -> list[str]:
        """Each document translated up to its first unfinished segment: what a stream can show so far. With
        `decode`, that segment's text generated so far is shown too, unless glossary terms apply to it (a missed
        term has it translated again, and a stream cannot take back what it showed)."""
        per_doc: list[list[str | None]] = [[None] * len(d.segments) for d in self.documents]
        open_docs: set[int] = set()
        for n, ((d, s), result) in enumerate(zip(self.refs, self.results)):
            if d in open_docs:
                continue
            if result is not None:
                per_doc[d][s] = result.text
                continue
            open_docs.add(d)
            if decode is not None and not (self.retry_terms and self.terms and self.terms[n]):
                per_doc[d][s] = cleanup.partial(decode(list(self.sequences[n].output_ids)))
        return [doc.join_prefix(parts) for doc, parts in zip(self.documents, per_doc)]

    def flags(self) -> dict:
        finished = [r for r in self.results if r is not None]
        flags = {"echo_segments": sum(r.echo for r in finished),
                 "loop_cut_segments": sum(r.loop_cut for r in finished)}
        if self.unfused:
            flags["unfused_segments"] = len(self.unfused)
        return flags

    def glossary_report(self) -> dict | None:
        """Per segment, the glossary entries its translation lacks (after the retry); None when no entry applied."""
        applied = sum(len(t) for t in self.terms)
        if not applied:
            return None
        misses = [{"document": self.refs[n][0], "segment": self.refs[n][1], "retried": n in self.retried,
                   "missing": [t.to_json() for t in terms]} for n, terms in sorted(self.misses.items())]
        return {"terms_applied": applied, "segments_with_terms": sum(bool(t) for t in self.terms), "misses": misses}

    def wait(self, timeout: float | None = None) -> list[str]:
        if not self.done.wait(timeout):
            raise TimeoutError(f"job {self.id} not done after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.texts()


@dataclass
class Startup:
    """What start-up did and how long each part took (seconds)."""

    load_s: float = 0.0
    graphs_s: float = 0.0
    warmup: dict = field(default_factory=dict)
    total_s: float = 0.0
    steps: list[str] = field(default_factory=list)  # out-of-memory step-downs on the way


class Engine:
    def __init__(self, settings: Settings, decision: Decision, runner: ModelRunner, adapters: list,
                 startup: Startup, glossaries: Glossaries | None = None):
        self.settings = settings
        self.glossaries = glossaries
        self.identified = runner.loaded.family
        self.family = self.identified.family
        self.decision = decision
        self.runner = runner
        self.adapters = adapters
        self.startup = startup
        self.attention = runner.attention + (" + cuda graphs" if runner.graphs else "") + \
            (f" (graphs failed: {runner.graph_error})" if runner.graph_error else "")
        plan = runner.plan
        self.scheduler = Scheduler(plan.kv_tokens, plan.max_in_flight, plan.prefill_tokens,
                                   settings.max_queue_segments)
        self.max_seq_tokens = plan.max_seq_tokens
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self._stopping = False
        # While a step runs outside the lock, its segments' rows and ranges are in use: a job ended meanwhile
        # (cancelled by its client) leaves the scheduler when the step is over, not under the runner's feet.
        self._stepping = False
        self._ended_in_step: list[int] = []
        self.last_oom_at: float | None = None
        # Until throughput is measured under load, the warm-up's prefill rate stands in for it.
        warmup = startup.warmup
        seed = warmup.get("prefill_tokens", 0) / warmup["seconds"] if warmup.get("seconds") else 100.0
        self.admission = Admission(settings.max_queue_wait_s, seed)
        self._thread = threading.Thread(target=self._loop, name="hymt-engine", daemon=True)
        self._thread.start()

    # -- submitting -------------------------------------------------------------------------------------------
    def submit(self, items: list[tuple[str, Language | None]], target: Language, sampling: prompts.Sampling,
               listener: Callable[[Event], None] | None = None, min_new_tokens: int = 0,
               stream: bool = False, options: Options = Options()) -> Job:
        """Segment and queue texts (each with its source language, None if unknown). Each segment's prompt holds
        the glossary entries occurring in it, or else (where the model has a context prompt) the document's
        preceding source segments; a segment with inline markup markers (options.formatted) gets the
        formatted-translation prompt instead. Raises Overloaded at once when the queue cannot take all of them."""
        # A document's segments are counted again as the context of the ones after them.
        count = functools.cache(self.runner.count_tokens)
        max_tokens = options.max_segment_tokens or self.settings.max_segment_tokens
        documents = [segment.split(text, count, max_tokens, src.code if src else "en") for text, src in items]
        job = Job(id=next(self._ids), engine=self, target=target, documents=documents,
                  refs=[(d, s) for d, doc in enumerate(documents) for s in range(len(doc.segments))],
                  listener=listener, stream=stream)
        job.results = [None] * job.num_segments
        entries: dict[str | None, list[Term]] = {}
        for n, (d, s) in enumerate(job.refs):
            source, text = items[d][1], documents[d].segments[s]
            key = source.code if source else None
            if key not in entries:
                server = self.glossaries.terms(source, target) if self.glossaries else []
                entries[key] = list(options.glossary) + server
            # Markers are kept only by the formatted prompt, and no official prompt combines it with terms.
            marked = options.formatted and prompts.has_markers(text)
            terms = [] if marked else glossary.applicable(entries[key], text)
            context = self._context(documents[d], s, count) if options.context and not (terms or marked) else ""
            message = prompts.segment_message(self.family, source, target, text, terms, context, formatted=marked)
            wanted, prompt_ids = self._wanted(text, count), self._prompt(message)
            if context and not self._fits_whole_budget(prompt_ids, wanted):
                prompt_ids = self._prompt(prompts.segment_message(self.family, source, target, text, terms))
            job.sources.append(source)
            job.terms.append(terms)
            job.sequences.append(self._sequence(job, n, prompt_ids, wanted, source, text, sampling, min_new_tokens))
        return self._queue(job)

    def submit_fusion(self, candidates: list[Job], sampling: prompts.Sampling,
                      listener: Callable[[Event], None] | None = None) -> Job:
        """Fuse the same texts' candidate translations (jobs done, one per decoding setting) segment by segment with
        Chimera's prompt. The fused job has the candidates' documents, so it reads back like any job; its
        glossary misses are reported, not retried. A segment whose prompt would not leave its output budget keeps
        its greedy candidate (the first), counted in the job's flags as unfused."""
        first = candidates[0]
        job = Job(id=next(self._ids), engine=self, target=first.target, documents=first.documents, refs=first.refs,
                  listener=listener, sources=first.sources, terms=first.terms, retry_terms=False)
        job.results = [None] * job.num_segments
        for n, (d, s) in enumerate(job.refs):
            text = first.documents[d].segments[s]
            source = first.sources[n]
            if source is None:
                raise BadRequest("quality best needs the source language (it could not be detected): give source",
                                 error_type="unknown_source_language")
            message = prompts.fusion_message(source, job.target, text, [c.results[n].text for c in candidates])
            wanted, prompt_ids = self._wanted(text), self._prompt(message)
            if self._fits_whole_budget(prompt_ids, wanted):
                job.sequences.append(self._sequence(job, n, prompt_ids, wanted, source, text, sampling, 0))
                continue
            job.unfused.add(n)
            job.results[n] = first.results[n]
            job.sequences.append(Sequence(prompt_ids=[], max_new_tokens=0, job_id=job.id, index=n,
                                          payload=(job, text)))
        return self._queue(job)

    def _context(self, document: segment.Document, index: int, count: Callable[[str], int]) -> str:
        """The segments before this one in its document, newest first, as many as fit HYMT_CONTEXT_TOKENS; only
        source text, so that the segments of a document still run side by side in one batch (HY-MT1.5's context
        prompt asks the model not to translate the text above, which is what source text is)."""
        if not (self.family.context and self.settings.context and index > 0):
            return ""
        chosen: list[str] = []
        left = self.settings.context_tokens
        for text in reversed(document.segments[:index]):
            text = text.strip()
            if not text:
                continue
            tokens = count(text)
            if tokens > left:
                break
            chosen.append(text)
            left -= tokens
        return "\n".join(reversed(chosen))

    def _prompt(self, message: str) -> list[int]:
        return self.runner.encode(prompts.render(self.runner.loaded.tokenizer, message))

    def _wanted(self, text: str, count: Callable[[str], int] | None = None) -> int:
        """The output budget a segment's source text asks for."""
        return cleanup.max_new_tokens((count or self.runner.count_tokens)(text), self.settings.max_new_tokens)

    def _fits_whole_budget(self, prompt_ids: list[int], wanted: int) -> bool:
        """Whether a prompt (with context, or fusing candidates) leaves the segment its whole output budget in its
        KV range."""
        return self.max_seq_tokens - len(prompt_ids) >= wanted

    def _sequence(self, job: Job, n: int, prompt_ids: list[int], wanted: int, source: Language | None, text: str,
                  sampling: prompts.Sampling, min_new_tokens: int) -> Sequence:
        """Segment n of a job as a sequence for the scheduler: its prompt tokens and output budget (`wanted`, cut
        to what its KV range leaves)."""
        budget = min(wanted, self.max_seq_tokens - len(prompt_ids))
        if budget < 1:
            raise BadRequest(f"a segment of {len(prompt_ids)} prompt tokens leaves no room to translate it",
                             error_type="segment_too_long")
        return Sequence(prompt_ids=prompt_ids, max_new_tokens=budget, sampling=sampling,
                        adapter=adapter_registry.choose(self.adapters, source.code if source else None,
                                                        job.target.code),
                        min_new_tokens=min(min_new_tokens, budget), job_id=job.id, index=n, payload=(job, text))

    def _queue(self, job: Job) -> Job:
        pending = [seq for seq in job.sequences if job.results[seq.index] is None]
        if not pending:
            self._end(job, None)
            return job
        with self._cond:
            if self._stopping:
                raise NotReady("the server is stopping")
            self._admit(pending)
            self._cond.notify()
        return job

    def _admit(self, seqs: list[Sequence]) -> None:
        """Queue a job's segments if they can be expected to start within HYMT_MAX_QUEUE_WAIT_S; refuse it
        at once otherwise (and when the queue is full). Called with the lock held."""
        stats, waiting = self.runner.stats, self.scheduler.waiting
        self.admission.observe(stats.tokens_out, sum(stats.step_s.values()), saturated=bool(waiting))
        verdict = self.admission.decide([s.max_new_tokens - len(s.output_ids) for s in waiting],
                                        [s.max_new_tokens for s in seqs],
                                        self.scheduler.max_in_flight - len(self.scheduler.running))
        if not verdict.admitted:
            self.admission.refused += 1
            raise Overloaded(f"the server is busy: this request would wait about {verdict.expected_wait_s:.0f} s "
                             f"to start (the limit is {self.settings.max_queue_wait_s:g} s); try again in "
                             f"{verdict.retry_after_s} s", verdict.retry_after_s)
        try:
            self.scheduler.add(seqs)
        except Overloaded:
            self.admission.refused += 1
            raise
        self.admission.admitted += 1

    def cancel(self, job: Job) -> None:
        """Drop the job's queued segments and stop its running ones; the job ends as cancelled."""
        if self._end(job, Cancelled("the request was cancelled")):
            log.info("job %d cancelled", job.id)

    @property
    def queue_depth(self) -> int:
        return self.scheduler.num_waiting

    @property
    def in_flight(self) -> int:
        return len(self.scheduler.running)

    @property
    def kv_used_tokens(self) -> int:
        return self.scheduler.allocator.used_tokens

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def decode(self, token_ids: list[int]) -> str:
        return self.runner.loaded.tokenizer.decode(token_ids, skip_special_tokens=True)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        with self._cond:
            pending = {s.payload[0] for s in list(self.scheduler.waiting) + self.scheduler.running}
        for job in pending:
            self._end(job, NotReady("the server stopped before this request finished"))

    # -- the engine thread --------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while True:
            with self._cond:
                step = None
                while not self._stopping and (step := self.scheduler.schedule()) is None:
                    self._cond.wait()
                if self._stopping:
                    return
                self._stepping = True
            try:
                tokens = (self.runner.prefill(step.chunks) if step.kind == "prefill"
                          else self.runner.decode(step.seqs))
            except torch.OutOfMemoryError:
                self._recover(step)
                continue
            except Exception as exc:  # noqa: BLE001 - a failed step ends its jobs with an error, not the engine
                log.exception("a %s step of %d segments failed", step.kind, len(step.sequences))
                with self._cond:
                    self._step_over()
                for job in {s.payload[0] for s in step.sequences}:
                    self._end(job, GenerationError(f"generation failed: {type(exc).__name__}"))
                continue
            events = self._advance(step, tokens)
            for event in events:
                self._emit(event.job, event)
            for job in {e.job for e in events if e.kind == "segment" and e.job.num_done == e.job.num_segments}:
                self._end(job, None)

    def _advance(self, step: Step, tokens: list[int | None]) -> list[Event]:
        """Record a step's tokens; segments that end leave at once. Returns the events to send."""
        events: list[Event] = []
        stop_ids = self.runner.loaded.stop_ids
        with self._cond:
            self._step_over()
            lengths = [c.length for c in step.chunks] if step.kind == "prefill" else [1] * len(step.seqs)
            for seq, length, token in zip(step.sequences, lengths, tokens):
                if seq.state is not State.RUNNING:  # its job ended (cancelled or failed) during the step
                    continue
                seq.num_cached += length
                if token is None:
                    continue
                job = seq.payload[0]
                if token in stop_ids and len(seq.output_ids) >= seq.min_new_tokens:
                    self._finish(seq, events)
                    continue
                seq.output_ids.append(token)
                if len(seq.output_ids) >= seq.max_new_tokens:
                    self._finish(seq, events)
                elif job.stream:
                    events.append(Event("token", job, index=seq.index, num_done=job.num_done))
        return events

    def _finish(self, seq: Sequence, events: list[Event]) -> None:
        self.scheduler.finish(seq)
        self.runner.stats.segments += 1
        self.admission.observe_finished(seq.max_new_tokens, len(seq.output_ids))
        job, source_text = seq.payload
        cleaned = cleanup.clean(source_text, self.decode(seq.output_ids))
        missed = glossary.missing(job.terms[seq.index], cleaned.text) if job.terms and job.terms[seq.index] else []
        if missed and job.retry_terms and seq.index not in job.retried and self._retry(job, seq):
            return
        if missed:
            job.misses[seq.index] = missed
        job.results[seq.index] = cleaned
        events.append(Event("segment", job, index=seq.index, num_done=job.num_done))

    def _retry(self, job: Job, seq: Sequence) -> bool:
        """Queue a segment whose translation missed a glossary term once more, with a prompt that insists on the
        terms (called with the lock held, on the engine thread). False when it cannot be queued."""
        n = seq.index
        job.retried.add(n)
        text = seq.payload[1]
        message = prompts.segment_message(self.family, job.sources[n], job.target, text, job.terms[n], strict=True)
        try:
            again = self._sequence(job, n, self._prompt(message), self._wanted(text), job.sources[n], text,
                                   seq.sampling, seq.min_new_tokens)
            self.scheduler.add([again])
        except (BadRequest, Overloaded) as exc:
            log.info("job %d segment %d missed a term and cannot be retried: %s", job.id, n, exc.message)
            return False
        job.sequences[n] = again
        return True

    def _recover(self, step: Step) -> None:
        """Out of memory in a step: the step's prefilled segments or the newest half in flight (decoding) go back
        to the queue with what they generated, and the budget shrinks. A segment that fails alone repeatedly
        ends its job with an error."""
        self.runner.stats.oom_events += 1
        self.last_oom_at = time.monotonic()
        if self.runner.device.type == "cuda":
            torch.cuda.empty_cache()
        with self._cond:
            self._step_over()
            running = self.scheduler.running
            if step.kind == "prefill":
                victims = [c.seq for c in step.chunks if not c.decoding and c.seq.state is State.RUNNING]
            else:
                victims = sorted(running, key=lambda s: s.arrival)[len(running) // 2:]
            hopeless = [s for s in victims if len(running) == 1 and s.preemptions >= MAX_PREEMPTIONS_ALONE]
            victims = [s for s in victims if s not in hopeless]
            for seq in victims:
                seq.preemptions += 1
            self.scheduler.preempt(victims)
            self.scheduler.shrink()
            self.runner.stats.preemptions += len(victims)
        log.warning("out of memory in a %s step: %d segments requeued; now at most %d in flight, %d prefill tokens",
                    step.kind, len(victims), self.scheduler.max_in_flight, self.scheduler.prefill_tokens)
        for seq in hopeless:
            self._end(seq.payload[0], GenerationError("out of GPU memory on this segment even alone; "
                                                      "send shorter text"))

    def _end(self, job: Job, error: HymtError | None) -> bool:
        """End a job exactly once: done, failed or cancelled. Its segments leave the queue and the batch; its
        listener hears the end before `done` is set, so a waiter that sees `done` has every event already queued."""
        with self._cond:
            if job.ended:
                return False
            job.ended = True
            job.error = error
            if error is not None and self._stepping:
                self._ended_in_step.append(job.id)
            elif error is not None:
                self.scheduler.remove_job(job.id)
        self._emit(job, Event("error", job, error=error) if error else Event("done", job))
        job.done.set()
        return True

    def _step_over(self) -> None:
        """The step's segments are free to leave: jobs ended during it leave the scheduler now (lock held)."""
        self._stepping = False
        for job_id in self._ended_in_step:
            self.scheduler.remove_job(job_id)
        self._ended_in_step.clear()

    @staticmethod
    def _emit(job: Job, event: Event) -> None:
        if job.listener is not None:
            try:
                job.listener(event)
            except Exception:  # noqa: BLE001 - a broken listener must not stop the engine thread
                log.exception("listener of job %d failed", job.id)


def start(settings: Settings, decision: Decision, on_phase: Callable[[str], None] | None = None) -> Engine:
    """Load the decided tier, allocate its KV arena, capture its graphs and prove it with a full-size warm-up;
    on out-of-memory shrink the arena, then step down to the next tier."""
    began = time.perf_counter()
    glossaries = Glossaries(settings.glossaries) if settings.glossaries else None
    phase = on_phase or (lambda text: None)
    if settings.compile_cache_dir:
        # Compiled kernels persist across restarts here (a volume in the image).
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", settings.compile_cache_dir)
    tiers = [decision.tier]
    if decision.device == "cuda" and settings.profile == "auto":
        tiers += [t for t in TIERS[TIERS.index(decision.tier) + 1:] if t.auto and decision.allows(t)]
    adapters = adapter_registry.read_manifest(settings.adapters) if settings.adapters else []
    startup = Startup()
    for tier in tiers:
        if tier is not decision.tier:
            decision = decision.with_tier(tier, f"stepped down: {'; '.join(startup.steps)}")
        phase(f"loading weights ({tier.name})")
        try:
            loaded = load(settings.model, tier, settings.model_family)
        except torch.OutOfMemoryError:
            startup.steps.append(f"{tier.name} weights did not fit")
            log.warning("out of memory loading %s; trying the next tier", tier.name)
            _release()
            continue
        startup.load_s = loaded.load_s
        loaded.model = adapter_registry.attach(loaded.model, adapters)
        if tier.device == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(settings.cudnn_attention)
        kv_tokens = decision.kv_cache_tokens
        while kv_tokens > decision.max_seq_tokens:
            runner = None
            try:
                runner = ModelRunner(loaded, _runner_plan(settings, decision, tier, kv_tokens, adapters))
                if runner.device.type == "cuda":
                    phase("compiling and capturing CUDA graphs")
                startup.graphs_s = runner.capture_graphs()
                phase("warming up")
                startup.warmup = runner.warm_up()
                if kv_tokens != decision.kv_cache_tokens:
                    decision = decision.with_kv_tokens(kv_tokens, runner.plan.max_in_flight,
                                                       f"{decision.reason}; warm-up: {'; '.join(startup.steps)}")
                startup.total_s = time.perf_counter() - began
                log.info("profile %s ready in %.1f s: %d KV tokens, %d segments in flight, attention %s",
                         decision.profile, startup.total_s, kv_tokens, runner.plan.max_in_flight, runner.attention)
                return Engine(settings, decision, runner, adapters, startup, glossaries)
            except torch.OutOfMemoryError:
                startup.steps.append(f"{tier.name} out of memory with {kv_tokens} KV tokens")
                log.warning("warm-up out of memory with %d KV tokens on %s", kv_tokens, tier.name)
                del runner
                _release()
                kv_tokens = kv_tokens * 3 // 4
        startup.steps.append(f"{tier.name} has no room for one full segment")
        del loaded
        _release()
    raise HymtError(f"no profile survived its warm-up: {'; '.join(startup.steps)}", error_type="out_of_memory")


def _runner_plan(settings: Settings, decision: Decision, tier, kv_tokens: int, adapters: list) -> RunnerPlan:
    on_gpu = tier.device == "cuda"
    # LoRA wrappers choose their adapter in Python at every call, which a captured graph would freeze.
    graphs = on_gpu and settings.cuda_graphs and not adapters
    return RunnerPlan(kv_tokens=kv_tokens, max_in_flight=in_flight(kv_tokens, decision.max_in_flight),
                      prefill_tokens=decision.prefill_tokens, max_seq_tokens=segment_kv_tokens(settings),
                      kv_cache="int8" if tier.kv_cache == "int8" else "16-bit", cuda_graphs=graphs,
                      compiled=on_gpu and settings.compile)


def _release() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
