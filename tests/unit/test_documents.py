"""Every document format read, translated by a stand-in that keeps markers (upper-cases the words) or one that
drops them, written back, and opened again with the same library: the structure must be the same."""

from __future__ import annotations

import asyncio
import io
import re

import docx
import openpyxl
import polib
import pptx
import pytest
import srt
import webvtt
from ebooklib import epub
from lxml import etree, html as lxml_html

import samples
from hymt.documents import FORMATS, extension, finish, open_document
from hymt.documents.inline import MARKER
from hymt.errors import GenerationError, UnsupportedFormat
from hymt.family import HUNYUAN_MT_7B

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
        extension("report.rtf")
    assert err.value.status == 415 and ".docx" in err.value.message and ".epub" in err.value.message
    assert extension("../../etc/A.DOCX") == ".docx"


def test_a_translation_missing_from_the_answer_is_an_explicit_error_not_a_crash():
    prepared = open_document(".txt", b"One.\nTwo.\n", "de")
    with pytest.raises(GenerationError, match="1 translations came back for 2 segments") as failed:
        finish(prepared, ["EINS."])
    assert failed.value.status == 500


def test_text_keeps_lines():
    out = run(".txt", b"First line.\n\n  Second line\r\n42\n")
    assert out.data.decode() == "FIRST LINE.\n\n  SECOND LINE\r\n42\n" and out.segments == 2


def test_markdown_keeps_code_links_and_structure():
    src = (
        '# Title *x*\n\nPress **Save** to keep [changes](http://a.b/c "t") and `code`\n  more.\n\n'
        "```python\nprint('hi')\n```\n\n- item *a*\n\n| a | b |\n|---|---|\n| one | `two` |\n"
    )
    out = run(".md", src.encode()).data.decode()
    assert out == (
        '# TITLE *X*\n\nPRESS **SAVE** TO KEEP [CHANGES](http://a.b/c "t") AND `code` MORE.\n\n'
        "```python\nprint('hi')\n```\n\n- ITEM *A*\n\n| A | B |\n|---|---|\n| ONE | `two` |\n"
    )


def test_markdown_front_matter_untouched():
    out = run(".md", b"---\ntitle: My post\ntags: [a, b]\n---\n\nHello *there*.\n").data.decode()
    assert out == "---\ntitle: My post\ntags: [a, b]\n---\n\nHELLO *THERE*.\n"


def _shape(el):
    return [(c.tag, dict(c.attrib), _shape(c)) for c in el if isinstance(c.tag, str)]


def test_html_sentence_is_one_segment_and_tags_come_back():
    prepared = open_document(".html", samples.HTML, "de")
    assert "Press <s1>Save</s1> to keep <s2>your changes</s2>.<s3/>Next line <s4/>." in prepared.texts
    out = run(".html", samples.HTML)
    before, after = lxml_html.fromstring(samples.HTML), lxml_html.fromstring(out.data)
    for el in before.iter():
        if el.get("alt") or el.get("title"):
            el.set("alt" if el.get("alt") else "title", (el.get("alt") or el.get("title")).upper())
    before.set("lang", "de")
    assert _shape(after) == _shape(before)
    assert after.get_element_by_id("p1").text_content() == "PRESS SAVE TO KEEP YOUR CHANGES.NEXT LINE x = 1."
    assert b'var a = "keep me";' in out.data and b"keep   this" in out.data and b">Brand<" in out.data
    assert out.markup_fallbacks == 0 and out.data.startswith(b"<!DOCTYPE html>")


def test_html_dropped_markers_fall_back_without_losing_voids():
    out = run(".html", samples.HTML, translate=drop_markers)
    p1 = lxml_html.fromstring(out.data).get_element_by_id("p1")
    assert [c.tag for c in p1] == ["br", "code"] and p1.text.startswith("PRESS SAVE TO KEEP YOUR CHANGES")
    assert out.markup_fallbacks == 2  # the paragraph and the one with <em>


def test_html_encodings_and_no_invented_doctype():
    out = run(".html", "<html><body><p>Grüße aus Köln</p></body></html>".encode()).data
    assert out == '<html lang="de"><body><p>GRÜSSE AUS KÖLN</p></body></html>'.encode()
    latin = '<html><head><meta charset="windows-1252"></head><body><p>Grüße</p></body></html>'.encode("cp1252")
    assert "<p>GRÜSSE</p>".encode("cp1252") in run(".html", latin).data
    assert run(".html", b"  ").data == b"  "


