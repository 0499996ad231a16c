"""The text worker: the translation layer's work on a thread of its own, fed by the token engine's outputs, so
that the engine thread does nothing between two decoding steps but bookkeeping. It gathers each segment's tokens,
turns a finished segment's tokens into its cleaned translation, checks the glossary terms (queuing the segment once
more with a stricter prompt when one is missed) and delivers every event to its job's listener, in the order the
engine produced them.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from .. import cleanup, glossary
from ..engine.requests import Output, Request
from ..errors import BadRequest, HymtError, Overloaded
from .jobs import Event, Job
from .prompting import Prompter

log = logging.getLogger("hymt.translation")


class Finishing(Protocol):
    """What the text worker needs of the translator (translator.Translator): the segment a request id stands
    for, its tokenizer's decoding, its prompts for a retry, and the job's ending or its segment's return to the
    engine."""

    prompter: Prompter

    def segment(self, request_id: int) -> tuple[Job, int] | None: ...

    def decode(self, token_ids: list[int]) -> str: ...

    def end(self, job: Job, error: HymtError | None) -> bool: ...

    def resend(self, job: Job, n: int, request: Request) -> None: ...


class TextWorker:
    def __init__(self, translator: Finishing, outputs):
        self.translator = translator
        self._outputs = outputs  # the engine's queue: lists of Outputs, then None
        self._thread = threading.Thread(target=self._run, name="hymt-text", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        while (outputs := self._outputs.get()) is not None:
            for output in outputs:
                found = self.translator.segment(output.id)
                if found is None:  # its job ended (cancelled, failed) before the engine heard of it
                    continue
                job, n = found
                try:
                    self._take(job, n, output)
                except Exception:  # one segment's failure must not stop the worker
                    log.exception("finishing text of job %d failed", job.id)
                    self.translator.end(job, HymtError("finishing the translation failed"))

    def _take(self, job: Job, n: int, output: Output) -> None:
        if output.error is not None:
            self.translator.end(job, output.error)
            return
        job.tokens[n] += output.token_ids
        if not output.finished:
            emit(job, Event("token", job, index=n, num_done=job.num_done))
            return
        cleaned = cleanup.clean(job.source_text(n), self.translator.decode(job.tokens[n]))
        terms = job.terms[n] if job.terms else []
        missed = glossary.missing(terms, cleaned.text) if terms else []
        if missed and job.retry_terms and n not in job.retried and self._retry(job, n):
            return
        if missed:
            job.misses[n] = missed
        job.results[n] = cleaned
        emit(job, Event("segment", job, index=n, num_done=job.num_done))
        if job.num_done == job.num_segments:
            self.translator.end(job, None)

    def _retry(self, job: Job, n: int) -> bool:
        """Send a segment whose translation missed a glossary term once more, with a prompt that insists on the
        terms. False when it cannot be sent."""
        job.retried.add(n)
        try:
            self.translator.resend(job, n, self.translator.prompter.retry(job, n))
        except (BadRequest, Overloaded) as exc:
            log.info("job %d segment %d missed a term and cannot be retried: %s", job.id, n, exc.message)
            return False
        return True


def emit(job: Job, event: Event) -> None:
    if job.listener is not None:
        try:
            job.listener(event)
        except Exception:  # a broken listener must not stop the thread that delivers events
            log.exception("listener of job %d failed", job.id)
