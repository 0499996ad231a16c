"""The engine's door for other threads: requests added (after the checks that refuse them at once) and aborts, kept
in order under a small lock until the engine thread takes them all at the start of its next step. Nothing outside
the engine thread touches the scheduler; what admission reads of it are plain counters (engine/fair.py).

An interactive request is refused (Overloaded, with Retry-After) when the interactive work ahead of it would keep it
waiting past HYMT_MAX_QUEUE_WAIT_S (engine/admission.py); either class when its own queue is full; and a segment
longer than the whole cache (PayloadTooLarge). Batch work is never held up by interactive load here: its queue's
room alone decides.
"""

from __future__ import annotations

import threading

from ..errors import NotReady, Overloaded, PayloadTooLarge
from ..settings import Settings
from .admission import Admission
from .requests import Priority, Request
from .scheduler import Scheduler
from .sequence import Sequence

Posted = tuple[str, object]  # ("add", [Sequence]) or ("abort", {id})


class Inbox:
    def __init__(self, settings: Settings, scheduler: Scheduler, admission: Admission):
        self.settings, self.scheduler, self.admission = settings, scheduler, admission
        self._cond = threading.Condition()
        self._posted: list[Posted] = []
        self._counts = {p: [0, 0] for p in Priority}  # segments and output tokens posted, not yet taken, by class
        self.stopping = False

    def add(self, requests: list[Request]) -> None:
        """Post requests of one class, all or none, or refuse them at once."""
        longest = max(r.kv_tokens for r in requests)
        if longest > self.scheduler.max_segment_tokens:
            raise PayloadTooLarge(
                f"a segment needs {longest} KV tokens (its prompt and output budget); the cache holds "
                f"{self.scheduler.max_segment_tokens}: split it or ask for fewer new tokens"
            )
        priority = requests[0].priority
        interactive = priority is Priority.INTERACTIVE
        with self._cond:
            if self.stopping:
                raise NotReady("the server is stopping")
            queued = self.scheduler.waiting.segments[priority] + self._counts[priority][0]
            limit = self.settings.max_queue_segments if interactive else self.settings.max_batch_queue_segments
            if queued + len(requests) > limit:
                self.admission.refused += 1
                raise Overloaded(
                    f"the {priority.value} queue is full ({queued} of {limit} segments waiting); try again shortly"
                )
            if interactive:
                self._admit([r.max_new_tokens for r in requests])
            self.admission.admitted += 1
            self._posted.append(("add", [Sequence(r) for r in requests]))
            self._counts[priority][0] += len(requests)
            self._counts[priority][1] += sum(r.max_new_tokens for r in requests)
            self._cond.notify()

    def abort(self, ids: list[int]) -> None:
        with self._cond:
            self._posted.append(("abort", set(ids)))
            self._cond.notify()

    def take(self) -> list[Posted]:
        """Everything posted so far, in order (the engine thread's)."""
        with self._cond:
            posted, self._posted = self._posted, []
            for counts in self._counts.values():
                counts[:] = [0, 0]
        return posted

    def wait(self) -> None:
        """Until something is posted or the engine stops (the engine thread's, when it has nothing to do)."""
        with self._cond:
            while not self._posted and not self.stopping:
                self._cond.wait()

    def stop(self) -> None:
        with self._cond:
            self.stopping = True
            self._cond.notify_all()

    def _admit(self, budgets: list[int]) -> None:
        """An interactive request's expected wait behind the interactive work ahead, within the limit; under the
        lock, so the posted-but-not-taken work counts too."""
        scheduler = self.scheduler
        waiting = scheduler.waiting
        ahead = waiting.owed_tokens[Priority.INTERACTIVE] + self._counts[Priority.INTERACTIVE][1]
        batch_busy = waiting.segments[Priority.BATCH] or scheduler.rows_held[Priority.BATCH]
        verdict = self.admission.decide(
            ahead,
            budgets,
            scheduler.max_in_flight - len(scheduler.running),
            1 - self.settings.batch_min_share if batch_busy else 1.0,
        )
        if not verdict.admitted:
            self.admission.refused += 1
            raise Overloaded(
                f"the server is busy: this request would wait about {verdict.expected_wait_s:.0f} s to start (the "
                f"limit is {self.settings.max_queue_wait_s:g} s); try again in {verdict.retry_after_s} s",
                verdict.retry_after_s,
            )
