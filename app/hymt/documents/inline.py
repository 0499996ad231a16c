"""Inline markup as numbered markers the model keeps, and back.

A segment is a list of items: text, a Tag (markup around words: bold, a link, a run's formatting) or a Void (markup
with no words of its own to translate: a line break, an image, a code span, a placeholder). Each format turns its
inline markup into items and carries what it needs to rebuild it as the item's payload. `encode` writes the segment
as text with markers, `<s1>Save</s1>` and `<s2/>`, numbered in order; `restore` reads a translation back into items
with the same payloads. When the translation lost, invented, repeated or crossed a marker, `fallback` gives the
safe form: the words without markers, in the segment's own formatting, with every Void kept after them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..prompts import MARKER


@dataclass(eq=False)
class Tag:
    payload: Any  # the format's own element (an lxml element, a run, a markdown token)
    children: list[Item] = field(default_factory=list)


@dataclass(eq=False)
class Void:
    payload: Any


Item = str | Tag | Void


def plain(items: list[Item]) -> str:
    """The words of a segment, markup left out."""
    return "".join(i if isinstance(i, str) else plain(i.children) if isinstance(i, Tag) else "" for i in items)


def has_markup(items: list[Item]) -> bool:
    return any(not isinstance(i, str) for i in items)


def encode(items: list[Item]) -> tuple[str, dict[int, Tag | Void]] | None:
    """The segment as marked text, and the marker numbers' items. None when the text itself contains something
    that reads as a marker: then markers could not be told apart, and the segment goes without them."""
    table: dict[int, Tag | Void] = {}
    out: list[str] = []

    def walk(seq: list[Item]) -> bool:
        for item in seq:
            if isinstance(item, str):
                if MARKER.search(item):
                    return False
                out.append(item)
                continue
            n = len(table) + 1
            table[n] = item
            if isinstance(item, Void):
                out.append(f"<s{n}/>")
            else:
                out.append(f"<s{n}>")
                if not walk(item.children):
                    return False
                out.append(f"</s{n}>")
        return True

    return ("".join(out), table) if walk(items) else None


def table_of(text: str) -> dict[int, Tag | Void]:
    """The marker table of a marked text (payloads unknown): enough to tell whether a translation kept its markers."""
    return {int(m.group(2)): Void(None) if m.group(3) else Tag(None) for m in MARKER.finditer(text) if not m.group(1)}


def kept(text: str, translation: str) -> bool:
    """Whether the translation of a marked text has every one of its markers, as `restore` needs them."""
    return restore(translation, table_of(text)) is not None


def restore(translation: str, table: dict[int, Tag | Void]) -> list[Item] | None:
    """The translation as items, each marker replaced by its original markup; None unless every marker came back
    exactly once, well nested, and of its own kind (paired or void)."""
    root: list[Item] = []
    stack: list[tuple[int, Tag, list[Item]]] = []
    seen: set[int] = set()
    pos = 0
    for match in MARKER.finditer(translation):
        closing, n, void = match.group(1) == "/", int(match.group(2)), match.group(3) == "/"
        current = stack[-1][2] if stack else root
        if match.start() > pos:
            current.append(translation[pos : match.start()])
        pos = match.end()
        item = table.get(n)
        if item is None or (closing and void):
            return None
        if isinstance(item, Void):
            if not void or closing or n in seen:
                return None
            seen.add(n)
            current.append(Void(item.payload))
        elif closing:
            if not stack or stack[-1][0] != n:
                return None
            _, tag, _ = stack.pop()
            (stack[-1][2] if stack else root).append(tag)
        else:
            if void or n in seen:
                return None
            seen.add(n)
            tag = Tag(item.payload)
            stack.append((n, tag, tag.children))
    if stack or seen != set(table):
        return None
    if pos < len(translation):
        root.append(translation[pos:])
    return root


def fallback(translation: str, items: list[Item], lead: str = "", trail: str = "") -> list[Item]:
    """The safe form of a segment whose markers did not survive: the translated words in the segment's own
    formatting (between `lead` and `trail`, its own spaces), then every Void of the source (images, breaks,
    placeholders) so that nothing is lost."""
    return [lead + re.sub(r"\s{2,}", " ", MARKER.sub(" ", translation)).strip() + trail] + voids(items)


def voids(items: list[Item]) -> list[Item]:
    found: list[Item] = []
    for item in items:
        if isinstance(item, Void):
            found.append(Void(item.payload))
        elif isinstance(item, Tag):
            found.extend(voids(item.children))
    return found


def merge_text(items: list[Item]) -> list[Item]:
    """Neighbouring text items joined and empty ones dropped, so equal segments have equal items."""
    out: list[Item] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += item
                continue
        out.append(item)
    return out
