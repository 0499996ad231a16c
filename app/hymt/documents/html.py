"""HTML with lxml's HTML parser, and XHTML (EPUB chapters) with its XML parser.

Each block's inline content (text with b, a, em, span... inside) is one segment; a block inside a block starts a new
one. Code, scripts, styles, preformatted text and anything marked translate="no" are left as they are; inside a
sentence they travel as markers and come back untouched. Attributes people read (alt, title, placeholder,
aria-label) are translated on their own. The document's lang becomes the target language.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import lxml.html
from lxml import etree

from .base import NOT_XML, Data, Extraction, each_translated
from .guard import parser as xml_parser
from .inline import Item, plain
from .xmlinline import Classify, items_of, localname, replace_run

INLINE = {
    "a",
    "abbr",
    "b",
    "bdi",
    "bdo",
    "big",
    "cite",
    "data",
    "del",
    "dfn",
    "em",
    "font",
    "i",
    "ins",
    "label",
    "mark",
    "q",
    "s",
    "small",
    "span",
    "strike",
    "strong",
    "sub",
    "sup",
    "time",
    "tt",
    "u",
}
# Inline, but their content is not prose to translate: carried whole inside the sentence.
OPAQUE = {
    "audio",
    "br",
    "button",
    "canvas",
    "code",
    "embed",
    "iframe",
    "img",
    "input",
    "kbd",
    "math",
    "object",
    "picture",
    "samp",
    "select",
    "svg",
    "textarea",
    "var",
    "video",
    "wbr",
    "script",
    "style",
    "noscript",
}
SKIP = {"script", "style", "pre", "code", "kbd", "samp", "textarea", "svg", "math", "template", "noscript", "head"}
ATTRIBUTES = ("alt", "title", "placeholder", "aria-label")
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"

Writer = Callable[[list[Item]], None]  # puts one segment's translated items in place


@dataclass(frozen=True)
class Rules:
    """How a markup's elements read: which ones hold sentences apart (blocks, the rest being inline), which inline
    ones are translated inside the sentence ("tag") or carried whole ("void"), and which are left as they are."""

    inline: Callable[[etree._Element], bool]
    classify: Classify
    no_translate: Callable[[etree._Element], bool]  # left as it is, its attributes too
    skip: frozenset[str] = frozenset()  # blocks passed over (their attributes are still read)
    html: bool = True  # HTML's own readings too: a title's text, and the attributes people read


def html_rules(ignore: frozenset[str] = frozenset()) -> Rules:
    """HTML's reading, with the elements named in `ignore` (DeepL's ignore_tags) left as they are too."""

    def no_translate(el: etree._Element) -> bool:
        return (
            el.get("translate", "").lower() == "no"
            or "notranslate" in el.get("class", "").split()
            or (isinstance(el.tag, str) and localname(el) in ignore)
        )

    def inline(el: etree._Element) -> bool:
        return not isinstance(el.tag, str) or localname(el) in INLINE or localname(el) in OPAQUE

    def classify(el: etree._Element) -> str:
        return "tag" if isinstance(el.tag, str) and localname(el) in INLINE and not no_translate(el) else "void"

    return Rules(inline, classify, no_translate, frozenset(SKIP))


HTML = html_rules()


def _attribute_writer(el: etree._Element, name: str) -> Writer:
    # An attribute's segment is its plain value, so its translation is plain text too.
    return lambda items: el.set(name, plain(items))


class Collector:
    """The segments of a tree as `rules` read it, and how each is written back."""

    def __init__(self, rules: Rules = HTML) -> None:
        self.rules = rules
        self.segments: list[list[Item]] = []
        self.writers: list[Writer] = []

    def attributes(self, root: etree._Element) -> None:
        for el in root.iter():
            if not isinstance(el.tag, str) or self.rules.no_translate(el):
                continue
            for name in ATTRIBUTES:
                value = el.get(name, "")
                if value.strip():
                    self.segments.append([value])
                    self.writers.append(_attribute_writer(el, name))

    def block(self, el: etree._Element) -> None:
        """The runs of inline content in a block, split at its block children (each visited in turn)."""
        if not isinstance(el.tag, str) or localname(el) in self.rules.skip or self.rules.no_translate(el):
            return
        if self.rules.html and localname(el) == "title":
            self._run(el, None, [])
            return
        anchor: etree._Element | None = None
        run: list[etree._Element] = []
        for child in list(el):
            if self.rules.inline(child):
                run.append(child)
                continue
            self._run(el, anchor, run)
            self.block(child)
            anchor, run = child, []
        self._run(el, anchor, run)

    def _run(self, parent: etree._Element, anchor: etree._Element | None, run: list[etree._Element]) -> None:
        text = parent.text if anchor is None else anchor.tail
        items = items_of(text, run, self.rules.classify, collapse=self.rules.html)
        self.segments.append(items)

        def write(new_items: list[Item]) -> None:
            start = 0 if anchor is None else parent.index(anchor) + 1

            def set_text(value: str) -> None:
                if anchor is None:
                    parent.text = value
                else:
                    anchor.tail = value

            replace_run(parent, start, run, new_items, set_text)

        self.writers.append(write)

    def extraction(self, serialize: Callable[[], Data]) -> Extraction[Data]:
        # Attributes first: a Tag copies its element's attributes when it is rebuilt.
        return each_translated(self.writers, self.segments, lambda writer, outcome: writer(outcome.items), serialize)


def read(data: bytes, target: str) -> Extraction[bytes]:
    """A whole HTML page (or a fragment, written back as a fragment)."""
    if b"<html" not in data[:4096].lower():
        fragment = read_fragment(data.decode("utf-8-sig", errors="replace"), target)
        return Extraction(fragment.segments, lambda outcomes: fragment.write(outcomes).encode("utf-8"))
    parser: lxml.html.HTMLParser | None
    try:  # libxml2 takes a page without a charset declaration for Latin-1; text that reads as UTF-8 is UTF-8
        data.decode("utf-8")
        parser = lxml.html.HTMLParser(encoding="utf-8")
    except UnicodeDecodeError:
        parser = None  # the page's own declaration, kept when written back
    tree = lxml.html.parse(io.BytesIO(data), parser)
    tree.getroot().set("lang", target)
    encoding = tree.docinfo.encoding or "utf-8"
    # The parser invents a doctype for a page without one: only a page that had one is written with it.
    whole = tree if b"<!doctype" in data[:4096].lower() else tree.getroot()
    # The page's own encoding (never "unicode") gives bytes; lxml-stubs types only its literal names that way.
    return _page(tree.getroot()).extraction(
        lambda: cast(bytes, etree.tostring(whole, method="html", encoding=encoding))
    )


def _page(root: etree._Element) -> Collector:
    """A whole page: its attributes, the head's title, and the blocks of the rest."""
    collector = Collector()
    collector.attributes(root)
    for part in root:
        if localname(part) == "head":
            for title in part.iter("{*}title", "title"):
                collector.block(title)
        else:
            collector.block(part)
    return collector


def read_fragment(text: str, target: str, rules: Rules = HTML) -> Extraction[str]:
    """An HTML fragment (the /translate API's format: html); written back as a fragment, nothing added."""
    text = NOT_XML.sub("", text)
    if not text.strip():
        return Extraction([], lambda outcomes: text)
    wrapper: etree._Element = lxml.html.fragment_fromstring(text, create_parent="div")
    collector = Collector(rules)
    collector.attributes(wrapper)
    collector.block(wrapper)

    def serialize() -> str:
        return (wrapper.text or "") + "".join(etree.tostring(c, method="html", encoding="unicode") for c in wrapper)

    return collector.extraction(serialize)


def read_xhtml(data: bytes, target: str) -> Extraction[bytes]:
    tree = etree.parse(io.BytesIO(data), xml_parser())
    root = tree.getroot()
    root.set(XML_LANG, target)
    if root.get("lang") is not None:
        root.set("lang", target)
    return _page(root).extraction(lambda: etree.tostring(tree, xml_declaration=True, encoding="utf-8"))
