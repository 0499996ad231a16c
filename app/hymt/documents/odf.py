"""OpenDocument (.odt, .odp, .ods) with lxml over the package's XML, as OOXML is read.

Every paragraph and heading (text:p, text:h) of content.xml and of the master pages in styles.xml (headers,
footers) is a segment: in a Writer body, a table, a text box, a list, a note or a comment; in every frame and shape
of a slide and its speaker notes; in a spreadsheet's text cells (cells with a number, date or formula are left
alone). A span of other formatting and a link are markers around their words; spaces (text:s), tabs, line breaks,
fields, bookmarks, frames, notes and comments are markers put back whole (the paragraphs inside a note, comment or
text box are segments of their own). Images' titles and descriptions are translated on their own; meta.xml's
dc:language becomes the target. Every other member of the package is copied as it was, mimetype first and stored.
"""

from __future__ import annotations

import copy
import io
import zipfile

from lxml import etree

from .base import Extraction, Outcome, combine, each_translated
from .guard import parser
from .inline import Item
from .xmlinline import items_of, replace_run

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
SVG = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
DC = "http://purl.org/dc/elements/1.1/"

_PARAGRAPHS = (f"{{{TEXT}}}p", f"{{{TEXT}}}h")
_PAIRED = {f"{{{TEXT}}}span", f"{{{TEXT}}}a"}
_CELL, _ANNOTATION = f"{{{TABLE}}}table-cell", f"{{{OFFICE}}}annotation"
_ALT = (f"{{{SVG}}}title", f"{{{SVG}}}desc")


def _classify(el: etree._Element) -> str:
    return "tag" if el.tag in _PAIRED else "void"


def _in_value_cell(p: etree._Element) -> bool:
    """A paragraph that shows a cell's number, date or formula result (not a comment on the cell)."""
    for ancestor in p.iterancestors():
        if ancestor.tag == _ANNOTATION:
            return False
        if ancestor.tag == _CELL:
            return (
                ancestor.get(f"{{{OFFICE}}}value-type", "string") != "string"
                or ancestor.get(f"{{{TABLE}}}formula") is not None
            )
    return False


def _part(root: etree._Element, scope: etree._Element) -> Extraction[bytes]:
    paragraphs = [p for p in scope.iter(*_PARAGRAPHS) if not _in_value_cell(p)]
    alts = [el for el in scope.iter(*_ALT) if len(el) == 0 and (el.text or "").strip()]
    segments: list[list[Item]] = [items_of(p.text, list(p), _classify, collapse=True) for p in paragraphs]
    segments += [[el.text or ""] for el in alts]  # each has text (above)

    def apply(target: tuple[str, etree._Element], outcome: Outcome) -> None:
        kind, el = target
        if kind == "alt":
            el.text = outcome.text
        else:
            replace_run(el, 0, list(el), outcome.items, lambda text: setattr(el, "text", text))

    targets = [("p", p) for p in paragraphs] + [("alt", el) for el in alts]
    return each_translated(
        targets, segments, apply, lambda: etree.tostring(root, xml_declaration=True, encoding="UTF-8")
    )


def read(data: bytes, target: str) -> Extraction[bytes]:
    archive = zipfile.ZipFile(io.BytesIO(data))
    names = set(archive.namelist())
    if "content.xml" not in names:
        raise ValueError("content.xml is missing: not an OpenDocument package")
    content = etree.fromstring(archive.read("content.xml"), parser())
    parts = {"content.xml": _part(content, content)}
    if "styles.xml" in names:
        styles = etree.fromstring(archive.read("styles.xml"), parser())
        masters = styles.find(f"{{{OFFICE}}}master-styles")
        if masters is not None:
            parts["styles.xml"] = _part(styles, masters)
    meta = etree.fromstring(archive.read("meta.xml"), parser()) if "meta.xml" in names else None
    if meta is not None:
        for language in meta.iter(f"{{{DC}}}language"):
            language.text = target

    def after(written: list[bytes]) -> bytes:
        replaced = dict(zip(parts, written))
        if meta is not None:
            replaced["meta.xml"] = etree.tostring(meta, xml_declaration=True, encoding="UTF-8")
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
            # The mimetype member first and stored: that is how other programs recognise the package.
            if "mimetype" in names:
                package.writestr(zipfile.ZipInfo("mimetype"), archive.read("mimetype"), zipfile.ZIP_STORED)
            for info in archive.infolist():
                if info.filename != "mimetype":
                    # A copy: writing fills in the entry's offsets, and the source's must stay as they are.
                    package.writestr(
                        copy.copy(info), replaced[info.filename] if info.filename in replaced else archive.read(info)
                    )
        return out.getvalue()

    return combine(list(parts.values()), after)