def test_docx_keeps_runs_styles_tables_links_headers():
    data = samples.docx_structured()
    out = run(".docx", data)
    before, after = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(out.data))
    assert samples.docx_shape(after) == samples.docx_shape(before)
    assert [r.text for r in after.paragraphs[0].runs] == ["PRESS ", "SAVE", " TO KEEP YOUR CHANGES."]
    assert after.tables[0].cell(1, 1).text == "CELL 1 1"
    assert after.sections[0].header.paragraphs[0].text == "HEADER WORDS"
    assert after.paragraphs[-1].text == "SEE THE SITE NOW." and out.markup_fallbacks == 0


def test_docx_fallback_keeps_the_paragraph_whole():
    out = run(".docx", samples.docx_structured(), translate=drop_markers)
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
    assert (caption.identifier, caption.start, caption.end, caption.text) == (
        "intro",
        "00:00:01.000",
        "00:00:02.000",
        "GOOD MORNING",
    )
    assert "NOTE keep" in out and "align:start" in out


def test_po_fills_msgstr_plurals_and_keeps_placeholders():
    prepared = open_document(".po", samples.PO.encode(), "de")
    assert "Hello <s1/>, you have <s2/> messages" in prepared.texts
    after = polib.pofile(finish(prepared, keep_markers(prepared.texts)).data.decode())
    assert after.metadata["Language"] == "de"
    first, plural, done = after
    assert first.msgstr == "HELLO %(name)s, YOU HAVE {count} MESSAGES" and "fuzzy" in first.flags
    assert plural.msgstr_plural == {0: "ONE FILE", 1: "%d FILES"}
    assert done.msgstr == "Fertig" and "fuzzy" not in done.flags
    lost = polib.pofile(run(".po", samples.PO.encode(), translate=drop_markers).data.decode())
    assert lost[0].msgstr == "" and lost[1].msgstr_plural == {0: "", 1: ""}


def test_xliff_12_and_20_targets_and_states():
    ns = "urn:oasis:names:tc:xliff:document:1.2"
    root = etree.fromstring(run(".xliff", samples.XLIFF12).data)
    assert root.find(f"{{{ns}}}file").get("target-language") == "de"
    unit, skipped = root.iter(f"{{{ns}}}trans-unit")
    target = unit.find(f"{{{ns}}}target")
    assert target.get("state") == "needs-review-translation"
    assert (
        etree.tostring(target, encoding="unicode")
        .split(">", 1)[1]
        .startswith('PRESS <g id="b">SAVE</g> NOW<x id="br"/>')
    )
    assert unit.find(f"{{{ns}}}source").xpath("string()") == "Press Save now"
    assert skipped.find(f"{{{ns}}}target") is None
    ns = "urn:oasis:names:tc:xliff:document:2.0"
    root = etree.fromstring(run(".xlf", samples.XLIFF20).data)
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
    assert set(FORMATS) >= {
        ".txt",
        ".md",
        ".html",
        ".srt",
        ".vtt",
        ".docx",
        ".pptx",
        ".xlsx",
        ".po",
        ".pot",
        ".xliff",
        ".epub",
    }


def _with_footnote(data: bytes) -> bytes:
    """A .docx with a footnotes part added as Word writes it (python-docx has no API to make one)."""
    import zipfile

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    footnotes = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes xmlns:w="{w}">'
        '<w:footnote w:id="1"><w:p><w:r><w:t>A note at the bottom.</w:t></w:r></w:p></w:footnote>'
        "</w:footnotes>"
    )
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for item in src.infolist():
            content = src.read(item)
            if item.filename == "[Content_Types].xml":
                content = content.replace(
                    b"</Types>",
                    b'<Override PartName="/word/footnotes.xml" ContentType='
                    b'"application/vnd.openxmlformats-officedocument.wordprocessingml.'
                    b'footnotes+xml"/></Types>',
                )
            elif item.filename == "word/_rels/document.xml.rels":
                content = content.replace(
                    b"</Relationships>",
                    b'<Relationship Id="rIdFn" Type="http://schemas.'
                    b'openxmlformats.org/officeDocument/2006/relationships/footnotes" '
                    b'Target="footnotes.xml"/></Relationships>',
                )
            dst.writestr(item, content)
        dst.writestr("word/footnotes.xml", footnotes)
    return out.getvalue()


def test_docx_footnotes_translated():
    import zipfile

    out = run(".docx", _with_footnote(samples.docx_structured()))
    notes = zipfile.ZipFile(io.BytesIO(out.data)).read("word/footnotes.xml").decode()
    assert "A NOTE AT THE BOTTOM." in notes
    assert docx.Document(io.BytesIO(out.data)).paragraphs[0].text == "PRESS SAVE TO KEEP YOUR CHANGES."


