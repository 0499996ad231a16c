"""What a translation request becomes, without torch: a Job (one request's texts, split into segments, each sent to
the token engine as a Request), the Events its listener hears, and the per-request Options. The API, the CLI and
the documents read these; the translator builds and runs them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .. import cleanup, segment
from ..engine.requests import Priority, Request
from ..errors import Cancelled, HymtError
from ..glossary import Term
from ..languages import Language


class Canceller(Protocol):
    """What a job needs of the translator it runs on (translator.Translator): a way to cancel it."""

    def cancel(self, job: Job) -> None: ...


@dataclass
class Event:
    kind: str  # "token" (streaming jobs only), "segment", "done" or "error"
    job: Job
    index: int = -1
    num_done: int = 0  # segments finished when the event was sent
    error: HymtError | None = None


@dataclass(frozen=True)
class Options:
    """Per-request translation options beside the languages and decoding settings."""

    glossary: tuple[Term, ...] = ()  # the request's own entries; the server's glossaries are added after them
    context: bool = True  # the preceding segments as context, where the model has a context prompt
    max_segment_tokens: int | None = None  # shorter segments than the setting's (quality best: fusion prompts fit)
    formatted: bool = False  # the texts carry inline markup markers (documents) that the translation must keep
    style: str | None = None  # the translation's style, for a model with an official style prompt (Hy-MT2)
    background: str | None = None  # background information, for a model with an official prompt for it
    preceding: str | None = None  # text before the texts, the client's (DeepL's context): context, not translated

    def to_json(self) -> str:
        """The options a stored document job keeps (the glossary, context, style, background), as JSON text."""
        return json.dumps(
            {
                "glossary": [t.to_json() for t in self.glossary],
                "context": self.context,
                "style": self.style,
                "background": self.background,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> Options:
        data = json.loads(text)
        return cls(
            # Checked when the job was accepted; a stored glossary's entries may be more than a request's own.
            glossary=tuple(Term(t["source"], t["target"]) for t in data["glossary"]),
            context=data["context"],
            style=data["style"],
            background=data["background"],
        )


@dataclass(eq=False)
class Job:
    id: int
    target: Language
    documents: list[segment.Document]
    refs: list[tuple[int, int]]  # segment number -> (document, segment within it)
    listener: Callable[[Event], None] | None = None
    stream: bool = False  # whether the listener hears every token
    priority: Priority = Priority.INTERACTIVE
    client: str = ""  # who asked: its turn in the engine's fair order
    requests: list[Request] = field(default_factory=list)  # per segment, as sent to the engine (the latest, retried)
    tokens: list[list[int]] = field(default_factory=list)  # per segment: what the engine generated so far
    results: list[cleanup.Cleaned | None] = field(default_factory=list)
    sources: list[Language | None] = field(default_factory=list)  # per segment
    terms: list[list[Term]] = field(default_factory=list)  # per segment: the glossary entries occurring in it
    misses: dict[int, list[Term]] = field(default_factory=dict)  # segment -> entries its translation lacks
    retried: set[int] = field(default_factory=set)  # segments translated again after a missed term
    retry_terms: bool = True
    unfused: set[int] = field(default_factory=set)  # quality best: segments whose fusion prompt did not fit
    error: HymtError | None = None
    ended: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    translator: Canceller | None = field(default=None, repr=False)  # the one it runs on: the one to cancel it
    partials: dict[int, IncrementalText] = field(default_factory=dict, repr=False)  # streamed segments' text
    _by_document: dict[int, list[int]] = field(default_factory=dict, repr=False)  # document -> its segments

    @property
    def num_segments(self) -> int:
        return len(self.refs)

    @property
    def num_done(self) -> int:
        return sum(r is not None for r in self.results)

    @property
    def cancelled(self) -> bool:
        return isinstance(self.error, Cancelled)

    @property
    def tokens_out(self) -> int:
        return sum(len(t) for t in self.tokens)

    def source_text(self, n: int) -> str:
        d, s = self.refs[n]
        return self.documents[d].segments[s]

    def result(self, n: int) -> cleanup.Cleaned:
        """Segment n's translation, which a segment has once it is finished."""
        result = self.results[n]
        if result is None:
            raise ValueError(f"segment {n} of job {self.id} is not translated yet")
        return result

    def texts(self) -> list[str]:
        """The translated documents, each put back together around its segments (complete jobs only)."""
        per_doc: list[list[str]] = [[""] * len(d.segments) for d in self.documents]
        for (d, s), result in zip(self.refs, self.results):
            per_doc[d][s] = result.text if result else ""
        return [doc.join(parts) for doc, parts in zip(self.documents, per_doc)]

    def document_text(self, d: int) -> str | None:
        """Document d put back together around its translated segments, once each is translated (None before):
        for a caller told of each segment, what one segment's news costs is that document's, not the job's."""
        if not self._by_document:
            for n, (doc, _) in enumerate(self.refs):
                self._by_document.setdefault(doc, []).append(n)
        results = [self.results[n] for n in self._by_document.get(d, [])]
        if any(r is None for r in results):
            return None
        return self.documents[d].join([r.text for r in results if r is not None])

    def settled_texts(self, decode: Callable[[list[int]], str] | None = None) -> list[str]:
        """Each document translated up to its first unfinished segment: what a stream can show so far. With
        `decode`, that segment's text generated so far is shown too, unless glossary terms apply to it (a missed
        term has it translated again, and a stream cannot take back what it showed)."""
        per_doc: list[list[str | None]] = [[None] * len(d.segments) for d in self.documents]
        open_docs: set[int] = set()
        for n, ((d, s), result) in enumerate(zip(self.refs, self.results)):
            if d in open_docs:
                continue
            if result is not None:
                per_doc[d][s] = result.text
                continue
            open_docs.add(d)
            if decode is not None and not (self.retry_terms and self.terms and self.terms[n]):
                text = self.partials.setdefault(n, IncrementalText()).update(list(self.tokens[n]), decode)
                per_doc[d][s] = cleanup.partial(text)
        return [doc.join_prefix(parts) for doc, parts in zip(self.documents, per_doc)]

    def flags(self) -> dict:
        finished = [r for r in self.results if r is not None]
        flags = {"echo_segments": sum(r.echo for r in finished), "loop_cut_segments": sum(r.loop_cut for r in finished)}
        if self.unfused:
            flags["unfused_segments"] = len(self.unfused)
        return flags

    def glossary_report(self) -> dict | None:
        """Per segment, the glossary entries its translation lacks (after the retry); None when no entry applied."""
        applied = sum(len(t) for t in self.terms)
        if not applied:
            return None
        misses = [
            {
                "document": self.refs[n][0],
                "segment": self.refs[n][1],
                "retried": n in self.retried,
                "missing": [t.to_json() for t in terms],
            }
            for n, terms in sorted(self.misses.items())
        ]
        return {"terms_applied": applied, "segments_with_terms": sum(bool(t) for t in self.terms), "misses": misses}

    def wait(self, timeout: float | None = None) -> list[str]:
        if not self.done.wait(timeout):
            raise TimeoutError(f"job {self.id} not done after {timeout} s")
        if self.error is not None:
            raise self.error
        return self.texts()


class IncrementalText:
    """A segment's text as its tokens arrive: each update decodes the last few tokens, not the whole output again.
    Text is taken only once it no longer ends in a partial character (a byte-level token can split one)."""

    def __init__(self):
        self._reset()

    def _reset(self) -> None:
        self.text = ""
        self._prefix = 0  # the tokens before this one are in `text`, and decoded alone they end cleanly
        self._read = 0

    def update(self, token_ids: list[int], decode: Callable[[list[int]], str]) -> str:
        if len(token_ids) < self._read:  # the segment was translated again (a missed glossary term)
            self._reset()
        before = decode(token_ids[self._prefix : self._read])
        now = decode(token_ids[self._prefix :])
        if len(now) > len(before) and not now.endswith("\ufffd"):
            self.text += now[len(before) :]
            self._prefix, self._read = self._read, len(token_ids)
        return self.text
