"""Markdown (.md) with markdown-it-py: each paragraph, heading, list item and table cell a segment, its emphasis
and links as markers. Everything else keeps its source bytes: code blocks, front matter lines, HTML blocks, list
markers, quotes, tables' pipes. Inline code, images, autolinks and URLs travel untouched. A paragraph written over
several lines comes back on one line (the same Markdown)."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from .base import Extraction, Outcome
from .inline import Item, Tag, Void, merge_text
from .text import decode_utf8

_PAIRS = {"strong_open": "strong_close", "em_open": "em_close", "s_open": "s_close", "link_open": "link_close"}
_SPECIAL = re.compile(r"([\\`*\[\]<|])")
_EDGE_UNDERSCORE = re.compile(r"(?<!\w)_|_(?!\w)")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _items(children) -> list[Item]:
    items: list[Item] = []
    stack: list[tuple[str, list[Item]]] = [("", items)]
    for tok in children:
        current = stack[-1][1]
        if tok.type == "text":
            current.append(tok.content)
        elif tok.type == "softbreak":
            current.append(" ")
        elif tok.type == "hardbreak":
            current.append(Void("\\\n"))
        elif tok.type == "code_inline":
            current.append(Void(tok.markup + tok.content + tok.markup))
        elif tok.type == "link_open" and tok.markup == "autolink":
            current.append(Void(f"<{tok.attrs.get('href', '')}>"))
            stack.append(("skip", []))
        elif tok.type in _PAIRS:
            tag = Tag(
                ("link", tok.attrs.get("href", ""), tok.attrs.get("title"))
                if tok.type == "link_open"
                else ("emphasis", tok.markup)
            )
            current.append(tag)
            stack.append((_PAIRS[tok.type], tag.children))
        elif len(stack) > 1 and tok.type == stack[-1][0] or (stack[-1][0] == "skip" and tok.type == "link_close"):
            stack.pop()
        elif tok.type == "image":
            title = f' "{tok.attrs["title"]}"' if tok.attrs.get("title") else ""
            current.append(Void(f"![{tok.content}]({tok.attrs.get('src', '')}{title})"))
        else:  # inline HTML and anything else: as written
            current.append(Void(tok.content or tok.markup))
    return merge_text(items)


def render(items: list[Item]) -> str:
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(_EDGE_UNDERSCORE.sub(r"\\_", _SPECIAL.sub(r"\\\1", item)))
        elif isinstance(item, Void):
            out.append(item.payload)
        elif item.payload[0] == "link":
            _, href, title = item.payload
            out.append(f"[{render(item.children)}]({href}" + (f' "{title}"' if title else "") + ")")
        else:
            out.append(item.payload[1] + render(item.children) + item.payload[1])
    return "".join(out)


def _after_front_matter(lines: list[str]) -> int:
    """The first line after a YAML front matter block (--- ... --- at the very top), or 0 without one."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            return i + 1
    return 0


def read(data: bytes, target: str) -> Extraction[bytes]:
    source = decode_utf8(data, ".md")
    lines = source.splitlines(keepends=True)
    cursor: dict[int, int] = {}  # per line, where the next search starts (table cells share a line)
    located: list[tuple[list[Item], list[tuple[int, int, int]]]] = []
    body_from = _after_front_matter(lines)
    for tok in _parser().parse(source):
        if tok.type != "inline" or tok.map is None or not tok.content.strip() or tok.map[0] < body_from:
            continue
        spans: list[tuple[int, int, int]] = []  # (line, start, end) of each of its lines' text
        for i, part in enumerate(tok.content.split("\n")):
            line_no, part = tok.map[0] + i, part.strip()
            start = lines[line_no].find(part, cursor.get(line_no, 0)) if line_no < len(lines) else -1
            if start < 0:
                spans = []
                break
            spans.append((line_no, start, start + len(part)))
        if spans:
            for line_no, _, end in spans:
                cursor[line_no] = end
            located.append((_items(tok.children), spans))

    def write(outcomes: list[Outcome]) -> bytes:
        out = list(lines)
        edits: list[tuple[tuple[int, int, int], str | None]] = []  # None: a continuation line's text, removed
        for (_, spans), outcome in zip(located, outcomes):
            if outcome.translated:
                edits.append((spans[0], render(outcome.items)))
                edits.extend((span, None) for span in spans[1:])
        for (line_no, start, end), text in sorted(edits, key=lambda e: e[0], reverse=True):
            line = out[line_no]
            if text is None and not line[:start].strip(" >\t") and not line[end:].strip():
                out[line_no] = ""  # a continuation line now joined to its paragraph's first line
            else:
                out[line_no] = line[:start] + (text or "") + line[end:]
        return "".join(out).encode("utf-8")

    return Extraction([items for items, _ in located], write)
