"""`format: html`: translate the text between tags and leave the markup (and script, style, code) as it was."""

from __future__ import annotations

import html
import re

_TOKEN = re.compile(r"(<!--.*?-->|<[^>]*>)", re.S)
_RAW = re.compile(r"<(script|style|code|pre)\b", re.I)


def split_html(document: str) -> tuple[list[str], list[int]]:
    """The document's pieces, and the indices of pieces that are translatable text (entities unescaped)."""
    pieces = _TOKEN.split(document)
    translatable, raw_until = [], None
    for i, piece in enumerate(pieces):
        if piece.startswith("<"):
            if raw_until is None:
                match = _RAW.match(piece)
                if match and not piece.endswith("/>"):
                    raw_until = f"</{match.group(1).lower()}"
            elif piece.lower().startswith(raw_until):
                raw_until = None
            continue
        if raw_until is None and piece.strip():
            translatable.append(i)
            pieces[i] = html.unescape(piece)
    return pieces, translatable


def join_html(pieces: list[str], translatable: list[int], translations: list[str]) -> str:
    out = list(pieces)
    for i, text in zip(translatable, translations):
        out[i] = html.escape(text, quote=False)
    return "".join(out)
