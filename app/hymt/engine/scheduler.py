"""Which segments run in the next model step, and what each step's tokens do: continuous batching at the granularity
of one decoding step, the waiting segments taken in the fair order of engine/fair.py.

A segment waits until a row and a contiguous KV range (prompt + output budget) are free; then it is prefilled, in
chunks of at most `prefill_tokens` per step, and decoded one token per step beside every other segment in flight,
and it leaves the step it ends, giving its row and range to the next one at once. A prefill step also decodes one
token of every segment already decoding (they ride along in the same packed pass), so newcomers never stall the
running batch. A prefill step follows at most one decoding step, and interactive newcomers' chunks go first in it.
Where prefill steps run eagerly, in a large batch newcomers gather for a few decoding steps first, so that one
prefill step takes several (an eager prefill step costs several decoding steps whatever its tokens:
bench/prefill_cost.py); captured (engine/prefill.py), a prefill step costs about a decoding step of its tokens, and
a newcomer is prefilled at the next step. All segments in flight share
one LoRA adapter (an adapter switch waits for the batch to drain). When the segment chosen next cannot get a range,
admission stops there: nothing overtakes it, so a long segment is not starved by short ones. A newcomer whose prompt
starts with a kept prefix (engine/prefixes.py) has its rows copied in before its first prefill step and is prefilled
from the prefix's end; a prefill step that completes a prefix not kept yet copies it aside after (a step's `copies`
and `saves`), and the newcomers sharing it wait for the next prefill step to take it from there. Kept prefixes are
given up for a segment that would not fit beside them.

`postprocess` records a step's tokens: each segment's new token, the stop checks, the Outputs that go back (every
token of a streaming request as it comes, the whole output of the others once they end), and the times of the
segments that end (engine/timings.py). Preemption (on out-of-memory) returns segments to the head of their
request's queue with what they generated, to be prefilled again and resumed.

Pure bookkeeping (no torch), tested without a model; only the engine thread uses it. Its counters are plain
integers that other threads read for the engine's snapshot and admission.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence as Tokens_
from dataclasses import dataclass, field

from .allocator import RangeAllocator
from .fair import Waiting
from .prefixes import Copy, Prefixes
from .requests import Output, Priority
from .sequence import Sequence, State
from .timings import Timings

# The arena's first token row: where padding rows of a captured batch write and read, never a segment's.
PAD_TOKENS = 1

# An eager prefill step holds the whole batch meanwhile: prefilling each newcomer alone costs a large batch more than
# a short wait costs the newcomer. So there a newcomer waits one decoding step per GATHER_ROWS segments decoding (at
# most MAX_GATHER_STEPS), unless a full prefill step is ready.
GATHER_ROWS = 8
MAX_GATHER_STEPS = 8

# A step's tokens, one per sequence of the step (None: a chunk that does not sample yet).
Tokens = Tokens_[int | None]

# A segment that runs out of memory even alone this many times fails instead of being requeued again.
MAX_PREEMPTIONS_ALONE = 2


@dataclass
class Chunk:
    """Part of a prefill: tokens [start, start + length) of `seq`; it samples when it reaches the sequence's end.
    A decoding segment riding along in a prefill step is a chunk of its one last token."""

    seq: Sequence
    start: int
    length: int
    decoding: bool = False

    @property
    def samples(self) -> bool:
        return self.start + self.length == self.seq.num_tokens


@dataclass
class Step:
    kind: str  # "prefill" or "decode"
    chunks: list[Chunk] = field(default_factory=list)  # prefill (the decoding segments riding along come last)
    seqs: list[Sequence] = field(default_factory=list)  # decode
    copies: list[Copy] = field(default_factory=list)  # prefill: rows copied before the step (kept prefixes reused)
    saves: list[Copy] = field(default_factory=list)  # prefill: rows copied after it (prefixes it completes, kept)

    @property
    def sequences(self) -> list[Sequence]:
        return [c.seq for c in self.chunks] if self.kind == "prefill" else self.seqs


class Scheduler:
    def __init__(
        self,
        kv_tokens: int,
        max_in_flight: int,
        prefill_tokens: int,
        batch_min_share: float,
        stop_ids: list[int],
        gather: bool = True,
        batch_max_share: float = 1.0,
        prefix_reuse: bool = True,
        clock=time.monotonic,  # the segments' times (engine/timings.py); tests give their own
    ):
        self.allocator = RangeAllocator(kv_tokens, PAD_TOKENS)
        self.prefixes = Prefixes(self.allocator, prefix_reuse)
        self.max_in_flight = max_in_flight  # may shrink after out-of-memory; rows beyond it stay free
        self.prefill_tokens = prefill_tokens
        self.gather = gather  # newcomers gather for an eager prefill step (False: prefill steps are captured)
        self.stop_ids = frozenset(stop_ids)
        self.waiting = Waiting(batch_min_share, batch_max_share)
        self.running: list[Sequence] = []
        self.rows_held = {p: 0 for p in Priority}  # rows in flight by class
        self.tokens_out = {p: 0 for p in Priority}  # tokens generated, by class
        self.segments_done = 0
        self.timings, self.clock = Timings(), clock
        self._free_rows = list(range(max_in_flight - 1, -1, -1))
        self._arrivals = itertools.count()
        self._last_kind = "decode"
        self._gathered = 0  # decoding steps taken while batch newcomers wait for their prefill

    @property
    def max_segment_tokens(self) -> int:
        """The longest range a segment may ask for: the whole arena beyond the padding rows."""
        return self.allocator.capacity_tokens - PAD_TOKENS

    def figures(self) -> dict:
        """Its part of the engine's Snapshot (engine/requests.py)."""
        return dict(
            queue_depth=len(self.waiting),
            waiting={p.value: n for p, n in self.waiting.segments.items()},
            running={p.value: n for p, n in self.rows_held.items()},
            in_flight=len(self.running),
            max_in_flight=self.max_in_flight,
            kv_used_tokens=self.allocator.used_tokens - self.prefixes.kept_tokens,  # kept prefixes: given up on demand
            prefix_tokens_reused=self.prefixes.tokens_reused,
            tokens_out=sum(self.tokens_out.values()),
            tokens_out_by_class={p.value: n for p, n in self.tokens_out.items()},
            segments=self.segments_done,
            timings=self.timings.snapshot(),
        )

    def add(self, seqs: list[Sequence]) -> None:
        for seq in seqs:
            seq.arrival = next(self._arrivals)
            seq.state = State.WAITING
            self.waiting.push(seq)

    def abort(self, ids: set[int]) -> None:
        """Requests the caller gave up on leave the queue and the batch (a step in flight may still compute their
        rows; its tokens for them are dropped)."""
        self.waiting.remove(lambda s: s.id in ids)
        for seq in [s for s in self.running if s.id in ids]:
            self.finish(seq)

    def drain(self) -> list[Sequence]:
        """Every segment waiting or in flight, taken out (the engine is stopping)."""
        gone = self.waiting.remove(lambda s: True) + list(self.running)
        for seq in list(self.running):
            self.finish(seq)
        return gone

    def schedule(self) -> Step | None:
        self._admit()
        pending: list[Sequence] = []
        ready: list[Sequence] = []
        for seq in self.running:
            (pending if seq.needs_prefill else ready).append(seq)
        if pending and (not ready or (self._last_kind == "decode" and self._prefill_due(pending, ready))):
            self._last_kind, self._gathered = "prefill", 0
            pending.sort(key=lambda s: s.priority is not Priority.INTERACTIVE)  # stable: interactive chunks first
            chunks, copies, saves = self._chunks(pending)
            riders = [Chunk(s, s.num_cached, 1, decoding=True) for s in ready]
            return Step("prefill", chunks=chunks + riders, copies=copies, saves=saves)
        if ready:
            self._last_kind = "decode"
            self._gathered += bool(pending)
            return Step("decode", seqs=ready)
        return None

    def wants_prefill(self) -> bool:
        """Whether the next step may prefill: a segment admitted and waiting for it, or one that would be admitted."""
        if any(s.needs_prefill for s in self.running):
            return True
        return self._admissible() is not None

    def postprocess(self, step: Step, tokens: Tokens) -> tuple[list[Output], list[Sequence]]:
        """Record a step's tokens (None: a chunk that does not sample yet). Returns the outputs to post back and
        the segments that ended; those leave the batch at once."""
        outputs: list[Output] = []
        finished: list[Sequence] = []
        now = self.clock()
        lengths = [c.length for c in step.chunks] if step.kind == "prefill" else [1] * len(step.seqs)
        for seq, length, token in zip(step.sequences, lengths, tokens):
            if seq.state is not State.RUNNING:  # it ended in an earlier step, or its request was aborted
                continue
            seq.num_cached += length
            if token is None:
                continue
            seq.sampled += 1
            if seq.sampled == 1:
                seq.first_token_at = now
            if not (token in self.stop_ids and len(seq.output_ids) >= seq.min_new_tokens):
                seq.output_ids.append(token)
                self.tokens_out[seq.priority] += 1
                if len(seq.output_ids) < seq.max_new_tokens:
                    if seq.request.stream:
                        outputs.append(Output(seq.id, (token,)))
                        seq.posted += 1
                    continue
            self.finish(seq)
            self.segments_done += 1
            self.timings.observe(seq, now)
            finished.append(seq)
            outputs.append(Output(seq.id, tuple(seq.output_ids[seq.posted :]), finished=True))
        return outputs, finished

    def recover(self, step: Step) -> tuple[list[Sequence], list[Sequence]]:
        """Out of memory in a step: its prefilled segments, or the newest half in flight (batch work first) when
        decoding, go back to the queue with what they generated, and the budget shrinks. A segment that failed
        alone too often is taken out instead. Returns (requeued, hopeless)."""
        self.prefixes.forget(step.saves)  # the step may not have run far enough to fill them
        if step.kind == "prefill":
            victims = [c.seq for c in step.chunks if not c.decoding and c.seq.state is State.RUNNING]
        else:
            order = sorted(self.running, key=lambda s: (s.priority is Priority.INTERACTIVE, -s.arrival))
            victims = order[: (len(order) + 1) // 2]
        hopeless = [s for s in victims if len(self.running) == 1 and s.preemptions >= MAX_PREEMPTIONS_ALONE]
        victims = [s for s in victims if s not in hopeless]
        for seq in hopeless:
            self.finish(seq)
        for seq in victims:
            seq.preemptions += 1
            self._release(seq)
            seq.state, seq.num_cached, seq.reused = State.WAITING, 0, 0
        for seq in sorted(victims, key=lambda s: s.arrival, reverse=True):  # the earliest ends up first
            self.waiting.push(seq, front=True)
        self.max_in_flight = max(1, self.max_in_flight * 3 // 4)
        self.prefill_tokens = max(64, self.prefill_tokens // 2)
        return victims, hopeless

    def finish(self, seq: Sequence) -> None:
        """A running segment leaves: its row and its range go back at once."""
        self._release(seq)
        seq.state = State.FINISHED

    def _admissible(self) -> Sequence | None:
        """The segment that takes the next free row now, if one is free and its range and adapter fit."""
        if len(self.running) >= self.max_in_flight:
            return None
        seq = self.waiting.next(self.rows_held, self.max_in_flight)
        if seq is None or (self.running and seq.adapter != self.running[0].adapter):
            return None
        return seq if self.prefixes.make_room(seq.kv_tokens) else None

    def _admit(self) -> None:
        while (seq := self._admissible()) is not None:
            start = self.allocator.allocate(seq.kv_tokens)
            assert start is not None  # _admissible saw a free range this long
            self.waiting.take(seq)
            seq.kv_start, seq.row, seq.state, seq.num_cached = start, self._free_rows.pop(), State.RUNNING, 0
            seq.admitted_at = seq.admitted_at or self.clock()  # a preempted segment keeps its first
            self.running.append(seq)
            self.rows_held[seq.priority] += 1

    def _prefill_due(self, pending: list[Sequence], ready: list[Sequence]) -> bool:
        """Whether the newcomers have gathered long enough (waiting longer would bring few more into one step), or
        fill a prefill step."""
        return (
            not self.gather
            or self._gathered >= min(MAX_GATHER_STEPS, len(ready) // GATHER_ROWS)
            or sum(s.num_tokens - s.num_cached for s in pending) >= self.prefill_tokens
        )

    def _chunks(self, pending: list[Sequence]) -> tuple[list[Chunk], list[Copy], list[Copy]]:
        """The step's prompt chunks within its budget, with the kept prefixes' copies into the newcomers' ranges
        before it and the copies that keep the prefixes it completes after it."""
        budget, chunks, copies, saves = self.prefill_tokens, [], [], []
        keeping: set[tuple | None] = set()
        for seq in pending:
            if budget <= 0:
                break
            if seq.num_cached == 0:
                if self.prefixes.key(seq) in keeping:  # kept by this step: taken from there at the next
                    continue
                if copy := self.prefixes.reuse(seq):
                    seq.num_cached = seq.reused = copy[2]
                    copies.append(copy)
            left = seq.num_tokens - seq.num_cached
            # A segment decodes from what its last prefill chunk sampled: a chunk never leaves one token alone.
            length = min(left, budget) - (left - budget == 1)
            if length < 1:
                break
            chunks.append(Chunk(seq, seq.num_cached, length))
            budget -= length
            if save := self.prefixes.keep(seq, seq.num_cached + length):
                saves.append(save)
                keeping.add(self.prefixes.key(seq))
        return chunks, copies, saves

    def _release(self, seq: Sequence) -> None:
        if seq.state is State.RUNNING and seq in self.running:
            self.running.remove(seq)
            self.rows_held[seq.priority] -= 1
            self.allocator.free(seq.kv_start, seq.kv_tokens)
            self._free_rows.append(seq.row)
        seq.kv_start = seq.row = -1
