"""Every document format read, translated by a stand-in that keeps markers (upper-cases the words) or one that
drops them, written back, and opened again with the same library: the structure must be the same."""

from __future__ import annotations

import io
import re

import docx
import openpyxl
import polib
import pptx
import pytest
import srt
import webvtt
from docx.oxml.ns import qn
from ebooklib import epub
from lxml import etree, html as lxml_html

from hymt.documents import FORMATS, extension, finish, open_document
from hymt.documents.inline import MARKER
from hymt.errors import UnsupportedFormat


_SPLIT = re.compile(r"(<\s*/?\s*s\d+\s*/?\s*>)")


def keep_markers(texts: list[str]) -> list[str]:
    return ["".join(p if MARKER.fullmatch(p) else p.upper() for p in _SPLIT.split(t)) for t in texts]


def drop_markers(texts: list[str]) -> list[str]:
    return [MARKER.sub("", t).upper() for t in texts]


def run(ext: str, data: bytes, translate=keep_markers, target: str = "de"):
    prepared = open_document(ext, data, target)
    return finish(prepared, translate(prepared.texts))


def test_unsupported_extension_lists_formats():
    with pytest.raises(UnsupportedFormat) as err:
        extension("report.pdf")
    assert err.value.status == 415 and ".docx" in err.value.message and ".epub" in err.value.message
    assert extension("../../etc/A.DOCX") == ".docx"


def test_text_keeps_lines():
    out = run(".txt", "First line.\n\n  Second line\r\n42\n".encode())
    assert out.data.decode() == "FIRST LINE.\n\n  SECOND LINE\r\n42\n" and out.segments == 2


def test_markdown_keeps_code_links_and_structure():
    src = ("# Title *x*\n\nPress **Save** to keep [changes](http://a.b/c \"t\") and `code`\n  more.\n\n"
           "```python\nprint('hi')\n```\n\n- item *a*\n\n| a | b |\n|---|---|\n| one | `two` |\n")
    out = run(".md", src.encode()).data.decode()
    assert out == ("# TITLE *X*\n\nPRESS **SAVE** TO KEEP [CHANGES](http://a.b/c \"t\") AND `code` MORE.\n\n"
                   "```python\nprint('hi')\n```\n\n- ITEM *A*\n\n| A | B |\n|---|---|\n| ONE | `two` |\n")


def test_markdown_front_matter_untouched():
    out = run(".md", b"---\ntitle: My post\ntags: [a, b]\n---\n\nHello *there*.\n").data.decode()
    assert out == "---\ntitle: My post\ntags: [a, b]\n---\n\nHELLO *THERE*.\n"


HTML = b"""<!DOCTYPE html>
<html lang="en"><head><title>My page</title><script>var a = "keep me";</script></head>
<body><h1 class="t">Welcome</h1>
<p id="p1">Press <b>Save</b> to keep <a href="/x" title="Go there">your changes</a>.<br>Next line <code>x = 1</code>.</p>
<div>Outer text<p>Inner <em>para</em></p>tail text</div>
<img src="a.png" alt="A cat"><pre>keep   this</pre><p translate="no">Brand</p></body></html>"""


def _shape(el):
    return [(c.tag, dict(c.attrib), _shape(c)) for c in el if isinstance(c.tag, str)]


def test_html_sentence_is_one_segment_and_tags_come_back():
    prepared = open_document(".html", HTML, "de")
    assert "Press <s1>Save</s1> to keep <s2>your changes</s2>.<s3/>Next line <s4/>." in prepared.texts
    out = run(".html", HTML)
    before, after = lxml_html.fromstring(HTML), lxml_html.fromstring(out.data)
    for el in before.iter():
        if el.get("alt") or el.get("title"):
            el.set("alt" if el.get("alt") else "title", (el.get("alt") or el.get("title")).upper())
    before.set("lang", "de")
    assert _shape(after) == _shape(before)
    assert after.get_element_by_id("p1").text_content() == "PRESS SAVE TO KEEP YOUR CHANGES.NEXT LINE x = 1."
    assert b'var a = "keep me";' in out.data and b"keep   this" in out.data and b">Brand<" in out.data
    assert out.markup_fallbacks == 0 and out.data.startswith(b"<!DOCTYPE html>")


