"""The token engine: requests of token ids in, their generated token ids out, one model step after another.

Callers `add` requests (engine/requests.py) and `abort` them by id from any thread; both are posted to an inbox that
the engine thread takes at the start of each step, so nothing outside that thread touches the scheduler or the
runner. `step()` is the engine's whole work: take the inbox, schedule (engine/scheduler.py: the fair order, a
segment joining at the next step and leaving the step it ends), run the step on the runner, and postprocess its
tokens, whose Outputs go on `outputs`, one list per step, for the layer above to read. A decoding step is launched,
and the previous one's tokens are read and postprocessed while the GPU runs it (on the CPU, where a step runs as it
is launched, in the same order); a segment that ended in step N has taken one extra row of step N+1, whose token is
dropped. A step that would prefill first lets the step in flight finish, so it sees every segment as it is.
Out-of-memory in a step preempts segments back to the queue, with what they generated, and shrinks the budget;
nothing accepted is lost. `snapshot()` gives the figures. Start-up is engine/startup.py.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time

import torch

from ..errors import GenerationError, HymtError, NotReady
from ..settings import Settings
from .admission import Admission
from .inbox import Inbox
from .requests import Output, Request, Snapshot
from .runner import Launched, ModelRunner
from .scheduler import Scheduler, Step, Tokens
from .sequence import Sequence

log = logging.getLogger("hymt.engine")


class Engine:
    def __init__(self, settings: Settings, decision, runner: ModelRunner, adapters: list, startup):
        self.settings, self.decision, self.runner = settings, decision, runner
        self.adapters, self.startup = adapters, startup
        loaded = runner.loaded
        self.tokenizer, self.identified = loaded.tokenizer, loaded.family  # what the layer above builds prompts with
        self.attention = (
            runner.attention
            + (" + cuda graphs" if runner.graphs else "")
            + (f" (graphs failed: {runner.graph_error})" if runner.graph_error else "")
        )
        plan = runner.plan
        self.max_seq_tokens = plan.max_seq_tokens
        self.scheduler = Scheduler(
            plan.kv_tokens,
            plan.max_in_flight,
            plan.prefill_tokens,
            settings.batch_min_share,
            loaded.stop_ids,
            gather=not runner.prefill_captured,
            batch_max_share=settings.batch_max_share,
            prefix_reuse=settings.prefix_reuse,
        )
        # Until throughput is measured under load, the warm-up's prefill rate stands in for it.
        warmup = startup.warmup
        seed = warmup.get("prefill_tokens", 0) / warmup["seconds"] if warmup.get("seconds") else 100.0
        self.admission = Admission(settings.max_queue_wait_s, seed)
        self.outputs: queue.SimpleQueue[list[Output] | None] = queue.SimpleQueue()  # None: no more outputs
        self.last_oom_at: float | None = None
        self.inbox = Inbox(settings, self.scheduler, self.admission)
        self._in_flight: tuple[Step, Launched] | None = None
        self._thread = threading.Thread(target=self._loop, name="hymt-engine", daemon=True)
        self._thread.start()

    # -- from any thread ------------------------------------------------------------------------------------
    def add(self, requests: list[Request]) -> None:
        """Queue requests of one class, all or none, or refuse them at once (engine/inbox.py says when)."""
        if requests:
            self.inbox.add(requests)

    def abort(self, ids: list[int]) -> None:
        """Stop generating for these requests (no output follows for them); ids already ended are ignored."""
        self.inbox.abort(ids)

    def snapshot(self) -> Snapshot:
        a = self.admission
        return Snapshot(
            **self.scheduler.figures(),
            **dataclasses.asdict(self.runner.stats),
            last_oom_at=self.last_oom_at,
            admitted=a.admitted,
            refused=a.refused,
            expected_wait_s=a.expected_wait_s,
            max_wait_s=a.max_wait_s,
            tokens_per_s=a.tokens_per_s,
        )

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop the engine thread; every request still waiting or in flight ends with an error output."""
        self.inbox.stop()
        self._thread.join(timeout=30)
        self._take_inbox()
        error = NotReady("the server stopped before this request finished")
        self.outputs.put([Output(s.id, finished=True, error=error) for s in self.scheduler.drain()])
        self.outputs.put(None)

    # -- the engine thread ----------------------------------------------------------------------------------
    def _loop(self) -> None:
        while self.step():
            pass

    def step(self) -> bool:
        """Take the inbox, schedule, run, postprocess: one step of the model (False once stopping)."""
        if not self._take_inbox():
            return False
        if self._in_flight is not None and self.scheduler.wants_prefill():
            self._collect()
        step = self.scheduler.schedule()
        if step is None:
            if self._in_flight is not None:  # nothing to add: the step in flight is all there is
                self._collect()
            else:
                self.inbox.wait()
            return True
        try:
            if step.kind == "decode":
                launched = self.runner.launch(step.seqs)
                previous, self._in_flight = self._in_flight, (step, launched)
                if previous is not None:
                    self._postprocess(previous[0], self.runner.collect(previous[1]))
                return True
            assert self._in_flight is None  # wants_prefill() said so above: the step in flight was collected
            self.runner.arena.copy(step.copies)
            tokens = self.runner.prefill(step.chunks)
            self.runner.arena.copy(step.saves)
            self._postprocess(step, tokens)
        except torch.OutOfMemoryError:
            if self._in_flight is not None:
                self._collect()
            self._recover(step)
        except Exception as exc:  # a failed step ends its segments with an error, not the engine
            log.exception("a %s step of %d segments failed", step.kind, len(step.sequences))
            if self._in_flight is not None and self._in_flight[0] is not step:
                self._collect()
            self._in_flight = None
            self.scheduler.prefixes.forget(step.saves)
            failed = [s for s in step.sequences if s in self.scheduler.running]
            for seq in failed:
                self.scheduler.finish(seq)
            self._fail(failed, GenerationError(f"generation failed: {type(exc).__name__}"))
        return True

    def _take_inbox(self) -> bool:
        stopping = self.inbox.stopping
        for kind, payload in self.inbox.take():
            if kind == "add":
                self.scheduler.add(payload)  # type: ignore[arg-type]
            else:
                self.scheduler.abort(payload)  # type: ignore[arg-type]
        return not stopping

    def _collect(self) -> None:
        assert self._in_flight is not None  # every caller has seen a step in flight (only this thread sets it)
        step, launched = self._in_flight
        self._in_flight = None
        self._postprocess(step, self.runner.collect(launched))

    def _postprocess(self, step: Step, tokens: Tokens) -> None:
        outputs, finished = self.scheduler.postprocess(step, tokens)
        for seq in finished:
            self.admission.observe_finished(seq.max_new_tokens, len(seq.output_ids))
        stats = self.runner.stats
        self.admission.observe(
            sum(self.scheduler.tokens_out.values()), sum(stats.step_s.values()), bool(self.scheduler.waiting)
        )
        if outputs:
            self.outputs.put(outputs)

    def _recover(self, step: Step) -> None:
        self.runner.stats.oom_events += 1
        self.last_oom_at = time.monotonic()
        if self.runner.device.type == "cuda":
            torch.cuda.empty_cache()
        requeued, hopeless = self.scheduler.recover(step)
        self.runner.stats.preemptions += len(requeued)
        log.warning(
            "out of memory in a %s step: %d segments requeued; now at most %d in flight, %d prefill tokens",
            step.kind,
            len(requeued),
            self.scheduler.max_in_flight,
            self.scheduler.prefill_tokens,
        )
        self._fail(hopeless, GenerationError("out of GPU memory on this segment even alone; send shorter text"))

    def _fail(self, seqs: list[Sequence], error: HymtError) -> None:
        if seqs:
            self.outputs.put([Output(s.id, finished=True, error=error) for s in seqs])
