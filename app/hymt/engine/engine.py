"""The engine: the model's steps, one after another, fed by every request's segments.

Callers (HTTP handlers, the CLI, the benchmark) submit texts and get a Job (engine/jobs.py). `step()` is the
engine's whole work: schedule (a segment joins at the next step and leaves the step it ends), run the step on the
runner, and postprocess its tokens. A decoding step is launched, and the previous one's tokens are read and
postprocessed while the GPU runs it (on the CPU, where a step runs as it is launched, in the same order); a segment
that ended in step N has taken one extra row of step N+1, whose token is dropped. A prefill step waits for the step
in flight first, so it sees every segment as it is. Everything textual (detokenizing, cleanup, glossary checks and
their retries, events to listeners) happens on the text worker (engine/text.py), never on the engine thread or under
its lock. Out-of-memory in a step preempts segments back to the queue, with what they generated, and shrinks the
budget; nothing accepted is lost. Start-up is engine/startup.py.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

import torch

from .. import prompts
from ..errors import Cancelled, GenerationError, HymtError, NotReady, Overloaded
from ..languages import Language
from ..settings import Settings
from .admission import Admission
from .jobs import Event, Job, Options, origin
from .prompting import Prompter
from .runner import Launched, ModelRunner
from .scheduler import Scheduler, Sequence, State, Step
from .text import TextWorker, emit

log = logging.getLogger("hymt.engine")

# A segment that runs out of memory even alone this many times fails instead of being requeued again.
MAX_PREEMPTIONS_ALONE = 2


class Engine:
    def __init__(self, settings: Settings, decision, runner: ModelRunner, adapters: list, startup, glossaries=None):
        self.settings = settings
        self.glossaries = glossaries
        self.identified = runner.loaded.family
        self.family = self.identified.family
        self.decision = decision
        self.runner = runner
        self.adapters = adapters
        self.startup = startup
        self.attention = (
            runner.attention
            + (" + cuda graphs" if runner.graphs else "")
            + (f" (graphs failed: {runner.graph_error})" if runner.graph_error else "")
        )
        plan = runner.plan
        self.scheduler = Scheduler(plan.kv_tokens, plan.max_in_flight, plan.prefill_tokens, settings.max_queue_segments)
        self.max_seq_tokens = plan.max_seq_tokens
        self.prompter = Prompter(
            settings, self.family, runner.loaded.tokenizer, runner.encode, plan.max_seq_tokens, adapters, glossaries
        )
        self._cond = threading.Condition()
        self._stopping = False
        # While the runner builds a step outside the lock, its segments' rows and ranges are in use: a job ended
        # meanwhile (cancelled by its client) leaves the scheduler when the runner is done with them.
        self._stepping = False
        self._ended_in_step: list[int] = []
        self._in_flight: tuple[Step, Launched] | None = None
        self.last_oom_at: float | None = None
        # Until throughput is measured under load, the warm-up's prefill rate stands in for it.
        warmup = startup.warmup
        seed = warmup.get("prefill_tokens", 0) / warmup["seconds"] if warmup.get("seconds") else 100.0
        self.admission = Admission(settings.max_queue_wait_s, seed)
        self.text = TextWorker(self)
        self._thread = threading.Thread(target=self._loop, name="hymt-engine", daemon=True)
        self._thread.start()

    # -- submitting -------------------------------------------------------------------------------------------
    def submit(
        self,
        items: list[tuple[str, Language | None]],
        target: Language,
        sampling: prompts.Sampling,
        listener: Callable[[Event], None] | None = None,
        min_new_tokens: int = 0,
        stream: bool = False,
        options: Options = Options(),
    ) -> Job:
        """Segment and queue texts (each with its source language, None if unknown; see Prompter.job). Raises
        Overloaded at once when the queue cannot take all of them."""
        return self._queue(self.prompter.job(items, target, sampling, listener, min_new_tokens, stream, options))

    def submit_fusion(
        self, candidates: list[Job], sampling: prompts.Sampling, listener: Callable[[Event], None] | None = None
    ) -> Job:
        """Fuse candidate translations segment by segment (see Prompter.fusion_job)."""
        return self._queue(self.prompter.fusion_job(candidates, sampling, listener))

    def _queue(self, job: Job) -> Job:
        job.engine = self
        pending = [seq for seq in job.sequences if job.results[seq.index] is None]
        if not pending:
            self.end(job, None)
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
        verdict = self.admission.decide(
            [s.max_new_tokens - len(s.output_ids) for s in waiting],
            [s.max_new_tokens for s in seqs],
            self.scheduler.max_in_flight - len(self.scheduler.running),
        )
        if not verdict.admitted:
            self.admission.refused += 1
            raise Overloaded(
                f"the server is busy: this request would wait about {verdict.expected_wait_s:.0f} s "
                f"to start (the limit is {self.settings.max_queue_wait_s:g} s); try again in "
                f"{verdict.retry_after_s} s",
                verdict.retry_after_s,
            )
        try:
            self.scheduler.add(seqs)
        except Overloaded:
            self.admission.refused += 1
            raise
        self.admission.admitted += 1

    def requeue(self, seq: Sequence) -> None:
        """A segment of a running job, to be translated again (the text worker's glossary retry)."""
        with self._cond:
            self.scheduler.add([seq])
            self._cond.notify()

    def cancel(self, job: Job) -> None:
        """Drop the job's queued segments and stop its running ones; the job ends as cancelled."""
        if self.end(job, Cancelled("the request was cancelled")):
            log.info("job %d cancelled", job.id)

    def fail(self, job: Job, why: str) -> None:
        self.end(job, GenerationError(why))

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
        text = self.runner.loaded.tokenizer.decode(token_ids, skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence of ids decodes to one string (a list of them, to a list)
        return text

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        self.text.stop()
        with self._cond:
            pending = {origin(s).job for s in list(self.scheduler.waiting) + self.scheduler.running}
        for job in pending:
            self.end(job, NotReady("the server stopped before this request finished"))

    # -- the engine thread --------------------------------------------------------------------------------------
    def _loop(self) -> None:
        while self.step():
            pass

    def step(self) -> bool:
        """Schedule, run, postprocess: one step of the model (False once stopping). A prefill step first lets
        the decoding step in flight finish, so that it schedules from every segment's true state."""
        with self._cond:
            drain = self._in_flight is not None and self.scheduler.wants_prefill()
        if drain:
            self._collect()
        with self._cond:
            while not self._stopping and (step := self.scheduler.schedule()) is None and self._in_flight is None:
                self._cond.wait()
            if self._stopping:
                return False
            self._stepping = step is not None
        if step is None:  # nothing to add: the step in flight is all there is
            self._collect()
            return True
        try:
            if step.kind == "decode":
                launched = self.runner.launch(step.seqs)
                self._step_over()
                previous, self._in_flight = self._in_flight, (step, launched)
                if previous is not None:
                    self._postprocess(previous[0], self.runner.collect(previous[1]))
                return True
            if self._in_flight is not None:  # a segment queued since the check above: its riders move on first
                self._collect()
                with self._cond:
                    self.scheduler.refresh_riders(step)
            tokens = self.runner.prefill(step.chunks)
        except torch.OutOfMemoryError:
            self._step_over()
            if self._in_flight is not None:
                self._collect()
            self._recover(step)
            return True
        except Exception as exc:  # a failed step ends its jobs with an error, not the engine
            log.exception("a %s step of %d segments failed", step.kind, len(step.sequences))
            self._step_over()
            if self._in_flight is not None and self._in_flight[0] is not step:
                self._collect()
            self._in_flight = None
            for job in {origin(s).job for s in step.sequences}:
                self.fail(job, f"generation failed: {type(exc).__name__}")
            return True
        self._step_over()
        self._postprocess(step, tokens)
        return True

    def _collect(self) -> None:
        assert self._in_flight is not None  # every caller has seen a step in flight (only this thread sets it)
        step, launched = self._in_flight
        self._in_flight = None
        self._postprocess(step, self.runner.collect(launched))

    def _postprocess(self, step: Step, tokens: Iterable[int | None]) -> None:
        """Record a step's tokens; segments that end leave at once, and their text goes to the text worker."""
        finished: list[Sequence] = []
        streamed: list[Event] = []
        stop_ids = self.runner.loaded.stop_ids
        with self._cond:
            lengths = [c.length for c in step.chunks] if step.kind == "prefill" else [1] * len(step.seqs)
            for seq, length, token in zip(step.sequences, lengths, tokens):
                if seq.state is not State.RUNNING:  # it ended in an earlier step, or its job ended meanwhile
                    continue
                seq.num_cached += length
                if token is None:
                    continue
                if not (token in stop_ids and len(seq.output_ids) >= seq.min_new_tokens):
                    seq.output_ids.append(token)
                    if len(seq.output_ids) < seq.max_new_tokens:
                        job = origin(seq).job
                        if job.stream:
                            streamed.append(Event("token", job, index=seq.index))
                        continue
                self.scheduler.finish(seq)
                self.runner.stats.segments += 1
                self.admission.observe_finished(seq.max_new_tokens, len(seq.output_ids))
                finished.append(seq)
        for event in streamed:
            self.text.event(event)
        for seq in finished:
            self.text.finished(seq)

    def _recover(self, step: Step) -> None:
        """Out of memory in a step: the step's prefilled segments or the newest half in flight (decoding) go back
        to the queue with what they generated, and the budget shrinks. A segment that fails alone repeatedly
        ends its job with an error."""
        self.runner.stats.oom_events += 1
        self.last_oom_at = time.monotonic()
        if self.runner.device.type == "cuda":
            torch.cuda.empty_cache()
        with self._cond:
            running = self.scheduler.running
            if step.kind == "prefill":
                victims = [c.seq for c in step.chunks if not c.decoding and c.seq.state is State.RUNNING]
            else:
                victims = sorted(running, key=lambda s: s.arrival)[len(running) // 2 :]
            hopeless = [s for s in victims if len(running) == 1 and s.preemptions >= MAX_PREEMPTIONS_ALONE]
            victims = [s for s in victims if s not in hopeless]
            for seq in victims:
                seq.preemptions += 1
            self.scheduler.preempt(victims)
            self.scheduler.shrink()
            self.runner.stats.preemptions += len(victims)
        log.warning(
            "out of memory in a %s step: %d segments requeued; now at most %d in flight, %d prefill tokens",
            step.kind,
            len(victims),
            self.scheduler.max_in_flight,
            self.scheduler.prefill_tokens,
        )
        for seq in hopeless:
            self.fail(origin(seq).job, "out of GPU memory on this segment even alone; send shorter text")

    def end(self, job: Job, error: HymtError | None) -> bool:
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
        emit(job, Event("error", job, error=error) if error else Event("done", job))
        job.done.set()
        return True

    def _step_over(self) -> None:
        """The runner is done with the step's segments: jobs ended meanwhile leave the scheduler now."""
        with self._cond:
            self._stepping = False
            for job_id in self._ended_in_step:
                self.scheduler.remove_job(job_id)
            self._ended_in_step.clear()
