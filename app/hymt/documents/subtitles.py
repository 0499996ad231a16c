"""Subtitles (.srt with srt, .vtt with webvtt-py): each cue's text a segment; numbers, timings, cue settings, notes
and styles untouched. A cue of several lines is translated as one sentence and broken again into as many lines."""

from __future__ import annotations

import io

import srt
import webvtt

from .base import Extraction, Outcome, each_translated
from .text import decode_utf8


def rewrap(text: str, num_lines: int) -> str:
    """The translation broken into the cue's number of lines, at the spaces nearest to equal lengths."""
    words = text.split(" ")
    if num_lines < 2 or len(words) < num_lines:
        return text
    lines, rest = [], words
    for remaining in range(num_lines, 1, -1):
        goal = len(" ".join(rest)) / remaining
        taken, size = 1, len(rest[0])
        while taken < len(rest) - remaining + 1 and abs(size + 1 + len(rest[taken]) - goal) <= abs(size - goal):
            size += 1 + len(rest[taken])
            taken += 1
        lines.append(" ".join(rest[:taken]))
        rest = rest[taken:]
    lines.append(" ".join(rest))
    return "\n".join(lines)


def _segments(texts: list[str]) -> list[list]:
    return [[" ".join(line.strip() for line in t.splitlines())] for t in texts]


def read_srt(data: bytes, target: str) -> Extraction[bytes]:
    cues = list(srt.parse(decode_utf8(data, ".srt")))

    def apply(cue, outcome: Outcome) -> None:
        cue.content = rewrap(outcome.text, len(cue.content.splitlines()))

    return each_translated(
        cues, _segments([c.content for c in cues]), apply, lambda: srt.compose(cues, reindex=False).encode("utf-8")
    )


def read_vtt(data: bytes, target: str) -> Extraction[bytes]:
    vtt = webvtt.from_buffer(io.StringIO(decode_utf8(data, ".vtt")))
    captions = list(vtt.captions)

    def apply(caption, outcome: Outcome) -> None:
        caption.text = rewrap(outcome.text, len(caption.lines))

    return each_translated(captions, _segments([c.text for c in captions]), apply, lambda: vtt.content.encode("utf-8"))
