"""The shape every format shares: a file read into segments of inline items and a writer, the segments sent as
marked text, and the translations put back (markers restored, or the safe form, counted)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..errors import GenerationError
from . import inline
from .inline import Item, Tag, Void

# HY-MT1.5's formatted-translation prompt asks for <target>...</target> around the answer.
_TARGET_WRAPPER = re.compile(r"^\s*<target>|</target>\s*$")
# Characters no XML-based format can hold (C0 controls but tab and line breaks, non-characters, lone surrogates):
# they are dropped from text put into a document, the model's output included, instead of failing the file.
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")

# What a written document is: bytes for a file, str for an HTML fragment (the API's format: html).
Data = TypeVar("Data", bytes, str)
# What a writer applies an outcome to (a paragraph, a cell, a cue...).
Target = TypeVar("Target")


@dataclass
class Outcome:
    """One segment's result handed to the writer: its items, and whether they are the safe form."""

    items: list[Item]
    fell_back: bool = False
    translated: bool = True  # False: kept as it was (no words to translate)

    @property
    def text(self) -> str:
        """The words, for a format whose segments are plain text (a line, a cell, a cue): such a segment has no
        markup, so neither has its translation."""
        return inline.plain(self.items)


@dataclass
class Extraction(Generic[Data]):
    """What a format reader gives: the segments, and how to write the file from their outcomes (same order)."""

    segments: list[list[Item]]
    write: Callable[[list[Outcome]], Data]


@dataclass
class _Sent:
    index: int
    lead: str
    core: str
    trail: str
    table: dict[int, Tag | Void] | None  # marker number -> item; None: sent as plain words


@dataclass
class Prepared(Generic[Data]):
    """The texts to translate (one per segment that has words), and how to read their translations back."""

    extraction: Extraction[Data]
    sent: list[_Sent] = field(default_factory=list)

    @property
    def texts(self) -> list[str]:
        return [s.core for s in self.sent]

    def sample(self) -> str:
        """Enough of the words to detect the document's language: its first segments, markers left out."""
        return inline.MARKER.sub(" ", "\n".join(s.core for s in self.sent[:200]))[:5000]


# How a segment with inline markup came back (documents/translate.py): its markers kept at once, kept when asked
# again with the stricter prompt, or its runs translated apart; else the safe form.
PATHS = ("markers", "strict", "runs")


@dataclass
class Result(Generic[Data]):
    data: Data  # str for an HTML fragment
    segments: int
    markup_fallbacks: int
    paths: Counter[str] = field(default_factory=Counter)  # segments with markup by the path they took (PATHS)

    def report(self) -> dict:
        return {
            "segments": self.segments,
            "markup_fallback_segments": self.markup_fallbacks,
            "markup_segments": {**{path: self.paths[path] for path in PATHS}, "safe_form": self.markup_fallbacks},
        }


def clean(translation: str) -> str:
    """A translation as it goes into a document: HY-MT1.5's <target> wrapper and characters XML cannot hold removed."""
    return NOT_XML.sub("", _TARGET_WRAPPER.sub("", translation))


def prepare(extraction: Extraction[Data]) -> Prepared[Data]:
    prepared = Prepared(extraction)
    for index, items in enumerate(extraction.segments):
        words = inline.plain(items)
        if not any(ch.isalpha() for ch in words):
            continue  # numbers, symbols, markup alone: nothing to translate
        encoded = inline.encode(items)
        text, table = encoded if encoded else (words, None)
        core = text.strip()
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        prepared.sent.append(_Sent(index, lead, core, trail, table or None))
    return prepared


def finish(prepared: Prepared[Data], translations: list[str], paths: list[str | None] | None = None) -> Result[Data]:
    """The translated file. A segment whose markers did not come back is written in its safe form and counted;
    `paths` says how each translation with markers was made (PATHS; "markers" when not given)."""
    segments = prepared.extraction.segments
    if len(translations) != len(prepared.sent):
        raise GenerationError(f"{len(translations)} translations came back for {len(prepared.sent)} segments")
    outcomes = [Outcome(items, translated=False) for items in segments]
    fallbacks, counted = 0, Counter[str]()
    for n, (sent, translation) in enumerate(zip(prepared.sent, translations)):
        translation = clean(translation)
        if not translation.strip():
            continue  # the model gave nothing: the source words stay, so no cue, cell or paragraph goes empty
        text = sent.lead + translation.strip() + sent.trail
        original = segments[sent.index]
        if sent.table is None and not inline.has_markup(original):
            outcomes[sent.index] = Outcome([text])
            continue
        restored = inline.restore(text, sent.table) if sent.table is not None else None
        if restored is None:
            fallbacks += 1
            items = inline.fallback(translation, original, sent.lead, sent.trail)
            outcomes[sent.index] = Outcome(items, fell_back=True)
        else:
            counted[(paths[n] if paths else None) or "markers"] += 1
            outcomes[sent.index] = Outcome(inline.merge_text(restored))
    return Result(prepared.extraction.write(outcomes), len(prepared.sent), fallbacks, counted)


def each_translated(
    targets: Sequence[Target],
    segments: list[list[Item]],
    apply: Callable[[Target, Outcome], None],
    save: Callable[[], Data],
) -> Extraction[Data]:
    """The common writer: each translated segment's outcome applied to its target (same order), then the file saved."""

    def write(outcomes: list[Outcome]) -> Data:
        for target, outcome in zip(targets, outcomes):
            if outcome.translated:
                apply(target, outcome)
        return save()

    return Extraction(segments, write)


def combine(parts: list[Extraction[bytes]], after: Callable[[list[bytes]], bytes]) -> Extraction[bytes]:
    """Several files in one (an EPUB's chapters): their segments in order; `after` gets each part's bytes."""
    segments = [items for part in parts for items in part.segments]

    def write(outcomes: list[Outcome]) -> bytes:
        written: list[bytes] = []
        pos = 0
        for part in parts:
            written.append(part.write(outcomes[pos : pos + len(part.segments)]))
            pos += len(part.segments)
        return after(written)

    return Extraction(segments, write)