def test_html_dropped_markers_fall_back_without_losing_voids():
    out = run(".html", HTML, translate=drop_markers)
    p1 = lxml_html.fromstring(out.data).get_element_by_id("p1")
    assert [c.tag for c in p1] == ["br", "code"] and p1.text.startswith("PRESS SAVE TO KEEP YOUR CHANGES")
    assert out.markup_fallbacks == 2  # the paragraph and the one with <em>


def test_html_encodings_and_no_invented_doctype():
    out = run(".html", "<html><body><p>Grüße aus Köln</p></body></html>".encode()).data
    assert out == "<html lang=\"de\"><body><p>GRÜSSE AUS KÖLN</p></body></html>".encode()
    latin = '<html><head><meta charset="windows-1252"></head><body><p>Grüße</p></body></html>'.encode("cp1252")
    assert "<p>GRÜSSE</p>".encode("cp1252") in run(".html", latin).data
    assert run(".html", b"  ").data == b"  "


def _docx() -> bytes:
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
    part_rel = d.part.relate_to("http://example.com", docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK,
                                is_external=True)
    h = link._p.makeelement(qn("w:hyperlink"), {qn("r:id"): part_rel})
    run_el = link.add_run("the site")._r
    h.append(run_el)
    link._p.append(h)
    link.add_run(" now.")
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def _docx_shape(d):
    body = [(p.style.name, [(r.bold, r.italic) for r in p.runs], len(p._p.findall(qn("w:hyperlink"))))
            for p in d.paragraphs]
    tables = [[len(row.cells) for row in t.rows] for t in d.tables]
    return body, tables


def test_docx_keeps_runs_styles_tables_links_headers():
    data = _docx()
    out = run(".docx", data)
    before, after = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(out.data))
    assert _docx_shape(after) == _docx_shape(before)
    assert [r.text for r in after.paragraphs[0].runs] == ["PRESS ", "SAVE", " TO KEEP YOUR CHANGES."]
    assert after.tables[0].cell(1, 1).text == "CELL 1 1"
    assert after.sections[0].header.paragraphs[0].text == "HEADER WORDS"
    assert after.paragraphs[-1].text == "SEE THE SITE NOW." and out.markup_fallbacks == 0


def test_docx_fallback_keeps_the_paragraph_whole():
    out = run(".docx", _docx(), translate=drop_markers)
    after = docx.Document(io.BytesIO(out.data))
    assert after.paragraphs[0].text == "PRESS SAVE TO KEEP YOUR CHANGES." and out.markup_fallbacks == 2
    assert after.paragraphs[0].style.name == "Heading 1"


def test_pptx_keeps_shapes_runs_tables_and_notes():
    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Quarterly results"
    body = slide.placeholders[1].text_frame
    body.text = "Sales grew"
    r = body.paragraphs[0].add_run()
    r.text = " strongly"
    r.font.bold = True
    table = slide.shapes.add_table(2, 2, 0, 0, 100, 100).table
    table.cell(1, 0).text = "Total"
    slide.notes_slide.notes_text_frame.text = "Say hello to everyone"
    buf = io.BytesIO()
    prs.save(buf)
    out = run(".pptx", buf.getvalue())
    after = pptx.Presentation(io.BytesIO(out.data)).slides[0]
    assert after.shapes.title.text == "QUARTERLY RESULTS"
    runs = after.placeholders[1].text_frame.paragraphs[0].runs
    assert [(x.text, x.font.bold) for x in runs] == [("SALES GREW", None), (" STRONGLY", True)]
    tables = [s for s in after.shapes if s.has_table]
    assert tables[0].table.cell(1, 0).text == "TOTAL" and len(tables[0].table.rows) == 2
    assert after.notes_slide.notes_text_frame.text == "SAY HELLO TO EVERYONE"


