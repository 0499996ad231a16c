"""A document's texts translated so that their inline markup survives, by whatever translates a list of texts
(`Translate`: the API's job bridge, in the server and in the CLI alike). This module knows markers, not the engine.

A text whose inline markers did not come back is sent again with the stricter prompt (prompts.strict); if they are
lost again, its runs are translated apart: the words between each pair of markers as a text of its own, put back
between the same markers, so that bold, italics and links stay on their words. Only when no run came back
translated does the first translation stay, for the safe form (base.finish). Progress counts texts settled, so it
reaches the total when the last retry is done.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..prompts import MARKER, has_markers, strict
from .base import clean
from .inline import kept

OnText = Callable[[int, str], None]
# The texts' translations, in order; on_text(index, translation) as each one is done, when given.
Translate = Callable[[list[str], OnText | None], Awaitable[list[str]]]


@dataclass
class Translated:
    texts: list[str]
    paths: list[str | None]  # per text: "markers", "strict" or "runs" (base.PATHS); None: no markers, or lost


async def translate_document(
    texts: list[str], translate: Translate, on_progress: Callable[[int, int], None] | None = None
) -> Translated:
    settled = [0]

    def reach(count: int) -> None:  # progress never goes back
        if count > settled[0]:
            settled[0] = count
            if on_progress is not None:
                on_progress(count, len(texts))

    def first_done(i: int, translation: str) -> None:
        if not has_markers(texts[i]) or kept(texts[i], clean(translation)):
            reach(settled[0] + 1)

    out = await translate(texts, first_done)
    paths: list[str | None] = ["markers" if has_markers(t) else None for t in texts]
    lost = [i for i, t in enumerate(texts) if has_markers(t) and not kept(t, clean(out[i]))]
    reach(len(texts) - len(lost))
    if lost:

        def strict_done(k: int, translation: str) -> None:
            if kept(texts[lost[k]], clean(translation)):
                reach(settled[0] + 1)

        again = await translate([strict(texts[i]) for i in lost], strict_done)
        for i, translation in zip(lost, again):
            paths[i] = "strict" if kept(texts[i], clean(translation)) else None
            if paths[i]:
                out[i] = translation
        lost = [i for i in lost if paths[i] is None]
        reach(len(texts) - len(lost))
    if lost:
        for i, by_runs in zip(lost, await _by_runs([texts[i] for i in lost], translate)):
            if by_runs is not None:
                out[i], paths[i] = by_runs, "runs"
    reach(len(texts))
    return Translated(out, paths)


async def _by_runs(texts: list[str], translate: Translate) -> list[str | None]:
    """Each marked text with the words between its markers translated apart and put back between them; None for a
    text none of whose runs came back translated."""
    split = [_runs(t) for t in texts]
    wanted = [
        (n, k)
        for n, pieces in enumerate(split)
        for k in range(0, len(pieces), 2)
        if any(ch.isalpha() for ch in pieces[k])
    ]
    results = await translate([split[n][k].strip() for n, k in wanted], None)
    translated: Counter = Counter()
    for (n, k), result in zip(wanted, results):
        words = MARKER.sub("", clean(result)).strip()  # a marker the model made up inside a run means nothing
        if words:
            piece = split[n][k]
            split[n][k] = piece[: len(piece) - len(piece.lstrip())] + words + piece[len(piece.rstrip()) :]
            translated[n] += 1
    return ["".join(pieces) if translated[n] else None for n, pieces in enumerate(split)]


def _runs(text: str) -> list[str]:
    """The text split at its markers: words, marker, words, ..., words (the words may be empty)."""
    pieces, pos = [], 0
    for match in MARKER.finditer(text):
        pieces += [text[pos : match.start()], match.group(0)]
        pos = match.end()
    return pieces + [text[pos:]]
