"""EPUB with ebooklib: every XHTML chapter translated as XHTML (see html.py), the table of contents' titles
translated, the book's language set. Images, styles, fonts and the reading order stay as they were."""

from __future__ import annotations

import io

import ebooklib
from ebooklib import epub

from .base import Extraction, combine, each_translated
from .html import read_xhtml


def read(data: bytes, target: str) -> Extraction[bytes]:
    book = epub.read_epub(io.BytesIO(data))
    chapters = [item for item in book.get_items_of_type(ebooklib.ITEM_DOCUMENT) if not isinstance(item, epub.EpubNav)]
    parts = [read_xhtml(item.get_content(), target) for item in chapters] + [_toc_titles(book.toc)]
    book.language = target
    book.metadata.setdefault(epub.NAMESPACES["DC"], {})["language"] = [(target, {})]
    _name_toc_entries(book.toc)

    def after(contents: list[bytes]) -> bytes:
        for item, content in zip(chapters, contents):
            item.set_content(content)
        out = io.BytesIO()
        epub.write_epub(out, book)
        return out.getvalue()

    return combine(parts, after)


def _toc_titles(toc) -> Extraction[bytes]:
    """The table of contents' titles (ebooklib writes the navigation document from them)."""
    entries = []

    def walk(items) -> None:
        for entry in items:
            if isinstance(entry, tuple):
                walk([entry[0]])
                walk(entry[1])
            elif getattr(entry, "title", None):
                entries.append(entry)

    walk(toc)

    return each_translated(
        entries,
        [[entry.title] for entry in entries],
        lambda entry, outcome: setattr(entry, "title", outcome.text),
        lambda: b"",
    )


def _name_toc_entries(toc, names=None) -> None:
    """ebooklib reads table-of-contents links without ids and then cannot write them: each gets one."""
    names = names if names is not None else iter(range(1, 1 << 30))
    for entry in toc:
        if isinstance(entry, tuple):
            _name_toc_entries([entry[0]], names)
            _name_toc_entries(entry[1], names)
        elif getattr(entry, "uid", "") is None:
            entry.uid = f"toc-{next(names)}"
