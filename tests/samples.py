"""Documents of every format made for the tests: OpenDocument packages written as LibreOffice lays them out, any
format holding a given list of paragraphs, and hostile variants of them (zip bombs, entity declarations)."""

from __future__ import annotations

import copy
import io
import os
import zipfile
from html import escape

NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "fo": "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    "xlink": "http://www.w3.org/1999/xlink",
    "dc": "http://purl.org/dc/elements/1.1/",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
}
_XMLNS = " ".join(f'xmlns:{k}="{v}"' for k, v in NS.items())
ODF_TYPES = {
    ".odt": ("text", "application/vnd.oasis.opendocument.text"),
    ".odp": ("presentation", "application/vnd.oasis.opendocument.presentation"),
    ".ods": ("spreadsheet", "application/vnd.oasis.opendocument.spreadsheet"),
}
_STYLES = (
    '<office:automatic-styles><style:style style:name="B" style:family="text"><style:text-properties '
    'fo:font-weight="bold"/></style:style><style:style style:name="I" style:family="text">'
    '<style:text-properties fo:font-style="italic"/></style:style></office:automatic-styles>'
)


def odf(ext: str, body: str, master: str = "", picture: bool = False) -> bytes:
    """An OpenDocument package: `body` inside office:text/presentation/spreadsheet, `master` inside a master page
    of styles.xml (headers, footers), and a picture member when asked."""
    kind, mimetype = ODF_TYPES[ext]
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_XMLNS} office:version="1.3">'
        f"{_STYLES}<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>"
    )
    styles = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-styles {_XMLNS} office:version="1.3">'
        f'<office:master-styles><style:master-page style:name="Standard">{master}</style:master-page>'
        "</office:master-styles></office:document-styles>"
    )
    meta = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {_XMLNS} office:version="1.3">'
        "<office:meta><dc:language>en-US</dc:language><dc:title>Sample</dc:title></office:meta>"
        "</office:document-meta>"
    )
    files = {"content.xml": content, "styles.xml": styles, "meta.xml": meta}
    if picture:
        files["Pictures/a.png"] = b"\x89PNG\r\n\x1a\nnot really a picture"
    entries = "".join(
        f'<manifest:file-entry manifest:full-path="{name}" manifest:media-type="text/xml"/>' for name in files
    )
    files["META-INF/manifest.xml"] = (
        f'<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="{NS["manifest"]}" '
        f'manifest:version="1.3"><manifest:file-entry manifest:full-path="/" manifest:media-type="{mimetype}"/>'
        f"{entries}</manifest:manifest>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr(zipfile.ZipInfo("mimetype"), mimetype, zipfile.ZIP_STORED)
        for name, data in files.items():
            package.writestr(name, data)
    return out.getvalue()


def odf_paragraphs(ext: str, texts: list[str]) -> bytes:
    paragraphs = "".join(f"<text:p>{escape(t)}</text:p>" for t in texts)
    if ext == ".odt":
        return odf(ext, paragraphs)
    if ext == ".odp":
        return odf(
            ext,
            f'<draw:page draw:name="p1"><draw:frame><draw:text-box>{paragraphs}</draw:text-box>'
            "</draw:frame></draw:page>",
        )
    rows = "".join(
        f'<table:table-row><table:table-cell office:value-type="string"><text:p>{escape(t)}</text:p>'
        "</table:table-cell></table:table-row>"
        for t in texts
    )
    return odf(ext, f'<table:table table:name="Sheet1">{rows}</table:table>')


def document(ext: str, texts: list[str]) -> bytes:
    """A document of the format holding these paragraphs (cells, cues, messages, units)."""
    if ext in ODF_TYPES:
        return odf_paragraphs(ext, texts)
    if ext == ".txt":
        return "\n".join(texts).encode()
    if ext == ".md":
        return "\n\n".join(texts).encode()
    if ext == ".html":
        return ("<html><body>" + "".join(f"<p>{escape(t)}</p>" for t in texts) + "</body></html>").encode()
    if ext == ".srt":
        return "".join(
            f"{i}\n00:00:{i % 60:02},000 --> 00:00:{i % 60:02},500\n{t}\n\n" for i, t in enumerate(texts, 1)
        ).encode()
    if ext == ".vtt":
        return (
            "WEBVTT\n\n"
            + "".join(
                f"00:{i // 60 % 60:02}:{i % 60:02}.000 --> 00:{i // 60 % 60:02}:{i % 60:02}.500\n{t}\n\n"
                for i, t in enumerate(texts)
            )
        ).encode()
    if ext == ".po":
        return (
            'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
            + "".join(f'msgid "{t}"\nmsgstr ""\n\n' for t in texts)
        ).encode()
    if ext == ".xliff":
        units = "".join(f'<trans-unit id="{i}"><source>{escape(t)}</source></trans-unit>' for i, t in enumerate(texts))
        return (
            '<?xml version="1.0"?><xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
            f'<file source-language="en" datatype="plaintext" original="a"><body>{units}</body></file>'
            "</xliff>"
        ).encode()
    buf = io.BytesIO()
    if ext == ".docx":
        import docx

        d = docx.Document()
        for t in texts:
            d.add_paragraph(t)
        d.save(buf)
    elif ext == ".pptx":
        import pptx

        prs = pptx.Presentation()
        frame = prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_textbox(0, 0, 100, 100).text_frame
        frame.text = texts[0]
        for t in texts[1:]:
            frame.add_paragraph().text = t
        prs.save(buf)
    elif ext == ".xlsx":
        import openpyxl

        book = openpyxl.Workbook()
        for t in texts:
            book.active.append([t])
        book.save(buf)
    elif ext == ".epub":
        from ebooklib import epub

        book = epub.EpubBook()
        book.set_identifier("id1")
        book.set_title("Book")
        book.set_language("en")
        chapter = epub.EpubHtml(title="One", file_name="one.xhtml", lang="en")
        chapter.content = "<html><body>" + "".join(f"<p>{escape(t)}</p>" for t in texts) + "</body></html>"
        book.add_item(chapter)
        book.toc = [chapter]
        book.spine = ["nav", chapter]
        book.add_item(epub.EpubNcx())
        book.add_item(epub.EpubNav())
        epub.write_epub(buf, book)
    elif ext == ".pdf":
        return pdf_paragraphs(texts)
    else:
        raise ValueError(ext)
    return buf.getvalue()


ARCHIVES = (".docx", ".pptx", ".xlsx", ".epub", ".odt", ".odp", ".ods")
# The member each archive format's library reads its words from.
MAIN_MEMBER = {
    ".docx": "word/document.xml",
    ".pptx": "ppt/slides/slide1.xml",
    ".xlsx": "xl/worksheets/sheet1.xml",
    ".epub": "EPUB/one.xhtml",
    ".odt": "content.xml",
    ".odp": "content.xml",
    ".ods": "content.xml",
}


def rezip(data: bytes, replace: dict[str, bytes] | None = None, add: dict[str, bytes] | None = None) -> bytes:
    """The archive with some members' contents replaced and others added (deflated)."""
    replace, add = replace or {}, add or {}
    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            archive.writestr(copy.copy(info), replace.get(info.filename, source.read(info)))
        for name, content in add.items():
            archive.writestr(name, content)
    return out.getvalue()


def with_main(ext: str, data: bytes, transform) -> bytes:
    """The archive with its main member passed through transform(bytes) -> bytes."""
    name = MAIN_MEMBER[ext]
    return rezip(data, {name: transform(zipfile.ZipFile(io.BytesIO(data)).read(name))})


def low_entropy(size: int) -> bytes:
    """Bytes that compress about 30 to 60 times: far from a bomb's ratio, but many of them fit in a small file."""
    return os.urandom(size).translate(bytes([ord("b") if i < 2 else ord("a") for i in range(256)]))


BILLION_LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10))
    + "]>"
)
EXTERNAL_ENTITY = '<!DOCTYPE r [<!ENTITY secret SYSTEM "file:///etc/passwd">]>'


