"""A document's texts through the engine, in parts that fit its queue: a long document is not refused because it
is longer than the queue, and other requests keep their turn between its parts. Blocking: the CLI calls it
directly, the API from a worker thread.

A text whose inline markers did not come back is sent again with the stricter prompt (prompts.strict); if they are
lost again, its runs are translated apart: the words between each pair of markers as a text of its own, put back
between the same markers, so that bold, italics and links stay on their words. Only when no run came back
translated does the first translation stay, for the safe form (base.finish). Progress counts texts settled, so it
reaches the total when the last retry is done.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from ..engine.jobs import Options
from ..errors import Cancelled, Overloaded
from ..languages import Language
from ..prompts import MARKER, Sampling, has_markers, strict
from .base import clean
from .inline import kept

# How long a one-segment part may wait for room in a full queue before the document fails with the queue's error.
MAX_QUEUE_WAIT_S = 120.0
_RETRY_S = 0.5


@dataclass
class Translated:
    texts: list[str]
    paths: list[str | None]  # per text: "markers", "strict" or "runs" (base.PATHS); None: no markers, or lost


def translate_texts(engine, texts: list[str], source: Language | None, target: Language, sampling: Sampling,
                    on_progress: Callable[[int, int], None] | None = None,
                    stop: threading.Event | None = None) -> list[str]:
    return translate_document(engine, texts, source, target, sampling, on_progress, stop).texts


def translate_document(engine, texts: list[str], source: Language | None, target: Language, sampling: Sampling,
                       on_progress: Callable[[int, int], None] | None = None,
                       stop: threading.Event | None = None) -> Translated:
    stop = stop or threading.Event()
    settled = [0]

    def reach(count: int) -> None:  # progress never goes back
        if count > settled[0]:
            settled[0] = count
            if on_progress is not None:
                on_progress(count, len(texts))

    def first_done(i: int, translation: str) -> None:
        if not has_markers(texts[i]) or kept(texts[i], clean(translation)):
            reach(settled[0] + 1)

    out = _through_engine(engine, texts, source, target, sampling, stop, first_done)
    paths: list[str | None] = ["markers" if has_markers(t) else None for t in texts]
    lost = [i for i, t in enumerate(texts) if has_markers(t) and not kept(t, clean(out[i]))]
    reach(len(texts) - len(lost))
    if lost:
        def strict_done(k: int, translation: str) -> None:
            if kept(texts[lost[k]], clean(translation)):
                reach(settled[0] + 1)

        again = _through_engine(engine, [strict(texts[i]) for i in lost], source, target, sampling, stop,
                                strict_done)
        for i, translation in zip(lost, again):
            paths[i] = "strict" if kept(texts[i], clean(translation)) else None
            if paths[i]:
                out[i] = translation
        lost = [i for i in lost if paths[i] is None]
        reach(len(texts) - len(lost))
    if lost:
        for i, translation in zip(lost, _by_runs(engine, [texts[i] for i in lost], source, target, sampling, stop)):
            if translation is not None:
                out[i], paths[i] = translation, "runs"
    reach(len(texts))
    return Translated(out, paths)


def _by_runs(engine, texts: list[str], source, target, sampling, stop) -> list[str | None]:
    """Each marked text with the words between its markers translated apart and put back between them; None for a
    text none of whose runs came back translated."""
    split = [_runs(t) for t in texts]
    wanted = [(n, k) for n, pieces in enumerate(split) for k in range(0, len(pieces), 2)
              if any(ch.isalpha() for ch in pieces[k])]
    results = _through_engine(engine, [split[n][k].strip() for n, k in wanted], source, target, sampling, stop)
    translated: Counter = Counter()
    for (n, k), result in zip(wanted, results):
        words = MARKER.sub("", clean(result)).strip()  # a marker the model made up inside a run means nothing
        if words:
            piece = split[n][k]
            split[n][k] = piece[:len(piece) - len(piece.lstrip())] + words + piece[len(piece.rstrip()):]
            translated[n] += 1
    return ["".join(pieces) if translated[n] else None for n, pieces in enumerate(split)]


def _runs(text: str) -> list[str]:
    """The text split at its markers: words, marker, words, ..., words (the words may be empty)."""
    pieces, pos = [], 0
    for match in MARKER.finditer(text):
        pieces += [text[pos:match.start()], match.group(0)]
        pos = match.end()
    return pieces + [text[pos:]]


def _through_engine(engine, texts: list[str], source: Language | None, target: Language, sampling: Sampling,
                    stop: threading.Event, on_text: Callable[[int, str], None] | None = None) -> list[str]:
    """The texts' translations, queued in parts that fit; on_text(index, translation) as each text is done."""
    results: list[str] = []
    part_size = max(1, engine.settings.max_queue_segments // 4)
    waited = 0.0
    while len(results) < len(texts):
        if stop.is_set():
            raise Cancelled("the request was cancelled")
        base = len(results)
        part = texts[base:base + part_size]
        seen: Counter = Counter()

        def listener(event, seen=seen, base=base) -> None:
            if event.kind != "segment" or on_text is None:
                return
            job, d = event.job, event.job.refs[event.index][0]
            seen[d] += 1
            if seen[d] == len(job.documents[d].segments):
                parts = [r.text if r else "" for (doc, _), r in zip(job.refs, job.results) if doc == d]
                on_text(base + d, job.documents[d].join(parts))

        try:
            job = engine.submit([(t, source) for t in part], target, sampling, listener=listener,
                                options=Options(formatted=True))
        except Overloaded:
            if part_size > 1:
                part_size = max(1, part_size // 2)
            elif waited >= MAX_QUEUE_WAIT_S:
                raise
            else:
                stop.wait(_RETRY_S)
                waited += _RETRY_S
            continue
        while not job.done.wait(_RETRY_S):
            if stop.is_set():
                engine.cancel(job)
        if job.error is not None:
            raise job.error
        results.extend(job.texts())
    return results
