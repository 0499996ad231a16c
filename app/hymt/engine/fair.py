"""The waiting segments in their fair order: requests, not segments, share the batch.

Waiting segments are kept by class (interactive, batch), then by client (an API key or an address), then by request
(its group), first in, first out within a request. The next segment to take a free row is chosen top down:
- the class: interactive first, except that batch work holds at least `batch_min_share` of the rows whenever it
  has segments waiting, so that documents always advance; and at most `batch_max_share` while interactive work is
  in flight or waiting, since every row in a step lengthens it and a person's sentence gets one token a step (the
  trade of the documents' rate against the sentences' latency: docs/operations.md). Batch work alone takes every
  row, and interactive work alone too (work-conserving);
- the client within the class, then the request within the client: the one served least so far, counted in tokens
  (a segment's prompt and output budget, charged when it takes its row). A client or request whose queue emptied
  starts again at the current turn, with no credit for its idle time (start-time fair queueing: the
  token-weighted form of deficit round robin).
So one client's 17,857 segments take turns with another's one sentence, and two clients' documents advance at equal
rates, however many segments each queued.

Pure bookkeeping (no torch), tested without a model; only the engine thread changes it. Its counters (segments and
output tokens owed, by class) are plain integers that other threads read for admission.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .requests import Priority
from .sequence import Sequence


@dataclass
class _Turns:
    """Keyed queues taking turns by service received; a key's queue that empties is forgotten."""

    queues: dict = field(default_factory=dict)  # key -> deque of items (or, for clients, a _Turns of requests)
    served: dict = field(default_factory=dict)
    turn: float = 0.0  # the served count of the latest key to take a turn: where a newcomer starts

    def least_served(self):
        return min(self.queues, key=self.served.__getitem__)

    def join(self, key, make):
        if key not in self.queues:
            self.queues[key] = make()
            self.served[key] = self.turn
        return self.queues[key]

    def charge(self, key, cost: float) -> None:
        self.turn = self.served[key]
        self.served[key] += cost

    def forget(self, key) -> None:
        del self.queues[key], self.served[key]


class Waiting:
    def __init__(self, batch_min_share: float, batch_max_share: float = 1.0):
        self.batch_min_share, self.batch_max_share = batch_min_share, batch_max_share
        self._classes = {p: _Turns() for p in Priority}
        self.segments = {p: 0 for p in Priority}
        self.owed_tokens = {p: 0 for p in Priority}  # output budgets still to generate, of the segments waiting

    def __len__(self) -> int:
        return sum(self.segments.values())

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Sequence]:
        for turns in self._classes.values():
            for requests in turns.queues.values():
                for queue in requests.queues.values():
                    yield from queue

    def push(self, seq: Sequence, front: bool = False) -> None:
        """Queue a segment at the end of its request's queue (at the head: a preempted segment, resumed first)."""
        requests = self._classes[seq.priority].join(seq.request.client, _Turns)
        queue = requests.join(seq.request.group, deque)
        (queue.appendleft if front else queue.append)(seq)
        self._count(seq, 1)

    def next(self, running: dict[Priority, int], max_rows: int) -> Sequence | None:
        """The segment that takes the next free row, given the rows each class holds (it stays queued until
        `take`)."""
        priority = self._class(running, max_rows) if self else None
        turns = self._classes[priority] if priority is not None else None
        if turns is None or not turns.queues:
            return None
        requests = turns.queues[turns.least_served()]
        return requests.queues[requests.least_served()][0]

    def take(self, seq: Sequence) -> None:
        """`seq`, the segment `next` chose, leaves the queue; its client and request are charged its tokens."""
        turns = self._classes[seq.priority]
        client, group = seq.request.client, seq.request.group
        requests = turns.queues[client]
        queue = requests.queues[group]
        assert queue[0] is seq  # only the head of a request's queue is ever chosen
        queue.popleft()
        turns.charge(client, seq.kv_tokens)
        requests.charge(group, seq.kv_tokens)
        if not queue:
            requests.forget(group)
        if not requests.queues:
            turns.forget(client)
        self._count(seq, -1)

    def remove(self, drop: Callable[[Sequence], bool]) -> list[Sequence]:
        """Drop the waiting segments `drop` picks; returns them."""
        gone: list[Sequence] = []
        for turns in self._classes.values():
            for client, requests in list(turns.queues.items()):
                for group, queue in list(requests.queues.items()):
                    kept = deque(s for s in queue if not drop(s))
                    gone += [s for s in queue if drop(s)]
                    if kept:
                        requests.queues[group] = kept
                    else:
                        requests.forget(group)
                if not requests.queues:
                    turns.forget(client)
        for seq in gone:
            self._count(seq, -1)
        return gone

    def _class(self, running: dict[Priority, int], max_rows: int) -> Priority | None:
        """The class whose segment takes the next free row; None: the row stays free (batch work at its ceiling
        beside interactive work in flight, none waiting)."""
        interactive, batch = (self.segments[p] > 0 for p in (Priority.INTERACTIVE, Priority.BATCH))
        if not interactive:
            held = running[Priority.BATCH]
            if running[Priority.INTERACTIVE] and held >= max(self._floor(max_rows), self._ceiling(max_rows)):
                return None
            return Priority.BATCH
        if batch and running[Priority.BATCH] < self._floor(max_rows):
            return Priority.BATCH
        return Priority.INTERACTIVE

    def _floor(self, max_rows: int) -> int:
        return math.ceil(self.batch_min_share * max_rows)

    def _ceiling(self, max_rows: int) -> int:
        return math.ceil(self.batch_max_share * max_rows)

    def _count(self, seq: Sequence, sign: int) -> None:
        self.segments[seq.priority] += sign
        self.owed_tokens[seq.priority] += sign * seq.owed_tokens