def test_pptx_spell_check_flags_do_not_split_a_sentence():
    prs = pptx.Presentation()
    frame = prs.slides.add_slide(prs.slide_layouts[1]).placeholders[1].text_frame
    frame.text = "Teh "
    frame.paragraphs[0].runs[0].font._rPr.set("err", "1")
    frame.paragraphs[0].add_run().text = "quick fox"
    buf = io.BytesIO()
    prs.save(buf)
    prepared = open_document(".pptx", buf.getvalue(), "de")
    assert prepared.texts == ["Teh quick fox"]


def test_xlsx_text_cells_only():
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Data"
    sheet.append(["Name", 42, "=SUM(B1:B1)"])
    sheet["A1"].font = openpyxl.styles.Font(bold=True)
    buf = io.BytesIO()
    book.save(buf)
    after = openpyxl.load_workbook(io.BytesIO(run(".xlsx", buf.getvalue()).data))["Data"]
    assert [c.value for c in after[1]] == ["NAME", 42, "=SUM(B1:B1)"] and after["A1"].font.bold


def test_srt_and_vtt_keep_timings():
    subs = "1\n00:00:01,000 --> 00:00:02,500\nHello there\nmy friend\n\n2\n00:00:03,000 --> 00:00:04,000\n42\n\n"
    after = list(srt.parse(run(".srt", subs.encode()).data.decode()))
    before = list(srt.parse(subs))
    assert [(s.index, s.start, s.end) for s in after] == [(s.index, s.start, s.end) for s in before]
    assert after[0].content == "HELLO THERE\nMY FRIEND" and after[1].content == "42"
    vtt = "WEBVTT\n\nNOTE keep\n\nintro\n00:00:01.000 --> 00:00:02.000 align:start\nGood morning\n"
    out = run(".vtt", vtt.encode()).data.decode()
    caption = webvtt.from_buffer(io.StringIO(out)).captions[0]
    assert (caption.identifier, caption.start, caption.end, caption.text) == ("intro", "00:00:01.000",
                                                                              "00:00:02.000", "GOOD MORNING")
    assert "NOTE keep" in out and "align:start" in out


PO = '''msgid ""
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
'''


def test_po_fills_msgstr_plurals_and_keeps_placeholders():
    prepared = open_document(".po", PO.encode(), "de")
    assert "Hello <s1/>, you have <s2/> messages" in prepared.texts
    after = polib.pofile(finish(prepared, keep_markers(prepared.texts)).data.decode())
    assert after.metadata["Language"] == "de"
    first, plural, done = after
    assert first.msgstr == "HELLO %(name)s, YOU HAVE {count} MESSAGES" and "fuzzy" in first.flags
    assert plural.msgstr_plural == {0: "ONE FILE", 1: "%d FILES"}
    assert done.msgstr == "Fertig" and "fuzzy" not in done.flags
    lost = polib.pofile(run(".po", PO.encode(), translate=drop_markers).data.decode())
    assert lost[0].msgstr == "" and lost[1].msgstr_plural == {0: "", 1: ""}


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


def test_xliff_12_and_20_targets_and_states():
    ns = "urn:oasis:names:tc:xliff:document:1.2"
    root = etree.fromstring(run(".xliff", XLIFF12).data)
    assert root.find(f"{{{ns}}}file").get("target-language") == "de"
    unit, skipped = root.iter(f"{{{ns}}}trans-unit")
    target = unit.find(f"{{{ns}}}target")
    assert target.get("state") == "needs-review-translation"
    assert etree.tostring(target, encoding="unicode").split(">", 1)[1].startswith(
        f'PRESS <g id="b">SAVE</g> NOW<x id="br"/>')
    assert unit.find(f"{{{ns}}}source").xpath("string()") == "Press Save now"
    assert skipped.find(f"{{{ns}}}target") is None
    ns = "urn:oasis:names:tc:xliff:document:2.0"
    root = etree.fromstring(run(".xlf", XLIFF20).data)
    segment = root.find(f".//{{{ns}}}segment")
    assert root.get("trgLang") == "de" and segment.get("state") == "translated"
    target = segment.find(f"{{{ns}}}target")
    assert [c.get("id") for c in target] == ["1", "2"] and target.xpath("string()") == "OPEN THE FILE"