def with_doctype(xml: bytes, doctype: str, reference: str) -> bytes:
    """XML with a doctype put after its declaration and an entity reference put in its first paragraph's text."""
    head, sep, rest = xml.partition(b"?>")
    if not sep:
        head, rest = b"", xml
    else:
        head += sep
    return head + doctype.encode() + rest.replace(b"Hello", f"Hello &{reference};".encode(), 1)


def pdf_paragraphs(texts: list[str], image: bool = False, pages: int = 1) -> bytes:
    """A PDF with a text layer: each text a block of its own (its words wrapped at 60 characters), blocks well
    apart, on `pages` pages (the texts shared out in turn, more pages where they do not fit); with a red image and a
    rule on the first page."""
    import textwrap

    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    drawing = canvas.Canvas(buf, pagesize=(595, 842))
    for page in range(pages):
        y = 780.0
        if image and page == 0:
            from PIL import Image

            drawing.drawImage(ImageReader(Image.new("RGB", (40, 30), (200, 30, 30))), 400, 700, 80, 60)
            drawing.line(72, 690, 300, 690)
        for text in texts[page::pages]:
            if y < 100:  # the page is full: the next block starts a new one
                drawing.showPage()
                y = 780.0
            block = drawing.beginText(72, y)
            block.setFont("Helvetica", 11)
            for line in textwrap.wrap(text, 60) or [""]:
                block.textLine(line)
                y -= 13
            drawing.drawText(block)
            y -= 30
        drawing.showPage()
    drawing.save()
    return buf.getvalue()


