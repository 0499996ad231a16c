"""Which segments run in the next model step: continuous batching at the granularity of one decoding step.

A segment waits (FIFO) until a row and a contiguous KV range (prompt + output budget) are free; then it is
prefilled, in chunks of at most `prefill_tokens` per step, and decoded one token per step beside every other segment
in flight, and it leaves the step it ends, giving its row and range to the next one at once. A prefill step also
decodes one token of every segment already decoding (they ride along in the same packed pass), so newcomers never
stall the running batch. A prefill step follows at most one decoding step in small batches; in large ones newcomers
gather for a few decoding steps first, so that one prefill step takes several. All segments in flight share one LoRA
adapter (an adapter switch waits for the batch to drain, in arrival order). Preemption (on out-of-memory) returns
segments to the head of the queue with what they generated, to be prefilled again and resumed.

Pure bookkeeping (no torch), tested without a model; the engine holds its lock around it.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from ..errors import Overloaded, PayloadTooLarge
from ..prompts import Sampling
from .allocator import RangeAllocator

# The arena's first token row: where padding rows of a captured batch write and read, never a segment's.
PAD_TOKENS = 1

# Clients arrive one by one, and a prefill step runs eagerly and holds the whole batch meanwhile: prefilling each
# newcomer alone costs a large batch more than a short wait costs the newcomer. So a newcomer waits one decoding
# step per GATHER_ROWS segments decoding (at most MAX_GATHER_STEPS), unless a full prefill step is ready or no one
# else can join.
GATHER_ROWS = 8
MAX_GATHER_STEPS = 8


class State(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """One segment to translate: its prompt, its budget and decoding settings, and what it has generated."""

    prompt_ids: list[int]
    max_new_tokens: int
    sampling: Sampling = Sampling()
    adapter: str | None = None
    min_new_tokens: int = 0
    job_id: int = 0
    index: int = 0  # position of the segment in its job
    payload: object = field(default=None, repr=False)  # opaque here: the engine's jobs.Origin
    output_ids: list[int] = field(default_factory=list)
    state: State = State.WAITING
    arrival: int = 0
    # While admitted (running): its state row in the runner and the first arena row of its range; -1 otherwise.
    row: int = -1
    kv_start: int = -1
    num_cached: int = 0  # tokens whose keys and values are in the arena
    preemptions: int = 0

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def kv_tokens(self) -> int:
        """The arena range it needs: the prompt and the whole output budget (the last token is never cached)."""
        return len(self.prompt_ids) + self.max_new_tokens

    def token(self, position: int) -> int:
        n = len(self.prompt_ids)
        return self.prompt_ids[position] if position < n else self.output_ids[position - n]

    @property
    def needs_prefill(self) -> bool:
        return self.num_tokens - self.num_cached > 1


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

    @property
    def sequences(self) -> list[Sequence]:
        return [c.seq for c in self.chunks] if self.kind == "prefill" else self.seqs


class Scheduler:
    def __init__(self, kv_tokens: int, max_in_flight: int, prefill_tokens: int, max_queue: int):
        self.allocator = RangeAllocator(kv_tokens, PAD_TOKENS)
        self.max_in_flight = max_in_flight  # may shrink after out-of-memory; rows beyond it stay free
        self.prefill_tokens = prefill_tokens
        self.max_queue = max_queue
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._free_rows = list(range(max_in_flight - 1, -1, -1))
        self._arrivals = itertools.count()
        self._last_kind = "decode"
        self._gathered = 0  # decoding steps taken while newcomers wait for their prefill

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    @property
    def max_segment_tokens(self) -> int:
        """The longest range a segment may ask for: the whole arena beyond the padding rows."""
        return self.allocator.capacity_tokens - PAD_TOKENS

    def add(self, seqs: list[Sequence]) -> None:
        """Queue all of a job's segments, or none: a job that does not fit is refused whole."""
        if len(self.waiting) + len(seqs) > self.max_queue:
            raise Overloaded(
                f"the queue is full ({len(self.waiting)} of {self.max_queue} segments waiting); try again shortly"
            )
        too_long = [s for s in seqs if s.kv_tokens > self.max_segment_tokens]
        if too_long:
            raise PayloadTooLarge(
                f"a segment needs {too_long[0].kv_tokens} KV tokens (its prompt and output "
                f"budget); the cache holds {self.max_segment_tokens}: split it or ask for fewer "
                "new tokens"
            )
        for seq in seqs:
            seq.arrival = next(self._arrivals)
            seq.state = State.WAITING
        self.waiting.extend(seqs)

    def remove_job(self, job_id: int) -> list[Sequence]:
        """Drop a job's waiting segments and release its running ones; returns the running ones released."""
        self.waiting = deque(s for s in self.waiting if s.job_id != job_id)
        gone = [s for s in self.running if s.job_id == job_id]
        for seq in gone:
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
            riders = [Chunk(s, s.num_cached, 1, decoding=True) for s in ready]
            return Step("prefill", chunks=self._chunks(pending) + riders)
        if ready:
            self._last_kind = "decode"
            self._gathered += bool(pending)
            return Step("decode", seqs=ready)
        return None

    def wants_prefill(self) -> bool:
        """Whether the next step may prefill: a segment admitted and waiting for it, or one waiting with a row free."""
        return any(s.needs_prefill for s in self.running) or (
            bool(self.waiting) and len(self.running) < self.max_in_flight
        )

    def refresh_riders(self, step: Step) -> None:
        """A prefill step's decoding riders as they are now (a decoding step finished since it was scheduled)."""
        chunks = [c for c in step.chunks if not c.decoding]
        step.chunks = chunks + [
            Chunk(c.seq, c.seq.num_cached, 1, decoding=True)
            for c in step.chunks
            if c.decoding and c.seq.state is State.RUNNING
        ]

    def _prefill_due(self, pending: list[Sequence], ready: list[Sequence]) -> bool:
        """Whether newcomers have gathered long enough: waiting longer would bring no more of them into one step."""
        return (
            self._gathered >= min(MAX_GATHER_STEPS, len(ready) // GATHER_ROWS)
            or sum(s.num_tokens - s.num_cached for s in pending) >= self.prefill_tokens
            or len(self.running) >= self.max_in_flight
            or bool(self.waiting)
        )

    def _admit(self) -> None:
        """Admit waiting segments in arrival order while a row and an arena range are free, and the adapter
        matches the one in flight; the first that cannot be admitted stops admission (no overtaking)."""
        while self.waiting and len(self.running) < self.max_in_flight:
            seq = self.waiting[0]
            if self.running and seq.adapter != self.running[0].adapter:
                return
            start = self.allocator.allocate(seq.kv_tokens)
            if start is None:
                return
            self.waiting.popleft()
            seq.kv_start, seq.row, seq.state, seq.num_cached = start, self._free_rows.pop(), State.RUNNING, 0
            self.running.append(seq)

    def _chunks(self, pending: list[Sequence]) -> list[Chunk]:
        budget, chunks = self.prefill_tokens, []
        for seq in pending:
            if budget <= 0:
                break
            length = min(seq.num_tokens - seq.num_cached, budget)
            chunks.append(Chunk(seq, seq.num_cached, length))
            budget -= length
        return chunks

    def finish(self, seq: Sequence) -> None:
        """A running segment leaves: its row and its range go back at once."""
        self._release(seq)
        seq.state = State.FINISHED

    def preempt(self, seqs: list[Sequence]) -> None:
        """Back to the head of the queue, in arrival order, keeping what they generated."""
        for seq in seqs:
            self._release(seq)
            seq.state, seq.num_cached = State.WAITING, 0
        merged = sorted(list(seqs) + list(self.waiting), key=lambda s: s.arrival)
        self.waiting = deque(merged)

    def shrink(self) -> None:
        """After out-of-memory: fewer segments in flight and smaller prefill steps from now on."""
        self.max_in_flight = max(1, self.max_in_flight * 3 // 4)
        self.prefill_tokens = max(64, self.prefill_tokens // 2)

    def _release(self, seq: Sequence) -> None:
        if seq in self.running:
            self.running.remove(seq)
            self.allocator.free(seq.kv_start, seq.kv_tokens)
            self._free_rows.append(seq.row)
        seq.kv_start = seq.row = -1