def _odf_words(root) -> list[str]:
    return [p.xpath("string()") for p in root.iter(f"{{{samples.NS['text']}}}p", f"{{{samples.NS['text']}}}h")]


@pytest.mark.parametrize("ext", list(samples.ODF_SAMPLES))
def test_odf_round_trip_keeps_structure(ext):
    import zipfile

    data = samples.odf(
        ext, samples.ODF_SAMPLES[ext], master="<style:header><text:p>Header words</text:p></style:header>", picture=True
    )
    out = run(ext, data)
    assert out.markup_fallbacks == 0 and out.report()["markup_segments"]["markers"] > 0
    before, after = zipfile.ZipFile(io.BytesIO(data)), zipfile.ZipFile(io.BytesIO(out.data))
    first = after.infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    assert after.namelist() == before.namelist() and after.read("Pictures/a.png") == before.read("Pictures/a.png")
    for name in ("content.xml", "styles.xml"):
        old, new = etree.fromstring(before.read(name)), etree.fromstring(after.read(name))
        assert samples.odf_shape(new) == samples.odf_shape(old)
        # Words upper-cased where they were translated; numbers, dates and formula results as they were.
        expected = [w if w in ("42", "84", "42 apples", "Dec 5, 2024", "1") else w.upper() for w in _odf_words(old)]
        assert _odf_words(new) == expected
    assert etree.fromstring(after.read("meta.xml")).find(".//{http://purl.org/dc/elements/1.1/}language").text == "de"


def test_odt_markers_and_the_safe_form():
    prepared = open_document(".odt", samples.odf(".odt", samples.ODT_BODY), "de")
    assert "Press <s1>Save</s1> to keep <s2>your changes</s2>.<s3/>Next<s4/>line<s5/>" in prepared.texts
    assert {"A note.", "A cat", "<s1/>Caption text"} <= set(prepared.texts)
    assert "42 apples" not in prepared.texts
    out = run(".odt", samples.odf(".odt", samples.ODT_BODY), translate=drop_markers)
    import zipfile

    content = etree.fromstring(zipfile.ZipFile(io.BytesIO(out.data)).read("content.xml"))
    text = samples.NS["text"]
    p = content.findall(f".//{{{text}}}p")[0]
    # The safe form: the words in the paragraph's own formatting, then every break, space and note kept.
    assert [etree.QName(c).localname for c in p] == ["line-break", "s", "note"]
    assert p.text.startswith("PRESS SAVE TO KEEP YOUR CHANGES") and out.markup_fallbacks == 3
    assert p.find(f".//{{{text}}}note-body/{{{text}}}p").text == "A NOTE."


class Scripted:
    """A stand-in translator that builds each prompt as the engine does and answers by a rule: markers kept only
    when the prompt is the stricter one (keep="strict"), never (keep="never"), and runs alone answered or not."""

    def __init__(self, keep: str, runs_answered: bool = True):
        self.keep, self.runs_answered, self.prompts = keep, runs_answered, []

    async def __call__(self, texts, on_text=None):
        from hymt import prompts
        from hymt.languages import resolve

        answers = []
        for text in texts:
            message = prompts.segment_message(
                HUNYUAN_MT_7B, resolve("en"), resolve("de"), text, [], formatted=prompts.has_markers(text)
            )
            self.prompts.append(message)
            words = text.removeprefix(prompts.STRICT_MARK)
            if not prompts.has_markers(words):
                answers.append(words.upper() if self.runs_answered else "")
            elif self.keep == "strict" and "exactly once" in message:
                answers.append(keep_markers([words])[0])
            else:
                answers.append(drop_markers([words])[0])
            if on_text is not None:
                on_text(len(answers) - 1, answers[-1])
        return answers