def pdf_bomb(expanded: int) -> bytes:
    """A one-page PDF holding a compressed stream that expands to `expanded` bytes (of a few kilobytes on disk)."""
    import zlib

    import pikepdf

    pdf = pikepdf.open(io.BytesIO(pdf_paragraphs(["Hello world."])))
    bomb = pikepdf.Stream(pdf, zlib.compress(b"\0" * expanded, 9))
    bomb.Filter = pikepdf.Name.FlateDecode
    pdf.pages[0].obj.Bomb = pdf.make_indirect(bomb)
    out = io.BytesIO()
    pdf.save(out)
    return out.getvalue()


def pdf_pages(count: int) -> bytes:
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    drawing = canvas.Canvas(buf)
    for _ in range(count):
        drawing.showPage()
    drawing.save()
    return buf.getvalue()


# Documents whose structure a translation must keep, shared by the format tests (tests/unit) and the API's
# (tests/server).

HTML = b"""<!DOCTYPE html>
<html lang="en"><head><title>My page</title><script>var a = "keep me";</script></head>
<body><h1 class="t">Welcome</h1>
<p id="p1">Press <b>Save</b> to keep <a href="/x" title="Go there">your changes</a>.<br>Next line <code>x = 1</code>.</p>
<div>Outer text<p>Inner <em>para</em></p>tail text</div>
<img src="a.png" alt="A cat"><pre>keep   this</pre><p translate="no">Brand</p></body></html>"""  # noqa: E501 - a document

PO = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\\n"

#, python-format
msgid "Hello %(name)s, you have {count} messages"
msgstr ""

msgid "One file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

msgid "Done"
msgstr "Fertig"
"""

XLIFF12 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
 <file source-language="en" datatype="plaintext" original="a.txt"><body>
  <trans-unit id="1"><source>Press <g id="b">Save</g> now<x id="br"/></source></trans-unit>
  <trans-unit id="2" translate="no"><source>Brand</source></trans-unit>
 </body></file></xliff>"""
XLIFF20 = b"""<?xml version="1.0" encoding="UTF-8"?>
<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:document:2.0" srcLang="en">
 <file id="f1"><unit id="u1"><segment><source>Open <pc id="1">the file</pc><ph id="2"/></source></segment></unit>
 </file></xliff>"""

