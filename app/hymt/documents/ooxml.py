"""Paragraphs of Office Open XML (Word's w:p, PowerPoint's a:p) as segments whose runs are markers.

Text in the paragraph's most used formatting is plain text; text in any other formatting (bold, a style, a
PowerPoint link) is a Tag carrying that run's properties; a Word hyperlink is a Tag around its own runs; tabs,
breaks, pictures, fields and bookmarks are Voids put back as they were. Runs split by Word for no visible reason
(equal properties) are joined before translation.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from lxml import etree

from .base import Outcome
from .inline import Item, Tag, Void

XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


@dataclass(frozen=True)
class Schema:
    ns: str
    link: str | None  # the element that wraps runs in a hyperlink (Word); PowerPoint links live in run properties
    trailing: tuple[str, ...] = ()  # paragraph children that must stay last
    dropped: tuple[str, ...] = ()  # children with no meaning after translation (spell-check marks)
    preserve_space: bool = False

    def q(self, name: str) -> str:
        return f"{{{self.ns}}}{name}"


WORD = Schema(
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    link="hyperlink",
    dropped=("proofErr", "lastRenderedPageBreak"),
    preserve_space=True,
)
DRAWING = Schema("http://schemas.openxmlformats.org/drawingml/2006/main", link=None, trailing=("endParaRPr",))


# Run properties that say nothing a reader sees (PowerPoint's spell-check and edit flags): runs that differ only in
# them are one formatting, and so are empty properties and none.
_INVISIBLE = ("err", "dirty", "smtClean", "smtId")


def _key(props: etree._Element | None) -> bytes:
    if props is None:
        return b""
    if any(name in props.attrib for name in _INVISIBLE):
        props = copy.copy(props)
        for name in _INVISIBLE:
            props.attrib.pop(name, None)  # type: ignore[call-overload]  # lxml-stubs: pop's default may be any value
    return etree.tostring(props) if len(props) or props.attrib else b""


class _Text(NamedTuple):
    """A run's text, with the run's properties and their key (serialized XML, worked out once per run of text)."""

    props: etree._Element | None
    text: str
    key: bytes


class _Link(NamedTuple):
    """A Word hyperlink: its element, the pieces inside it, and their most used run properties."""

    el: etree._Element
    inner: list[_Piece]
    base: etree._Element | None


class _Kept(NamedTuple):
    """What is put back as it was (a Void): a paragraph child, or ("run", properties, part) for a tab, break or
    picture inside a run."""

    payload: etree._Element | tuple[str, etree._Element | None, etree._Element]


_Piece = _Text | _Link | _Kept


class Paragraph:
    """One paragraph: its segment's items, and `write` to put translated items in its place."""

    def __init__(self, p: etree._Element, schema: Schema):
        self.p, self.s = p, schema
        pieces = self._pieces(list(p))
        self.base = self._dominant(pieces)
        self.items = self._items(pieces, _key(self.base))

    def _pieces(self, children: list[etree._Element]) -> list[_Piece]:
        s = self.s
        pieces: list[_Piece] = []
        for child in children:
            if not isinstance(child.tag, str):
                pieces.append(_Kept(child))
            elif child.tag in (s.q("pPr"), *map(s.q, s.trailing)) or child.tag in map(s.q, s.dropped):
                continue
            elif child.tag == s.q("r"):
                props = child.find(s.q("rPr"))
                for part in child:
                    if part.tag == s.q("t"):
                        pieces.append(_Text(props, part.text or "", _key(props)))
                    elif part is not props and part.tag not in map(s.q, s.dropped):
                        pieces.append(_Kept(("run", props, part)))
            elif s.link and child.tag == s.q(s.link):
                inner = self._pieces(list(child))
                pieces.append(_Link(child, inner, self._dominant(inner)))
            else:
                pieces.append(_Kept(child))
        return pieces

    @staticmethod
    def _dominant(pieces: list[_Piece]) -> etree._Element | None:
        weights: Counter[bytes] = Counter()
        exemplar: dict[bytes, etree._Element | None] = {}
        for piece in pieces:
            if isinstance(piece, _Text):
                weights[piece.key] += len(piece.text)
                exemplar.setdefault(piece.key, piece.props)
        return exemplar[weights.most_common(1)[0][0]] if weights else None

    def _items(self, pieces: list[_Piece], base_key: bytes) -> list[Item]:
        items: list[Item] = []
        fmt_key = None  # the key of the last formatted Tag appended
        for piece in pieces:
            if isinstance(piece, _Text):
                key = piece.key
                if key == base_key:
                    if items and isinstance(items[-1], str):
                        items[-1] += piece.text
                    else:
                        items.append(piece.text)
                elif (
                    items
                    and isinstance(items[-1], Tag)
                    and items[-1].payload[0] == "fmt"
                    and fmt_key == key
                    and isinstance(items[-1].children[0], str)  # always: a formatted run's Tag holds its text
                ):
                    items[-1].children[0] += piece.text
                else:
                    items.append(Tag(("fmt", piece.props), [piece.text]))
                    fmt_key = key
            elif isinstance(piece, _Link):
                items.append(Tag(("link", piece.el, piece.base), self._items(piece.inner, _key(piece.base))))
            else:
                items.append(Void(piece.payload))
        return items

    def write(self, outcome: Outcome) -> None:
        s, p = self.s, self.p
        kept = [c for c in p if isinstance(c.tag, str) and c.tag == s.q("pPr")]
        trailing = [c for c in p if isinstance(c.tag, str) and c.tag in map(s.q, s.trailing)]
        built = self._build(outcome.items, self.base, in_link=False)
        for child in list(p):
            p.remove(child)
        p.extend(kept + built + trailing)

    def _build(self, items: list[Item], props: etree._Element | None, in_link: bool) -> list[etree._Element]:
        out: list[etree._Element] = []
        for item in items:
            if isinstance(item, str):
                if item:
                    out.append(self._run(props, item))
            elif isinstance(item, Tag) and item.payload[0] == "fmt":
                out.extend(self._build(item.children, item.payload[1], in_link))
            elif isinstance(item, Tag):
                _, el, base = item.payload
                inner = self._build(item.children, base, in_link=True)
                if in_link:  # a link the translation nested in a link: its words join the outer one
                    out.extend(inner)
                    continue
                link = el.makeelement(el.tag, dict(el.attrib))
                link.extend(inner)
                out.append(link)
            elif isinstance(item.payload, tuple):
                _, run_props, part = item.payload
                run = self.p.makeelement(self.s.q("r"))
                if run_props is not None:
                    run.append(copy.deepcopy(run_props))
                part.tail = None
                run.append(part)
                out.append(run)
            else:
                item.payload.tail = None
                out.append(item.payload)
        return out

    def _run(self, props: etree._Element | None, text: str) -> etree._Element:
        run = self.p.makeelement(self.s.q("r"))
        if props is not None:
            run.append(copy.deepcopy(props))
        t = etree.SubElement(run, self.s.q("t"))
        t.text = text
        if self.s.preserve_space:
            t.set(XML_SPACE, "preserve")
        return run


def paragraphs(root: etree._Element, schema: Schema) -> list[Paragraph]:
    return [Paragraph(p, schema) for p in root.iter(schema.q("p"))]