@pytest.mark.parametrize(
    "keep,runs_answered,path", [("strict", True, "strict"), ("never", True, "runs"), ("never", False, "safe_form")]
)
def test_lost_markers_are_asked_again_then_translated_run_by_run(keep, runs_answered, path):
    from hymt.documents.translate import translate_document

    prepared = open_document(".docx", samples.docx_three_runs(), "de")
    translator, seen = Scripted(keep, runs_answered), []
    done = asyncio.run(translate_document(prepared.texts, translator, lambda n, total: seen.append((n, total))))
    result = finish(prepared, done.texts, done.paths)
    counts = result.report()["markup_segments"]
    assert counts[path] == 1 and sum(counts.values()) == 1 and seen[-1] == (1, 1)
    assert "<s1> </s1> <s2> </s2> <s3> </s3>" in translator.prompts[1]  # the retry lists the tags it must keep
    runs, links = samples.docx_formatting(result.data)
    if path == "strict":
        assert runs == [
            ("PRESS ", None, None),
            ("SAVE", True, None),
            (" OR ", None, None),
            ("CANCEL", None, True),
            (" AND SEE ", None, None),
            (".", None, None),
        ]
        assert links == ["THE SITE"]
        assert len(translator.prompts) == 2
    elif path == "runs":
        # Each run on its own: "Press", "Save", "or", "cancel", "and see", "the site" (the "." has no words).
        assert translator.prompts[2:] and len(translator.prompts) == 2 + 6
        assert runs == [
            ("PRESS ", None, None),
            ("SAVE", True, None),
            (" OR ", None, None),
            ("CANCEL", None, True),
            (" AND SEE ", None, None),
            (".", None, None),
        ]
        assert links == ["THE SITE"]
    else:
        assert runs == [("PRESS SAVE OR CANCEL AND SEE THE SITE.", None, None)] and links == []


def _pdf_blocks(data: bytes):
    from hymt.documents import pdf

    return pdf._blocks(data)


def test_pdf_round_trip_keeps_pages_images_and_where_each_block_stands():
    import pikepdf

    texts = [
        "The committee met twice this year and approved the budget for the new library.",
        "A second paragraph follows on the second page.",
        "And a third one, back on the first.",
    ]
    data = samples.pdf_paragraphs(texts, image=True, pages=2)
    prepared = open_document(".pdf", data, "de")
    assert prepared.texts == [texts[0], texts[2], texts[1]]  # page by page, top to bottom
    out = finish(prepared, [t.upper() for t in prepared.texts])
    before, after = pikepdf.open(io.BytesIO(data)), pikepdf.open(io.BytesIO(out.data))
    assert len(after.pages) == 2
    assert len(after.pages[0].get_images()) == len(before.pages[0].get_images()) == 1
    was, now = _pdf_blocks(data), _pdf_blocks(out.data)
    assert [b.text for b in now] == [t.upper() for t in prepared.texts]  # the old text is gone, the new in place
    for old, new in zip(was, now):
        assert old.page == new.page and abs(old.box[0] - new.box[0]) < 3 and abs(old.box[3] - new.box[3]) < 4


def test_pdf_titles_grow_across_the_page_and_paragraphs_shrink_into_their_box():
    paragraph = "The committee met twice this year and approved the budget for the new library in town."
    data = samples.pdf_paragraphs(["Short title.", paragraph])
    out = finish(
        open_document(".pdf", data, "de"),
        ["A much longer translation of the short title.", "Eine viel längere Übersetzung des Absatzes. " * 4],
    )
    (title, body), (new_title, *new_body) = _pdf_blocks(data), _pdf_blocks(out.data)
    assert new_title.size == pytest.approx(title.size, abs=0.5) and new_title.box[2] > title.box[2] + 100
    assert new_body[0].size < body.size and min(b.box[1] for b in new_body) > body.box[1] - 0.2 * body.size


@pytest.mark.parametrize(
    "target,text,font,embedded",
    [
        ("bo", "བཀྲ་ཤིས་བདེ་ལེགས། ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།", "NotoSerifTibetan-Regular.ttf", "NotoSerifTibetan-Regular"),
        ("ug", "ياخشىمۇسىز؟ بۇ بىر سىناق.", "NotoNaskhArabic-Regular.ttf", "NotoNaskhArabic-Regular"),
        ("zh", "年度报告。委员会今年开会两次。", "DroidSansFallbackFull.ttf", "DroidSansFallback"),
        ("kk", "Сәлеметсіз бе? Бұл сынақ.", "NotoSans-Regular.ttf", "NotoSans-Regular"),
    ],
)
def test_pdf_draws_each_script_in_an_embedded_font_that_covers_it(target, text, font, embedded):
    import pikepdf
    import uharfbuzz

    from hymt.documents import pdf

    out = finish(open_document(".pdf", samples.pdf_paragraphs(["Hello, world."]), target), [text])
    written = pikepdf.open(io.BytesIO(out.data))
    fonts = {
        str(obj.get("/BaseFont"))
        for obj in written.objects
        if isinstance(obj, pikepdf.Dictionary) and obj.get("/Type") == "/Font"
    }
    assert f"/AAAAAA+{embedded}" in fonts, fonts  # embedded as a subset
    face = uharfbuzz.Face(uharfbuzz.Blob.from_file_path(pdf.font_path(font)))
    covered = uharfbuzz.Font(face)
    assert all(covered.get_nominal_glyph(ord(ch)) for ch in text if not ch.isspace())
