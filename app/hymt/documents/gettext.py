"""Gettext catalogues (.po, .pot) with polib: each untranslated msgid (and msgid_plural) a segment; msgstr filled,
plural forms filled from the plural text, the entry marked fuzzy for review, the Language header set. Placeholders
(%s, %(name)d, %1$s, {name}, {0}) travel as markers; an entry whose placeholders did not survive stays untranslated."""

from __future__ import annotations

import re

import polib

from .base import Extraction, Outcome
from .inline import Item, Void
from .text import decode_utf8

PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?(?:\([\w.]+\))?[-+#0]*(?:\d+|\*)?(?:\.\d+)?[hlLqjzt]*[diouxXeEfFgGcrsaApn%]"
    r"|\{\{|\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"
)


def placeholders_as_voids(text: str) -> list[Item]:
    items: list[Item] = []
    pos = 0
    for match in PLACEHOLDER.finditer(text):
        if match.start() > pos:
            items.append(text[pos : match.start()])
        items.append(Void(match.group(0)))
        pos = match.end()
    if pos < len(text):
        items.append(text[pos:])
    return items


def joined(items: list[Item]) -> str:
    return "".join(i if isinstance(i, str) else str(i.payload) for i in items)


def read(data: bytes, target: str) -> Extraction[bytes]:
    po = polib.pofile(decode_utf8(data, ".po"))
    entries = [e for e in po if not e.obsolete and not e.translated() and not e.fuzzy]
    segments: list[list[Item]] = []
    for entry in entries:
        segments.append(placeholders_as_voids(entry.msgid))
        if entry.msgid_plural:
            segments.append(placeholders_as_voids(entry.msgid_plural))

    def write(outcomes: list[Outcome]) -> bytes:
        it = iter(outcomes)
        for entry in entries:
            results = [next(it)] + ([next(it)] if entry.msgid_plural else [])
            if any(r.fell_back for r in results):
                continue  # a translation without its placeholders would break the program: left to a person
            texts = [joined(r.items) for r in results]
            if entry.msgid_plural:
                forms = sorted(entry.msgstr_plural) or [0, 1]
                entry.msgstr_plural = {k: texts[0] if k == 0 else texts[1] for k in forms}
            else:
                entry.msgstr = texts[0]
            if "fuzzy" not in entry.flags:
                entry.flags.append("fuzzy")  # machine translation: for a translator to review
        po.metadata["Language"] = target
        return str(po).encode("utf-8")

    return Extraction(segments, write)