ODT_BODY = (
    '<text:h text:outline-level="1">Quarterly report</text:h>'
    '<text:p>Press <text:span text:style-name="B">Save</text:span> to keep <text:a xlink:href="http://a.b/">'
    'your changes</text:a>.<text:line-break/>Next<text:s text:c="2"/>line<text:note text:id="n1" '
    'text:note-class="footnote"><text:note-citation>1</text:note-citation><text:note-body><text:p>A note.'
    "</text:p></text:note-body></text:note></text:p>"
    '<text:list><text:list-item><text:p>First <text:span text:style-name="I">item</text:span></text:p>'
    "</text:list-item></text:list>"
    '<table:table table:name="T"><table:table-row><table:table-cell office:value-type="string"><text:p>'
    'cell text</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="42">'
    "<text:p>42 apples</text:p></table:table-cell></table:table-row></table:table>"
    '<text:p><draw:frame draw:name="img"><draw:image xlink:href="Pictures/a.png"/><svg:title>A cat'
    "</svg:title></draw:frame>Caption text</text:p>"
)
ODP_BODY = (
    '<draw:page draw:name="one"><draw:frame presentation:class="title"><draw:text-box><text:p>Quarterly '
    "results</text:p></draw:text-box></draw:frame><draw:frame><draw:text-box><text:p>Sales grew <text:span "
    'text:style-name="B">strongly</text:span></text:p></draw:text-box></draw:frame><presentation:notes>'
    "<draw:frame><draw:text-box><text:p>Say hello</text:p></draw:text-box></draw:frame></presentation:notes>"
    "</draw:page>"
)
ODS_BODY = (
    '<table:table table:name="Data"><table:table-row><table:table-cell office:value-type="string"><text:p>Name'
    '</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="42"><text:p>42'
    '</text:p></table:table-cell><table:table-cell table:formula="of:=[.B1]*2" office:value-type="float" '
    'office:value="84"><text:p>84</text:p></table:table-cell><table:table-cell office:value-type="date" '
    'office:date-value="2024-12-05"><text:p>Dec 5, 2024</text:p></table:table-cell></table:table-row>'
    '<table:table-row><table:table-cell office:value-type="string"><text:p>Total <text:span '
    'text:style-name="B">sum</text:span></text:p><office:annotation><text:p>Checked by Anna</text:p>'
    "</office:annotation></table:table-cell></table:table-row></table:table>"
)
ODF_SAMPLES = {".odt": ODT_BODY, ".odp": ODP_BODY, ".ods": ODS_BODY}


def odf_shape(el):
    """The element tree with attributes, without text: what translation must not change."""
    return [(c.tag, dict(c.attrib), odf_shape(c)) for c in el if isinstance(c.tag, str)]


def docx_structured() -> bytes:
    """A heading with a bold run, a 2x2 table, a paragraph with a link, and a header."""
    import docx
    from docx.oxml.ns import qn

    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = "Header words"
    p = d.add_paragraph("Press ", style="Heading 1")
    p.add_run("Save").bold = True
    p.add_run(" to keep your changes.")
    table = d.add_table(rows=2, cols=2)
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            cell.text = f"cell {r} {c}"
    link = d.add_paragraph("See ")
    part_rel = d.part.relate_to("http://example.com", docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    h = link._p.makeelement(qn("w:hyperlink"), {qn("r:id"): part_rel})
    run_el = link.add_run("the site")._r
    h.append(run_el)
    link._p.append(h)
    link.add_run(" now.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def docx_shape(d):
    """A .docx's paragraphs (style, bold and italic runs, links) and its tables' rows: what translation keeps."""
    from docx.oxml.ns import qn

    body = [
        (p.style.name, [(r.bold, r.italic) for r in p.runs], len(p._p.findall(qn("w:hyperlink")))) for p in d.paragraphs
    ]
    tables = [[len(row.cells) for row in t.rows] for t in d.tables]
    return body, tables


def docx_three_runs() -> bytes:
    """One paragraph: a bold run, an italic run and a link among plain ones."""
    import docx
    from docx.oxml.ns import qn

    d = docx.Document()
    p = d.add_paragraph("Press ")
    p.add_run("Save").bold = True
    p.add_run(" or ")
    p.add_run("cancel").italic = True
    p.add_run(" and see ")
    rel = d.part.relate_to("http://example.com", docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    link = p._p.makeelement(qn("w:hyperlink"), {qn("r:id"): rel})
    link.append(p.add_run("the site")._r)
    p._p.append(link)
    p.add_run(".")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def docx_formatting(data: bytes) -> tuple[list, list[str]]:
    """The first paragraph's runs (text, bold, italic) and its links' words."""
    import docx
    from docx.oxml.ns import qn

    p = docx.Document(io.BytesIO(data)).paragraphs[0]
    return (
        [(r.text, r.bold, r.italic) for r in p.runs],
        [link.xpath("string()") for link in p._p.findall(qn("w:hyperlink"))],
    )