def test_epub_chapters_translated_and_structure_kept():
    book = epub.EpubBook()
    book.set_identifier("id1")
    book.set_title("Book")
    book.set_language("en")
    chapter = epub.EpubHtml(title="One", file_name="one.xhtml", lang="en")
    chapter.content = "<html><body><h1>Chapter one</h1><p>It was a <i>dark</i> night.</p></body></html>"
    book.add_item(chapter)
    book.toc = [chapter]
    book.spine = ["nav", chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    buf = io.BytesIO()
    epub.write_epub(buf, book)
    out = run(".epub", buf.getvalue())
    after = epub.read_epub(io.BytesIO(out.data))
    (item,) = [i for i in after.get_items() if i.file_name == "one.xhtml"]
    body = etree.fromstring(item.get_content())
    ns = "{http://www.w3.org/1999/xhtml}"
    assert body.find(f".//{ns}h1").text == "CHAPTER ONE"
    p = body.find(f".//{ns}p")
    assert p.text == "IT WAS A " and p[0].tag == f"{ns}i" and p[0].text == "DARK"
    assert after.get_metadata("DC", "language")[0][0] == "de"
    assert [link.title for link in after.toc] == ["ONE"]


def test_every_format_has_a_reader():
    assert set(FORMATS) >= {".txt", ".md", ".html", ".srt", ".vtt", ".docx", ".pptx", ".xlsx", ".po", ".pot",
                            ".xliff", ".epub"}


def _with_footnote(data: bytes) -> bytes:
    """A .docx with a footnotes part added as Word writes it (python-docx has no API to make one)."""
    import zipfile

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    footnotes = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{w}">'
                 '<w:footnote w:id="1"><w:p><w:r><w:t>A note at the bottom.</w:t></w:r></w:p></w:footnote>'
                 '</w:footnotes>')
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            content = src.read(item)
            if item.filename == "[Content_Types].xml":
                content = content.replace(b"</Types>", b'<Override PartName="/word/footnotes.xml" ContentType='
                                          b'"application/vnd.openxmlformats-officedocument.wordprocessingml.'
                                          b'footnotes+xml"/></Types>')
            elif item.filename == "word/_rels/document.xml.rels":
                content = content.replace(b"</Relationships>", b'<Relationship Id="rIdFn" Type="http://schemas.'
                                          b'openxmlformats.org/officeDocument/2006/relationships/footnotes" '
                                          b'Target="footnotes.xml"/></Relationships>')
            dst.writestr(item, content)
        dst.writestr("word/footnotes.xml", footnotes)
    return out.getvalue()


def test_docx_footnotes_translated():
    import zipfile

    out = run(".docx", _with_footnote(_docx()))
    notes = zipfile.ZipFile(io.BytesIO(out.data)).read("word/footnotes.xml").decode()
    assert "A NOTE AT THE BOTTOM." in notes
    assert docx.Document(io.BytesIO(out.data)).paragraphs[0].text == "PRESS SAVE TO KEEP YOUR CHANGES."


def test_translate_texts_reports_progress_and_stops_when_asked(engine):
    import threading

    from hymt.documents.translate import translate_texts
    from hymt.errors import Cancelled
    from hymt.languages import resolve
    from hymt.prompts import Sampling

    seen = []
    texts = ["Press <s1>Save</s1>.", "Second line. With two sentences.", "Third."]
    out = translate_texts(engine, texts, resolve("en"), resolve("de"), Sampling(greedy=True),
                          lambda done, total: seen.append((done, total)))
    assert len(out) == 3 and seen[-1] == (3, 3) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    stop = threading.Event()
    stop.set()
    with pytest.raises(Cancelled):
        translate_texts(engine, texts, None, resolve("de"), Sampling(greedy=True), stop=stop)
