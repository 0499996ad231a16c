"""How long segments took inside the engine, by scheduling class, as histograms: from being posted to taking a row
(`queue`), to their first token (`first_token`: the queue, then the prefill steps), between their later tokens
(`token`: the mean gap of one segment's, as long as the steps of the batch it decoded in), and in all (`segment`).
The engine thread observes each segment as it ends; aborted and failed segments are not observed. `/metrics` shows
them (`hymt_segment_seconds`, `hymt_segment_queue_seconds`, ...), and beside the HTTP request's own latency they
tell where a request's time went: waiting for a row, prefill, decoding, or the work around the engine.

Times are the engine thread's `time.monotonic()` at the event: a decoding step's token is seen when that step is
collected, after the next one is launched, as the layer above sees it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .requests import Priority
from .sequence import Sequence

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# A decoding step takes 2 to 20 ms on a GPU, 1 to 100 ms on a CPU.
STEP_SECONDS = (0.001, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25)
PHASES = {"queue": SECONDS, "first_token": SECONDS, "token": STEP_SECONDS, "segment": SECONDS}


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)  # per bound (value <= bound, above the one before), then above
    total: float = 0.0

    def __post_init__(self):
        self.counts = self.counts or [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def copy(self) -> Histogram:
        return Histogram(self.bounds, list(self.counts), self.total)

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus' buckets: (upper bound, observations at or below it), "+Inf" last."""
        running, buckets = 0, []
        for bound, n in zip((*map(str, self.bounds), "+Inf"), self.counts):
            running += n
            buckets.append((bound, running))
        return buckets


class Timings:
    """The histograms by (phase, class); written by the engine thread alone."""

    def __init__(self):
        self.histograms = {(phase, p.value): Histogram(bounds) for phase, bounds in PHASES.items() for p in Priority}

    def observe(self, seq: Sequence, now: float) -> None:
        """A segment that has ended with its tokens at `now`."""
        cls = seq.priority.value
        self.histograms["queue", cls].observe(seq.admitted_at - seq.submitted)
        self.histograms["segment", cls].observe(now - seq.submitted)
        if seq.sampled:
            self.histograms["first_token", cls].observe(seq.first_token_at - seq.submitted)
        if seq.sampled > 1:
            self.histograms["token", cls].observe((now - seq.first_token_at) / (seq.sampled - 1))

    def snapshot(self) -> dict[tuple[str, str], Histogram]:
        return {key: h.copy() for key, h in self.histograms.items()}
