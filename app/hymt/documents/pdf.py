"""PDF with a text layer (.pdf): each text block pdfminer finds is a segment (its lines joined), written back in
place: the pages' text drawing is removed with pikepdf (images, vector graphics, links and annotations stay) and
each block's translation is drawn with reportlab in the block's box, in a Noto font that covers its script, shaped
by HarfBuzz, right to left for Arabic script and Hebrew, smaller until it fits. What a block loses: its own fonts,
colours and styled words (a block is one run). A scanned page (no text layer) has nothing to translate; text drawn
as a clipping path, and the page's /Rotate, are not handled.
"""

from __future__ import annotations

import io
import os
import re
import unicodedata
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple, SupportsFloat

from ..errors import BadRequest, HymtError, PayloadTooLarge
from .base import Extraction, Outcome

FONT_DIRS = ("/usr/share/fonts/truetype/noto", "/usr/share/fonts/truetype/droid")
LATIN_FONT = "NotoSans-Regular.ttf"


class Script(NamedTuple):
    """A script the Latin font does not cover, and how its lines break."""

    name: str
    ranges: tuple[tuple[int, int], ...]  # its code points
    font: str  # the font file that covers it
    rtl: bool  # runs right to left
    # Whether words are separated by spaces; else a line may break between any two clusters (Tibetan after its
    # syllable marks).
    spaced: bool


_SCRIPTS = (
    Script("tibetan", ((0x0F00, 0x0FFF),), "NotoSerifTibetan-Regular.ttf", False, False),
    Script(
        "arabic",
        ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
        "NotoNaskhArabic-Regular.ttf",
        True,
        True,
    ),
    Script("hebrew", ((0x0590, 0x05FF),), "NotoSansHebrew-Regular.ttf", True, True),
    Script("devanagari", ((0x0900, 0x097F),), "NotoSansDevanagari-Regular.ttf", False, True),
    Script("bengali", ((0x0980, 0x09FF),), "NotoSansBengali-Regular.ttf", False, True),
    Script("gujarati", ((0x0A80, 0x0AFF),), "NotoSansGujarati-Regular.ttf", False, True),
    Script("tamil", ((0x0B80, 0x0BFF),), "NotoSansTamil-Regular.ttf", False, True),
    Script("telugu", ((0x0C00, 0x0C7F),), "NotoSansTelugu-Regular.ttf", False, True),
    Script("thai", ((0x0E00, 0x0E7F),), "NotoSansThai-Regular.ttf", False, False),
    Script("myanmar", ((0x1000, 0x109F),), "NotoSansMyanmar-Regular.ttf", False, False),
    Script("khmer", ((0x1780, 0x17FF),), "NotoSansKhmer-Regular.ttf", False, False),
    Script("mongolian", ((0x1800, 0x18AF),), "NotoSansMongolian-Regular.ttf", False, True),
    Script(
        "cjk",
        (
            (0x1100, 0x11FF),
            (0x2E80, 0x9FFF),
            (0xAC00, 0xD7AF),
            (0xF900, 0xFAFF),
            (0xFE30, 0xFE4F),
            (0xFF00, 0xFFEF),
            (0x20000, 0x2FFFF),
        ),
        "DroidSansFallbackFull.ttf",
        False,
        False,
    ),
)
_TEXT_OPERATORS = {"Tj", "TJ", "'", '"'}
_JOINERS = {"\u0f0b", "\u0f0d", "\u0f0e"}  # Tibetan tsheg and shad: a line may break after them
_VIRAMAS = {"\u17d2", "\u1039", "\u103a"}  # Khmer coeng, Myanmar virama: the next consonant joins the cluster
MIN_SIZE = 4.0
LEADING = 1.15  # line distance over font size


@dataclass
class Block:
    page: int
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in the page's space
    size: float  # the block's character size
    text: str


def _script(text: str) -> Script | None:
    """The script most of a text's letters are in (one of _SCRIPTS), or None for Latin, Greek and Cyrillic."""
    counts: dict[Script, int] = {}
    for ch in text:
        code = ord(ch)
        for script in _SCRIPTS:
            if any(lo <= code <= hi for lo, hi in script.ranges):
                counts[script] = counts.get(script, 0) + 1
                break
    return max(counts, key=counts.__getitem__) if counts else None


def font_path(filename: str) -> str:
    for directory in FONT_DIRS:
        path = os.path.join(directory, filename)
        if os.path.isfile(path):
            return path
    raise HymtError(
        f"PDF output needs the font {filename} (Debian's fonts-noto-core and fonts-droid-fallback), "
        "which is not installed here",
        error_type="font_missing",
        status=503,
    )


