"""The translation layer's one face: texts in, translations out, on a token engine below it.

`submit` segments texts into a Job (translation/prompting.py builds each segment's prompt and its engine Request),
sends the requests to the engine and returns at once; the text worker (translation/text.py) gathers the engine's
outputs into each segment's translation, checks glossary terms, and tells the job's listener as it goes. `cancel`
ends a job and aborts what the engine still holds of it. The API, the CLI and the document pipeline touch nothing
below this module: the model, tokenizer, decisions and figures they show come through it. `start` loads the model
(engine/startup.py) and puts a translator on it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..engine.engine import Engine
from ..engine.requests import Priority, Request, Snapshot
from ..engine.sampling_params import Sampling
from ..engine.startup import start as start_engine
from ..errors import Cancelled, HymtError
from ..glossary import Glossaries
from ..languages import Language
from ..planner.decision import Decision
from ..settings import Settings
from .jobs import Event, Job, Options
from .prompting import Prompter
from .text import TextWorker, emit

log = logging.getLogger("hymt.translation")


def start(settings: Settings, decision: Decision, on_phase: Callable[[str], None] | None = None) -> Translator:
    """Load the decided profile (proving it at start, stepping down where it does not fit) and a translator on it,
    with the server's glossaries."""
    glossaries = Glossaries(settings.glossaries) if settings.glossaries else None
    return Translator(settings, start_engine(settings, decision, on_phase), glossaries)


class Translator:
    def __init__(self, settings: Settings, engine: Engine, glossaries: Glossaries | None = None):
        self.settings, self.engine, self.glossaries = settings, engine, glossaries
        self.identified = engine.identified
        self.family = self.identified.family
        self.decision, self.startup, self.attention = engine.decision, engine.startup, engine.attention
        self.max_seq_tokens = engine.max_seq_tokens
        self.tokenizer = engine.tokenizer
        self.prompter = Prompter(
            settings, self.family, self.tokenizer, self.encode, engine.max_seq_tokens, engine.adapters, glossaries
        )
        self._lock = threading.Lock()
        self._segments: dict[int, tuple[Job, int]] = {}  # request id -> (job, segment), while the job runs
        self.text = TextWorker(self, engine.outputs)

    # -- for the API, the CLI and the documents ---------------------------------------------------------------
    def submit(
        self,
        items: list[tuple[str, Language | None]],
        target: Language,
        sampling: Sampling,
        listener: Callable[[Event], None] | None = None,
        min_new_tokens: int = 0,
        stream: bool = False,
        options: Options = Options(),
        priority: Priority = Priority.INTERACTIVE,
        client: str = "",
    ) -> Job:
        """Segment and send texts (each with its source language, None if unknown; see Prompter.job). Raises
        Overloaded at once when the engine cannot take all of them."""
        job = self.prompter.job(items, target, sampling, listener, min_new_tokens, stream, options, priority, client)
        return self._send(job)

    def submit_fusion(
        self, candidates: list[Job], sampling: Sampling, listener: Callable[[Event], None] | None = None
    ) -> Job:
        """Fuse candidate translations segment by segment (see Prompter.fusion_job)."""
        return self._send(self.prompter.fusion_job(candidates, sampling, listener))

    def cancel(self, job: Job) -> None:
        """Stop a job: it ends as cancelled, and the engine drops what it still holds of it."""
        if self.end(job, Cancelled("the request was cancelled")):
            log.info("job %d cancelled", job.id)

    def check_instructions(self, options: Options) -> None:
        self.prompter.check_instructions(options)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def decode(self, token_ids: list[int]) -> str:
        text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence of ids decodes to one string (a list of them, to a list)
        return text

    def snapshot(self) -> Snapshot:
        return self.engine.snapshot()

    @property
    def alive(self) -> bool:
        return self.engine.alive

    def stop(self) -> None:
        """Stop the engine; every job still running ends with an error, heard by its listener."""
        self.engine.stop()
        self.text.join(timeout=30)
        with self._lock:
            jobs = {job for job, _ in self._segments.values()}
        for job in jobs:
            self.end(job, HymtError("the server stopped before this request finished", status=503))

    # -- for the text worker --------------------------------------------------------------------------------
    def segment(self, request_id: int) -> tuple[Job, int] | None:
        return self._segments.get(request_id)

    def end(self, job: Job, error: HymtError | None) -> bool:
        """End a job exactly once: done, failed or cancelled. Its requests leave the engine; its listener hears
        the end before `done` is set, so a waiter that sees `done` has every event already queued."""
        with self._lock:
            if job.ended:
                return False
            job.ended = True
            job.error = error
            ids = [r.id for r in job.requests if self._segments.pop(r.id, None) is not None]
        if error is not None and ids:
            self.engine.abort(ids)
        emit(job, Event("error", job, error=error) if error else Event("done", job))
        job.done.set()
        return True

    def resend(self, job: Job, n: int, request: Request) -> None:
        """Segment n of a running job, sent again as `request` (the glossary retry)."""
        self.engine.add([request])  # the text worker calls this, so no output of it is read before the swap
        with self._lock:
            if not job.ended:
                self._segments.pop(job.requests[n].id, None)
                self._segments[request.id] = (job, n)
                job.requests[n], job.tokens[n] = request, []
                return
        self.engine.abort([request.id])  # the job ended meanwhile

    def _send(self, job: Job) -> Job:
        job.translator = self
        pending = [r for n, r in enumerate(job.requests) if job.results[n] is None]
        if not pending:
            self.end(job, None)
            return job
        with self._lock:
            for n, request in enumerate(job.requests):
                if job.results[n] is None:
                    self._segments[request.id] = (job, n)
        try:
            self.engine.add(pending)
        except BaseException:
            with self._lock:
                for request in pending:
                    self._segments.pop(request.id, None)
            raise
        return job
