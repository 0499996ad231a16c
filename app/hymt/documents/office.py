"""Word (.docx, python-docx) and PowerPoint (.pptx, python-pptx): every paragraph a segment with its runs as markers
(see ooxml.py). Word: the body with its tables and text boxes, headers, footers, footnotes, endnotes and
comments. PowerPoint: every shape and table of every slide, and the speaker notes."""

from __future__ import annotations

import io
from collections.abc import Callable

import docx
import pptx
from lxml import etree

from .base import Extraction, each_translated
from .guard import parser
from .ooxml import DRAWING, WORD, Paragraph, paragraphs

_WORD_PARTS = ("/word/header", "/word/footer", "/word/footnotes", "/word/endnotes", "/word/comments")


def _extraction(paras: list[Paragraph], save: Callable[[], bytes]) -> Extraction[bytes]:
    return each_translated(paras, [p.items for p in paras], Paragraph.write, save)


def read_docx(data: bytes, target: str) -> Extraction[bytes]:
    document = docx.Document(io.BytesIO(data))
    paras = paragraphs(document.element.body, WORD)
    blobs = []  # parts python-docx keeps as bytes (footnotes, endnotes): parsed here, written back on save
    for part in document.part.package.iter_parts():
        if not str(part.partname).startswith(_WORD_PARTS):
            continue
        element = getattr(part, "_element", None)
        if element is None:
            element = etree.fromstring(part.blob, parser())
            blobs.append((part, element))
        paras += paragraphs(element, WORD)

    def save() -> bytes:
        for part, element in blobs:
            part._blob = etree.tostring(element, xml_declaration=True, encoding="UTF-8", standalone=True)
        out = io.BytesIO()
        document.save(out)
        return out.getvalue()

    return _extraction(paras, save)


def read_pptx(data: bytes, target: str) -> Extraction[bytes]:
    presentation = pptx.Presentation(io.BytesIO(data))
    paras = []
    for slide in presentation.slides:
        paras += paragraphs(slide.element, DRAWING)
        if slide.has_notes_slide:
            paras += paragraphs(slide.notes_slide.element, DRAWING)

    def save() -> bytes:
        out = io.BytesIO()
        presentation.save(out)
        return out.getvalue()

    return _extraction(paras, save)