# The script of each target language that is not written in Latin, Greek or Cyrillic letters (languages.py's codes).
_TARGET_SCRIPTS = {
    "bo": "tibetan",
    "ug": "arabic",
    "ar": "arabic",
    "fa": "arabic",
    "ur": "arabic",
    "he": "hebrew",
    "hi": "devanagari",
    "mr": "devanagari",
    "bn": "bengali",
    "gu": "gujarati",
    "ta": "tamil",
    "te": "telugu",
    "th": "thai",
    "my": "myanmar",
    "km": "khmer",
    "zh": "cjk",
    "zh-Hant": "cjk",
    "yue": "cjk",
    "ja": "cjk",
    "ko": "cjk",
}


def fonts_for(target: str) -> None:
    """Before any translation: the fonts a PDF in this target language is written in are installed (a 503 that
    names them otherwise)."""
    font_path(LATIN_FONT)
    script = next((s for s in _SCRIPTS if s.name == _TARGET_SCRIPTS.get(target)), None)
    if script is not None:
        font_path(script.font)


def _font(text: str) -> tuple[str, bool]:
    """The registered reportlab font name for a text, and whether it runs right to left."""
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont

    script = _script(text)
    filename, rtl = (LATIN_FONT, False) if script is None else (script.font, script.rtl)
    name = "hymt-" + filename.rsplit(".", 1)[0]
    if name not in pdfmetrics.getRegisteredFontNames():
        pdfmetrics.registerFont(TTFont(name, font_path(filename)))
    return name, rtl


def _units(text: str) -> list[tuple[str, bool]]:
    """The pieces a line may break between, each with whether a space comes before it: words, and in scripts
    without spaces their clusters (a letter with its marks; in Tibetan a syllable with its tsheg)."""
    units = []
    for word in text.split():
        script = _script(word)
        if script is None or script.spaced:
            units.append((word, True))
            continue
        piece, first = "", True
        for ch in word:
            if piece and _breaks(piece[-1], ch, script.name == "tibetan"):
                units.append((piece, first))
                piece, first = "", False
            piece += ch
        units.append((piece, first))
    return units


def _breaks(before: str, ch: str, tibetan: bool) -> bool:
    if tibetan:
        return before in _JOINERS
    if _script(before) is None and _script(ch) is None:  # a Latin word or a number inside CJK text stays whole
        return False
    return unicodedata.category(ch) not in ("Mn", "Mc", "Me") and before not in _VIRAMAS


def _lines(units: list[tuple[str, bool]], width: float, measure) -> list[list[tuple[str, bool]]]:
    lines: list[list[tuple[str, bool]]] = [[]]
    used = 0.0
    space = measure(" ")
    for unit in units:
        extra = measure(unit[0]) + (space if unit[1] and lines[-1] else 0.0)
        if lines[-1] and used + extra > width:
            lines.append([])
            used, extra = 0.0, measure(unit[0])
        lines[-1].append(unit)
        used += extra
    return lines


def _draw(canvas, block: Block, text: str, page: tuple[float, float, float, float]) -> None:
    """The text in the block's box: lines filled to its width at the block's size, smaller until they fit. A block
    of one line (a title, a label) may grow across the page first, away from the edge its source lines start at, to
    the margin its other side keeps."""
    from reportlab.pdfgen.textobject import bidiShapedText

    name, rtl = _font(text)
    x0, y0, x1, y1 = block.box
    origin = page[:2]
    if y1 - y0 < 1.6 * block.size:  # away from the edge the source's own lines start at
        source = _script(block.text)
        if source is not None and source.rtl:
            x0 = min(x0, page[0] + page[2] - x1)
        else:
            x1 = max(x1, page[2] - (x0 - page[0]))
    width, height = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    size = max(block.size, MIN_SIZE)
    units = _units(text)
    while True:

        def measure(piece: str, size: float = size) -> float:
            return bidiShapedText(piece, None, fontName=name, fontSize=size, shaping=True)[1]

        lines = _lines(units, width, measure)
        if size * (1 + LEADING * (len(lines) - 1)) <= height * 1.05 or size <= MIN_SIZE:
            break
        size = max(size * 0.9, MIN_SIZE)
    canvas.setFont(name, size)
    y = y1 - origin[1] - size
    for line in lines:
        if rtl:  # words from the right edge in reading order, each shaped on its own
            x = x1 - origin[0]
            for i, (piece, space) in enumerate(line):
                x -= measure(piece)
                canvas.drawString(x, y, piece, shaping=True)
                if space and i + 1 < len(line):
                    x -= measure(" ")
        else:
            joined = "".join((" " if space and i else "") + piece for i, (piece, space) in enumerate(line))
            canvas.drawString(x0 - origin[0], y, joined, shaping=True)
        y -= size * LEADING


