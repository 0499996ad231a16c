"""Documents through the HTTP API of a real server on the test model: LibreTranslate's /translate_file as its
clients call it, the page's /api/translate_file with progress, downloads, and the errors."""

from __future__ import annotations

import io
import json

import docx
import httpx
import openpyxl
import polib
import pptx
import pytest
import srt
from lxml import etree, html as lxml_html

import samples
from servers import Server, sse_events


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    # A short interactive queue: documents are batch work, which it does not bound.
    srv = Server(
        test_model,
        tmp_path_factory.mktemp("logs") / "files.log",
        HYMT_MAX_FILE_BYTES="200000",
        HYMT_DATA_DIR=str(data),
        HYMT_MAX_QUEUE_SEGMENTS="8",
    )
    srv.files = data / "jobs"
    srv.wait_healthy()
    yield srv
    srv.stop()


def translate_file(server, name: str, data: bytes, target: str = "de", source: str = "en") -> tuple[dict, bytes]:
    """As LibreTranslate's clients call it: a multipart form with file, source, target (and api_key)."""
    response = httpx.post(
        f"{server.url}/translate_file",
        files={"file": (name, data)},
        data={"source": source, "target": target, "api_key": ""},
        timeout=300,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    download = httpx.get(body["translatedFileUrl"], timeout=30)
    assert download.status_code == 200
    return body, download.content


def test_docx_round_trip(server):
    data = samples.docx_structured()
    body, out = translate_file(server, "report.docx", data)
    assert body["name"] == "report.de.docx" and body["segments"] == 7
    before, after = docx.Document(io.BytesIO(data)), docx.Document(io.BytesIO(out))
    # Random weights drop markers, so runs of a fallen-back paragraph may merge: paragraphs, styles, tables,
    # cells and links are compared; runs where the markers came back.
    assert [p.style.name for p in after.paragraphs] == [p.style.name for p in before.paragraphs]
    assert samples.docx_shape(after)[1] == samples.docx_shape(before)[1]
    if body["markup_fallback_segments"] == 0:
        assert samples.docx_shape(after) == samples.docx_shape(before)


def test_html_po_xliff_srt_xlsx_pptx_round_trip(server):
    _, out = translate_file(server, "page.html", samples.HTML)
    page = lxml_html.fromstring(out)
    assert page.get("lang") == "de" and page.xpath("//script")[0].text == 'var a = "keep me";'
    assert [e.tag for e in page.iter("h1", "p", "div", "img", "pre")] == [
        e.tag for e in lxml_html.fromstring(samples.HTML).iter("h1", "p", "div", "img", "pre")
    ]

    _, out = translate_file(server, "app.pot", samples.PO.encode())
    catalogue = polib.pofile(out.decode())
    assert catalogue.metadata["Language"] == "de" and len(catalogue) == 3
    assert sorted(catalogue[1].msgstr_plural) == [0, 1]

    _, out = translate_file(server, "strings.xliff", samples.XLIFF12)
    assert etree.fromstring(out).find(".//{urn:oasis:names:tc:xliff:document:1.2}file").get("target-language") == "de"

    subs = "1\n00:00:01,000 --> 00:00:02,500\nHello there, my friend.\n\n2\n00:00:03,000 --> 00:00:04,000\nBye.\n"
    _, out = translate_file(server, "film.srt", subs.encode())
    assert [(s.start, s.end) for s in srt.parse(out.decode())] == [(s.start, s.end) for s in srt.parse(subs)]

    book = openpyxl.Workbook()
    book.active.append(["Name", 42])
    buf = io.BytesIO()
    book.save(buf)
    _, out = translate_file(server, "sheet.xlsx", buf.getvalue())
    assert openpyxl.load_workbook(io.BytesIO(out)).active["B1"].value == 42

    prs = pptx.Presentation()
    prs.slides.add_slide(prs.slide_layouts[1]).shapes.title.text = "Quarterly results"
    buf = io.BytesIO()
    prs.save(buf)
    _, out = translate_file(server, "deck.pptx", buf.getvalue())
    assert len(pptx.Presentation(io.BytesIO(out)).slides) == 1


def test_document_longer_than_the_queue(server):
    lines = "".join(f"Line number {i} of a long file.\n" for i in range(30))
    body, out = translate_file(server, "long.txt", lines.encode())
    assert body["segments"] == 30 and out.decode().count("\n") == 30


def test_page_endpoint_streams_progress(server):
    events = []
    with httpx.stream(
        "POST",
        f"{server.url}/api/translate_file",
        files={"file": ("notes.md", b"# Hi\n\nOne. Two.\n")},
        data={"source": "auto", "target": "fr"},
        timeout=300,
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events.extend(sse_events(response))
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and "progress" in kinds
    total = events[0][1]["segments"]
    assert [b["done"] for k, b in events if k == "progress"][-1] == total
    done = events[-1][1]
    assert done["name"] == "notes.fr.md" and httpx.get(done["translatedFileUrl"]).text.startswith("#")


def test_errors_and_names(server):
    response = httpx.post(
        f"{server.url}/translate_file", files={"file": ("a.key", b"PK")}, data={"source": "en", "target": "de"}
    )
    assert response.status_code == 415 and ".docx" in response.json()["error"]
    response = httpx.post(
        f"{server.url}/translate_file",
        files={"file": ("big.txt", b"a" * 300000)},
        data={"source": "en", "target": "de"},
    )
    assert response.status_code == 413
    response = httpx.post(f"{server.url}/translate_file", data={"source": "en", "target": "de"})
    assert response.status_code == 400 and response.json()["error_type"] == "missing_field"
    response = httpx.post(
        f"{server.url}/translate_file", files={"file": ("x.docx", b"not a zip")}, data={"source": "en", "target": "de"}
    )
    assert response.status_code == 400 and response.json()["error_type"] == "invalid_file"
    body, _ = translate_file(server, "../../etc/pass wd.txt", b"Hello there.\n")
    assert body["name"] == "pass wd.de.txt"
    assert {p.name for p in server.files.iterdir()} and all(p.parent == server.files for p in server.files.iterdir())
    assert httpx.get(f"{server.url}/download_file/{'0' * 32}/x.txt").status_code == 404
    assert httpx.get(f"{server.url}/download_file/..%2F..%2Fetc/passwd").status_code == 404


def test_a_documents_options_are_those_of_translate_and_checked_before_its_file_is_read(server):
    """glossary (a JSON string in the form), context, style and background as /translate takes them: a malformed
    glossary is a 400; a style this model has no prompt for is a 422 on both file endpoints, before the stream
    starts; the form's schema offers them."""
    document = {"file": ("gpu.txt", b"The GPU is fast.\n")}
    form = {"source": "en", "target": "de"}
    bad = httpx.post(f"{server.url}/translate_file", files=document, data={**form, "glossary": "GPU=Grafikkarte"})
    assert bad.status_code == 400 and bad.json()["error_type"] == "invalid_json"
    for path in ("/translate_file", "/api/translate_file"):
        refused = httpx.post(f"{server.url}{path}", files=document, data={**form, "style": "formal"})
        assert refused.status_code == 422 and refused.json()["error_type"] == "unsupported_style", refused.text
    glossary = json.dumps([{"source": "GPU", "target": "Grafikkarte"}])
    done = httpx.post(
        f"{server.url}/translate_file", files=document, data={**form, "glossary": glossary, "context": "false"}
    )
    assert done.status_code == 200 and done.json()["segments"] == 1
    operation = httpx.get(f"{server.url}/openapi.json").json()["paths"]["/translate_file"]["post"]
    schema = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert {"context", "style", "background"} <= set(schema["properties"]) and "glossary" in schema["description"]
    assert "422" in operation["responses"]


def test_frontend_settings_advertise_files(server):
    body = httpx.get(f"{server.url}/frontend/settings").json()
    assert body["filesTranslation"] is True and {".docx", ".epub", ".po", ".xliff"} <= set(body["supportedFilesFormat"])


def test_bold_italic_and_link_keep_their_formatting(server):
    body, out = translate_file(server, "runs.docx", samples.docx_three_runs())
    # The test model loses every marker: asked again strictly, then run by run, never the safe form.
    assert body["markup_segments"] == {"markers": 0, "strict": 0, "runs": 1, "safe_form": 0}
    assert body["markup_fallback_segments"] == 0
    runs, links = samples.docx_formatting(out)
    assert [b for _, b, _ in runs].count(True) == 1 and [i for _, _, i in runs].count(True) == 1
    assert len(links) == 1 and links[0].strip() and links[0] != "the site"


@pytest.mark.parametrize("ext", list(samples.ODF_SAMPLES))
def test_odf_round_trip(server, ext):
    import zipfile

    data = samples.odf(ext, samples.ODF_SAMPLES[ext], picture=True)
    body, out = translate_file(server, f"sample{ext}", data)
    assert body["name"] == f"sample.de{ext}" and body["markup_segments"]["safe_form"] == 0
    before, after = zipfile.ZipFile(io.BytesIO(data)), zipfile.ZipFile(io.BytesIO(out))
    assert after.namelist() == before.namelist()
    # Runs translated apart come back as the spans they were; the elements and their attributes are the same.
    assert samples.odf_shape(etree.fromstring(after.read("content.xml"))) == samples.odf_shape(
        etree.fromstring(before.read("content.xml"))
    )


def test_a_file_named_otherwise_is_read_by_its_media_type(server):
    response = httpx.post(
        f"{server.url}/translate_file",
        data={"source": "en", "target": "de"},
        timeout=300,
        files={
            "file": (
                "upload.bin",
                samples.document(".odt", ["Hello there."]),
                "application/vnd.oasis.opendocument.text",
            )
        },
    )
    assert response.status_code == 200 and response.json()["name"] == "upload.de.odt", response.text
    response = httpx.post(
        f"{server.url}/translate_file",
        data={"source": "en", "target": "de"},
        files={"file": ("upload.bin", b"x", "application/zip")},
    )
    assert response.status_code == 415 and ".odt" in response.json()["error"]
