"""Which queued segments run together: FIFO, one adapter and one decoding setting per batch, within a padded token
budget. Pure bookkeeping (no torch), so it is tested without a model; the engine holds the lock around it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Hashable

from ..errors import Overloaded


@dataclass(eq=False)
class Work:
    """One segment to translate."""

    job_id: int
    index: int  # position of the segment in its job
    prompt_ids: list[int]
    max_new_tokens: int
    group: Hashable  # (adapter, sampling): batches never mix groups
    min_new_tokens: int = 0
    payload: object = field(default=None, repr=False)


def padded_cost(works: list[Work]) -> int:
    """Tokens a batch occupies once left-padded to its longest prompt and run to its longest output budget."""
    if not works:
        return 0
    longest_prompt = max(len(w.prompt_ids) for w in works)
    longest_output = max(w.max_new_tokens for w in works)
    return len(works) * (longest_prompt + longest_output)


class Scheduler:
    def __init__(self, batch_tokens: int, max_batch_size: int, max_queue: int):
        self.batch_tokens = batch_tokens
        self.max_batch_size = max_batch_size
        self.max_queue = max_queue
        self.waiting: deque[Work] = deque()

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def add(self, works: list[Work]) -> None:
        """Queue all of a job's segments, or none: a job that does not fit is refused whole."""
        if len(self.waiting) + len(works) > self.max_queue:
            raise Overloaded(f"the queue is full ({len(self.waiting)} of {self.max_queue} segments waiting); "
                             "try again shortly")
        self.waiting.extend(works)

    def cancel(self, job_id: int) -> int:
        before = len(self.waiting)
        self.waiting = deque(w for w in self.waiting if w.job_id != job_id)
        return before - len(self.waiting)

    def next_batch(self) -> list[Work]:
        """The oldest segment and every later one of its group that keeps the padded batch within budget."""
        if not self.waiting:
            return []
        first = self.waiting[0]
        batch = [first]
        for work in list(self.waiting)[1:]:
            if len(batch) >= self.max_batch_size:
                break
            if work.group == first.group and padded_cost(batch + [work]) <= self.batch_tokens:
                batch.append(work)
        taken = {id(w) for w in batch}
        self.waiting = deque(w for w in self.waiting if id(w) not in taken)
        return batch
