"""Split a document into segments that fit a token budget, and put the translations back exactly in place.

A document becomes a list of pieces: verbatim strings (line breaks, blank lines, indentation, the spaces between
sentences) and segment slots. Segments never cross a line break, so N lines in gives N lines out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sentencex

CountTokens = Callable[[str], int]

_LINE_BREAK = re.compile(r"(\r\n|\n|\r)")
_WORD = re.compile(r"\S+\s*")
# Tibetan marks clause ends with a shad; sentencex does not split on it, so an over-long Tibetan sentence is cut there.
_TIBETAN_CLAUSE = re.compile(r"[^།]+།+\s*|[^།]+$")


@dataclass
class Document:
    pieces: list[str | int]
    segments: list[str]

    def join(self, translations: Sequence[str]) -> str:
        if len(translations) != len(self.segments):
            raise ValueError(f"{len(translations)} translations for {len(self.segments)} segments")
        # A segment sits inside one line, so a line break in its translation would add lines: it becomes a space.
        flat = [_LINE_BREAK.sub(" ", t) for t in translations]
        return "".join(flat[p] if isinstance(p, int) else p for p in self.pieces)

    def join_prefix(self, translations: Sequence[str | None]) -> str:
        """The document up to its first untranslated segment (None), for streaming text as it settles."""
        out = []
        for piece in self.pieces:
            if isinstance(piece, int):
                translation = translations[piece]
                if translation is None:
                    break
                out.append(_LINE_BREAK.sub(" ", translation))
            else:
                out.append(piece)
        return "".join(out)


def split(text: str, count_tokens: CountTokens, max_tokens: int, lang: str = "en") -> Document:
    doc = Document(pieces=[], segments=[])
    for part in _LINE_BREAK.split(text):
        # Line breaks, blank lines and lines without letters (numbers, subtitle timings, rules) stay as they are.
        if not part or _LINE_BREAK.fullmatch(part) or not any(ch.isalpha() for ch in part):
            _add_verbatim(doc, part)
            continue
        core = part.strip()
        start = part.index(core)
        _add_verbatim(doc, part[:start])
        spans = _pack(core, _sentences(core, lang), count_tokens, max_tokens)
        last_end = 0
        for s, e in spans:
            _add_verbatim(doc, core[last_end:s])
            doc.pieces.append(len(doc.segments))
            doc.segments.append(core[s:e])
            last_end = e
        _add_verbatim(doc, core[last_end:] + part[start + len(core) :])
    return doc


def _add_verbatim(doc: Document, text: str) -> None:
    if not text:
        return
    if doc.pieces and isinstance(doc.pieces[-1], str):
        doc.pieces[-1] += text
    else:
        doc.pieces.append(text)


def _sentences(core: str, lang: str) -> list[tuple[int, int]]:
    """Sentence spans of a stripped line, trailing spaces excluded. Falls back to the whole line if the splitter
    does not give back its input exactly."""
    base = lang.split("-")[0] if lang else "en"
    try:
        parts = list(sentencex.segment(base, core))
    except Exception:  # noqa: BLE001 - a splitter failure must not lose the text; the line stays one sentence
        parts = [core]
    if "".join(parts) != core:
        parts = [core]
    return _spans(core, parts)


def _spans(text: str, parts: Sequence[str], offset: int = 0) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for part in parts:
        stripped = part.rstrip()
        if stripped:
            spans.append((offset + pos, offset + pos + len(stripped)))
        pos += len(part)
    return spans


def _pack(core: str, spans: list[tuple[int, int]], count: CountTokens, max_tokens: int) -> list[tuple[int, int]]:
    """Merge neighbouring spans while the merged text fits; cut any span that is too long alone."""
    fitted: list[tuple[int, int]] = []
    for s, e in spans:
        if count(core[s:e]) <= max_tokens:
            fitted.append((s, e))
        else:
            fitted.extend(_cut(core, s, e, count, max_tokens))
    packed: list[tuple[int, int]] = []
    for s, e in fitted:
        if packed and count(core[packed[-1][0] : e]) <= max_tokens:
            packed[-1] = (packed[-1][0], e)
        else:
            packed.append((s, e))
    return packed


def _cut(core: str, s: int, e: int, count: CountTokens, max_tokens: int) -> list[tuple[int, int]]:
    """An over-long sentence: cut at Tibetan clause ends, then between words, then between characters."""
    text = core[s:e]
    for pattern in (_TIBETAN_CLAUSE, _WORD):
        parts = pattern.findall(text)
        if len(parts) > 1 and "".join(parts) == text:
            return _pack(core, _spans(text, parts, offset=s), count, max_tokens)
    spans, start = [], s
    while start < e:
        lo, hi = start + 1, e
        while lo < hi:  # the longest prefix that fits, at least one character
            mid = (lo + hi + 1) // 2
            if count(core[start:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        # Never cut between a letter and its combining marks (Thai vowels, Tibetan subjoined letters, accents).
        while start + 1 < lo < e and unicodedata.category(core[lo])[0] == "M":
            lo -= 1
        spans.append((start, lo))
        start = lo
    return spans
