"""Inline items from lxml elements and back, for the XML-shaped formats (HTML, XHTML in EPUB, XLIFF).

lxml keeps text in `text` and `tail`; a run of inline content is a leading text and some elements, each with its
tail. A paired element becomes a Tag whose payload is the element (its tag and attributes are copied back, its
content comes from the translation); anything else (a void element, a code span, a comment) becomes a Void whose
payload is the element itself, put back whole.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

from lxml import etree

from .inline import Item, Tag, Void, merge_text

Classify = Callable[[etree._Element], str]  # "tag" or "void"


def items_of(
    text: str | None, elements: list[etree._Element], classify: Classify, collapse: bool = False
) -> list[Item]:
    items: list[Item] = [_space(text, collapse)]
    for el in elements:
        if classify(el) == "tag":
            items.append(Tag(el, items_of(el.text, list(el), classify, collapse)))
        else:
            items.append(Void(el))
        items.append(_space(el.tail, collapse))
    return merge_text(items)


def build(items: list[Item], copy_voids: bool = False) -> tuple[str, list[etree._Element]]:
    """(leading text, elements with their tails) from items; Void elements are moved unless copy_voids."""
    text = ""
    elements: list[etree._Element] = []
    for item in items:
        if isinstance(item, str):
            if elements:
                elements[-1].tail = (elements[-1].tail or "") + item
            else:
                text += item
        elif isinstance(item, Tag):
            el = item.payload.makeelement(item.payload.tag, dict(item.payload.attrib))
            el.text, children = build(item.children, copy_voids)
            el.extend(children)
            el.tail = None
            elements.append(el)
        else:
            el = copy.deepcopy(item.payload) if copy_voids else item.payload
            el.tail = None
            elements.append(el)
    return text, elements


def replace_run(
    parent: etree._Element,
    start: int,
    old: list[etree._Element],
    items: list[Item],
    set_text: Callable[[str], None],
) -> None:
    """Put a run's new content in place of its old elements, which sat from child index `start` in `parent`."""
    text, elements = build(items)
    for el in old:
        if el.getparent() is parent:
            parent.remove(el)
    for offset, el in enumerate(elements):
        parent.insert(start + offset, el)
    set_text(text)


def _space(text: str | None, collapse: bool) -> str:
    if not text:
        return ""
    return re.sub(r"\s+", " ", text) if collapse else text


def localname(el: etree._Element) -> str:
    return etree.QName(el).localname.lower() if isinstance(el.tag, str) else ""
