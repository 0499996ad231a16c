"""XLIFF 1.2 and 2.0 with lxml: each source a segment, its inline codes (g, x, ph, bpt... in 1.2; pc, ph, sc, mrk...
in 2.0) carried as markers into the target. Targets are filled and their state set; units marked translate="no",
and units that already have a target, are left alone. The file's target language is set."""

from __future__ import annotations

import io

from lxml import etree

from ..errors import BadRequest
from .base import Extraction, Outcome, each_translated
from .guard import parser
from .inline import Item
from .xmlinline import build, items_of, localname

NS_12 = "urn:oasis:names:tc:xliff:document:1.2"
NS_20 = "urn:oasis:names:tc:xliff:document:2.0"
PAIRED = {"g", "pc", "mrk"}


def _classify(el: etree._Element) -> str:
    return "tag" if isinstance(el.tag, str) and localname(el) in PAIRED else "void"


def read(data: bytes, target: str) -> Extraction[bytes]:
    try:
        tree = etree.parse(io.BytesIO(data), parser())
    except etree.XMLSyntaxError as exc:
        raise BadRequest(f"the .xliff file is not well-formed XML: {exc}", error_type="invalid_file") from None
    root = tree.getroot()
    ns = etree.QName(root).namespace
    if ns == NS_12:
        for file in root.iter(f"{{{NS_12}}}file"):
            file.set("target-language", target)
        found = [
            (u.find(f"{{{NS_12}}}source"), u)
            for u in root.iter(f"{{{NS_12}}}trans-unit")
            if u.get("translate", "yes") != "no" and u.find(f"{{{NS_12}}}target") is None
        ]
    elif ns == NS_20:
        root.set("trgLang", target)
        found = [
            (s.find(f"{{{NS_20}}}source"), s)
            for u in root.iter(f"{{{NS_20}}}unit")
            if u.get("translate", "yes") != "no"
            for s in u.iter(f"{{{NS_20}}}segment")
            if s.find(f"{{{NS_20}}}target") is None
        ]
    else:
        raise BadRequest("only XLIFF 1.2 and 2.0 files are supported", error_type="unsupported_format")
    pairs = [(source, holder) for source, holder in found if source is not None]
    segments: list[list[Item]] = [items_of(source.text, list(source), _classify) for source, _ in pairs]

    def apply(pair: tuple[etree._Element, etree._Element], outcome: Outcome) -> None:
        source, holder = pair
        # Inline codes are copied: the source keeps its own.
        text, elements = build(outcome.items, copy_voids=True)
        target_el = etree.Element(f"{{{ns}}}target")
        target_el.text = text
        target_el.extend(elements)
        target_el.tail = source.tail
        source.addnext(target_el)
        if ns == NS_12:
            target_el.set("state", "needs-review-translation")
            target_el.set("state-qualifier", "mt-suggestion")
        else:
            holder.set("state", "translated")

    return each_translated(pairs, segments, apply, lambda: etree.tostring(tree, xml_declaration=True, encoding="UTF-8"))
