"""Admission by expected wait, for interactive work: a request is taken only if its segments can be expected to
start within `max_wait_s`; otherwise it is refused at once, with the wait it would have had, so its client can come
back later (or go elsewhere) instead of timing out in a queue. Batch work (documents, long texts) waits behind
interactive work and is bounded by the room in its own queue instead (the engine's), so it never counts here.

While interactive segments wait, the engine is at capacity and they start in turn: the last of the segments ahead
starts once about their tokens have been generated. So the expected wait is the output tokens owed to the
interactive segments waiting (each its budget, scaled by the share of their budgets finished segments actually
used), plus the request's own segments that do not fit in the free rows, over the throughput interactive work gets:
the engine's, less the minimum share batch work keeps while it has work. The throughput is measured from the
engine's totals over stretches during which segments were waiting (the rate a newcomer's wait depends on), seeded
with the warm-up's figure until the first measurement.

Pure arithmetic (no torch, no clock of its own), tested without a model. The engine thread feeds it its totals; the
threads that add requests read the verdict (plain numbers, under the engine's inbox lock).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Seconds of saturated stepping per throughput measurement, and the weight of each new one in the average.
WINDOW_S = 0.5
SMOOTHING = 0.3


@dataclass(frozen=True)
class Verdict:
    admitted: bool
    expected_wait_s: float
    retry_after_s: int  # when the wait is expected to be back within the limit (refusals)


class Admission:
    def __init__(self, max_wait_s: float, initial_tokens_per_s: float):
        self.max_wait_s = max_wait_s
        self.tokens_per_s = max(initial_tokens_per_s, 1e-3)
        self.measured = False  # whether tokens_per_s is still the warm-up's seed
        self.budget_used = 1.0  # share of its output budget a finished segment used, on average
        self.admitted = 0  # requests, counted by the engine (a full queue refuses too)
        self.refused = 0
        self.expected_wait_s = 0.0  # of the latest request, admitted or not
        self._window_tokens = 0
        self._window_s = 0.0
        self._last: tuple[int, float, bool] | None = None

    def observe(self, tokens_out_total: int, busy_s_total: float, saturated: bool) -> None:
        """The engine's running totals (tokens generated, seconds spent in steps), read at each submit. The
        stretch since the previous reading counts only if segments were waiting at both ends: saturated."""
        previous, self._last = self._last, (tokens_out_total, busy_s_total, saturated)
        if previous is None or not (saturated and previous[2]):
            return
        self._window_tokens += tokens_out_total - previous[0]
        self._window_s += busy_s_total - previous[1]
        if self._window_s < WINDOW_S:
            return
        rate = self._window_tokens / self._window_s
        # The first measurement replaces the seed outright: the warm-up's figure is only a guess at this load.
        self.tokens_per_s = rate if not self.measured else (1 - SMOOTHING) * self.tokens_per_s + SMOOTHING * rate
        self.tokens_per_s = max(self.tokens_per_s, 1e-3)
        self.measured = True
        self._window_tokens, self._window_s = 0, 0.0

    def observe_finished(self, budget_tokens: int, used_tokens: int) -> None:
        """A segment ended having generated `used_tokens` of its `budget_tokens`."""
        if budget_tokens > 0:
            share = min(1.0, used_tokens / budget_tokens)
            self.budget_used = 0.95 * self.budget_used + 0.05 * share

    def decide(self, waiting_tokens: int, own_budgets: list[int], free_rows: int, share: float = 1.0) -> Verdict:
        """Whether an interactive request whose segments have output budgets `own_budgets` may join the interactive
        segments waiting (`waiting_tokens` owed to them), with `free_rows` rows free in the running batch and
        `share` of the throughput its class gets."""
        if not waiting_tokens:
            # Nothing waits: its first segments start at once, the rest behind its own (the rows are its).
            ahead = sum(own_budgets[free_rows:-1])
        else:
            ahead = waiting_tokens + sum(own_budgets[:-1])
        wait = ahead * self.budget_used / (self.tokens_per_s * share)
        self.expected_wait_s = wait
        # A request alone is admitted whatever its size: refusing it would not let anything else run sooner.
        if not waiting_tokens or wait <= self.max_wait_s:
            return Verdict(True, wait, 0)
        return Verdict(False, wait, max(1, math.ceil(wait - self.max_wait_s)))
