"""The text worker: the engine's text work on a thread of its own, so that the engine thread does nothing between
two decoding steps but bookkeeping. It turns a finished segment's tokens into its cleaned translation, checks the
glossary terms (queuing the segment once more with a stricter prompt when one is missed) and delivers every event
to its job's listener, in the order the engine produced them.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Protocol

from .. import cleanup, glossary
from ..errors import BadRequest, HymtError, Overloaded
from .jobs import Event, Job, origin
from .prompting import Prompter
from .scheduler import Sequence

log = logging.getLogger("hymt.engine")


class Finishing(Protocol):
    """What the text worker needs of the engine (engine.Engine): its tokenizer's decoding, its prompts for a
    retry, and the job's ending or its segment's return to the queue."""

    prompter: Prompter

    def decode(self, token_ids: list[int]) -> str: ...

    def end(self, job: Job, error: HymtError | None) -> bool: ...

    def fail(self, job: Job, why: str) -> None: ...

    def requeue(self, seq: Sequence) -> None: ...


class TextWorker:
    def __init__(self, engine: Finishing):
        self.engine = engine
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="hymt-text", daemon=True)
        self._thread.start()

    def event(self, event: Event) -> None:
        self._queue.put((event, None))

    def finished(self, seq: Sequence) -> None:
        self._queue.put((None, seq))

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            event, seq = item
            try:
                if event is not None:
                    event.num_done = event.job.num_done
                    emit(event.job, event)
                else:
                    self._finish(seq)
            except Exception:  # one segment's failure must not stop the worker
                job = (event or Event("", origin(seq).job)).job
                log.exception("finishing text of job %d failed", job.id)
                self.engine.fail(job, "finishing the translation failed")

    def _finish(self, seq: Sequence) -> None:
        source = origin(seq)
        job, source_text = source.job, source.text
        if job.ended:
            return
        cleaned = cleanup.clean(source_text, self.engine.decode(seq.output_ids))
        terms = job.terms[seq.index] if job.terms else []
        missed = glossary.missing(terms, cleaned.text) if terms else []
        if missed and job.retry_terms and seq.index not in job.retried and self._retry(job, seq):
            return
        if missed:
            job.misses[seq.index] = missed
        job.results[seq.index] = cleaned
        emit(job, Event("segment", job, index=seq.index, num_done=job.num_done))
        if job.num_done == job.num_segments:
            self.engine.end(job, None)

    def _retry(self, job: Job, seq: Sequence) -> bool:
        """Queue a segment whose translation missed a glossary term once more, with a prompt that insists on the
        terms. False when it cannot be queued."""
        job.retried.add(seq.index)
        try:
            again = self.engine.prompter.retry(job, seq)
            self.engine.requeue(again)
        except (BadRequest, Overloaded) as exc:
            log.info("job %d segment %d missed a term and cannot be retried: %s", job.id, seq.index, exc.message)
            return False
        job.sequences[seq.index] = again
        return True


def emit(job: Job, event: Event) -> None:
    if job.listener is not None:
        try:
            job.listener(event)
        except Exception:  # a broken listener must not stop the thread that delivers events
            log.exception("listener of job %d failed", job.id)