def _joined(lines: list[str]) -> str:
    text = ""
    for line in lines:
        if not text:
            text = line
        elif text.endswith("-") and line[:1].islower():
            text = text[:-1] + line
        elif (script := _script(text[-1])) is not None and not script.spaced:
            text += line
        else:
            text += " " + line
    return text


def _blocks(data: bytes) -> list[Block]:
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTChar, LTFigure, LTTextBox, LTTextLine

    blocks = []

    def visit(element, page: int) -> None:
        if isinstance(element, LTTextBox):
            lines = [line.get_text().strip() for line in element if isinstance(line, LTTextLine)]
            sizes = [
                ch.size for line in element if isinstance(line, LTTextLine) for ch in line if isinstance(ch, LTChar)
            ]
            text = _joined([line for line in lines if line])
            if text:
                blocks.append(Block(page, element.bbox, sum(sizes) / len(sizes) if sizes else 10.0, text))
        elif isinstance(element, LTFigure):
            for child in element:
                visit(child, page)

    for number, layout in enumerate(extract_pages(io.BytesIO(data), laparams=LAParams(all_texts=True))):
        for element in layout:
            visit(element, number)
    return blocks


def _strip_text(pdf) -> None:
    """Every page's text drawing removed, in its own content and in the forms it draws."""
    import pikepdf

    seen = set()

    def strip(stream) -> bytes:
        kept = [
            item
            for item in pikepdf.parse_content_stream(stream)
            if not (len(item) == 2 and str(item[1]) in _TEXT_OPERATORS)
        ]
        return pikepdf.unparse_content_stream(kept)

    def forms(resources) -> None:
        xobjects = resources.get("/XObject") if resources is not None else None
        for _, xobject in xobjects.items() if xobjects is not None else ():
            if xobject.get("/Subtype") == "/Form" and xobject.objgen not in seen:
                seen.add(xobject.objgen)
                xobject.write(strip(xobject))
                forms(xobject.get("/Resources"))

    for page in pdf.pages:
        page.obj.Contents = pdf.make_stream(strip(page))
        forms(page.obj.get("/Resources"))


def check(data: bytes, expanded_limit: int, page_limit: int) -> None:
    """A hostile PDF refused before pdfminer reads it: too many pages, or compressed streams that expand past the
    limit (each decompressed only up to what is left of it)."""
    import pikepdf

    try:
        pdf = pikepdf.open(io.BytesIO(data))
    except pikepdf.PdfError as exc:
        raise BadRequest(f"could not read this .pdf file: {exc}", error_type="invalid_file") from None
    with pdf:
        if len(pdf.pages) > page_limit:
            raise PayloadTooLarge(
                f"the PDF has {len(pdf.pages)} pages; at most {page_limit} are taken", error_type="pdf_too_large"
            )
        left = expanded_limit
        for obj in pdf.objects:
            if not isinstance(obj, pikepdf.Stream) or obj.get("/Filter") != "/FlateDecode":
                continue
            inflater = zlib.decompressobj()
            try:
                left -= len(inflater.decompress(obj.read_raw_bytes(), left + 1))
            except zlib.error:
                continue  # a damaged stream is pdfminer's to refuse or skip
            if left < 0:
                raise PayloadTooLarge(
                    f"the PDF's streams expand past {expanded_limit} bytes", error_type="pdf_too_large"
                )


def _rect(values: Iterable[SupportsFloat]) -> tuple[float, float, float, float]:
    """A PDF rectangle (a page's /MediaBox: four numbers) as floats."""
    x0, y0, x1, y1 = (float(v) for v in values)
    return x0, y0, x1, y1


def read(data: bytes, target: str) -> Extraction[bytes]:
    blocks = _blocks(data)

    def write(outcomes: list[Outcome]) -> bytes:
        import pikepdf
        from reportlab.pdfgen import canvas as pdfcanvas

        pdf = pikepdf.open(io.BytesIO(data))
        _strip_text(pdf)
        overlay = io.BytesIO()
        drawing = pdfcanvas.Canvas(overlay)
        boxes = [_rect(page.mediabox) for page in pdf.pages]
        for number, box in enumerate(boxes):
            drawing.setPageSize((box[2] - box[0], box[3] - box[1]))
            for block, outcome in zip(blocks, outcomes):
                if block.page == number:
                    text = re.sub(r"\s+", " ", outcome.text).strip()
                    if text:
                        _draw(drawing, block, text, box)
            drawing.showPage()
        drawing.save()
        layer = pikepdf.open(io.BytesIO(overlay.getvalue()))
        for page, drawn in zip(pdf.pages, layer.pages):
            page.add_overlay(drawn, pikepdf.Rectangle(*[float(v) for v in page.mediabox]))
        out = io.BytesIO()
        pdf.save(out)
        return out.getvalue()

    return Extraction([[block.text] for block in blocks], write)
