"""The web page in a real headless Chromium (Debian's package) driven by Playwright: what a person does."""

from __future__ import annotations

import shutil

import pytest

import srt as srt_lib
from servers import Server

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    srv = Server(test_model, tmp_path_factory.mktemp("logs") / "browser.log", HYMT_MAX_CHARS="2000")
    srv.wait_healthy()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("Debian's chromium package is not installed (tests/run.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"], accept_downloads=True,
                                  viewport={"width": 1100, "height": 800})
    pg = context.new_page()
    pg.goto(server.url + "/")
    pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
    yield pg
    context.close()


def test_type_translate_swap_copy(page, artifacts):
    page.fill("#input", "Hello world. How are you today?\n\nSecond paragraph.")
    assert page.inner_text("#counter").startswith("50 / 2,000")
    page.select_option("#target", "de")
    page.press("#input", "Control+Enter")
    page.wait_for_function("document.querySelector('#output').textContent.length > 0 && "
                           "!document.querySelector('#translate').disabled")
    output = page.inner_text("#output")
    assert output.count("\n") == 2
    assert page.inner_text("#detected").startswith("Detected: English")
    page.wait_for_function("document.querySelector('#status').textContent.includes('profile cpu')")
    page.screenshot(path=str(artifacts / "page-translated.png"), full_page=True)

    page.click("#copy")
    assert page.evaluate("navigator.clipboard.readText()") == page.text_content("#output")

    page.click("#swap")
    assert page.input_value("#source") == "de" and page.input_value("#target") == "en"
    assert page.input_value("#input") == output


def test_search_picker_filters_languages(page):
    page.fill("#target-filter", "tibet")
    options = page.eval_on_selector_all("#target option", "els => els.map(e => e.value)")
    assert options == ["bo"]
    page.fill("#target-filter", "粤")
    assert page.eval_on_selector_all("#target option", "els => els.map(e => e.value)") == ["yue"]


def test_upload_srt_and_download_result(page, tmp_path):
    srt = tmp_path / "clip.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\nHello there.\n\n2\n00:00:03,000 --> 00:00:04,000\n"
                   "Goodbye.\n", encoding="utf-8")
    page.select_option("#target", "fr")
    page.set_input_files("#file", str(srt))
    page.wait_for_selector("#download:not([hidden])")
    with page.expect_download() as info:
        page.click("#download")
    download = info.value
    assert download.suggested_filename == "clip.fr.srt"
    text = open(download.path(), encoding="utf-8").read()
    lines = text.split("\n")
    assert lines[0] == "1" and lines[1] == "00:00:01,000 --> 00:00:02,000" and lines[4] == "2"
    assert len(list(srt_lib.parse(text))) == 2
    assert page.inner_text("#output").startswith("1\n00:00:01,000 --> 00:00:02,000")  # the text shown too


def test_upload_docx_and_download_same_structure(page, tmp_path):
    import docx

    from test_documents import _docx

    source = tmp_path / "report.docx"
    source.write_bytes(_docx())
    page.select_option("#target", "de")
    page.set_input_files("#file", str(source))
    page.wait_for_selector("#download:not([hidden])")
    assert "segments translated" in page.inner_text("#output")
    with page.expect_download() as info:
        page.click("#download")
    assert info.value.suggested_filename == "report.de.docx"
    before, after = docx.Document(str(source)), docx.Document(info.value.path())
    assert [p.style.name for p in after.paragraphs] == [p.style.name for p in before.paragraphs]
    assert len(after.tables) == 1 and len(after.tables[0].rows) == 2


def test_unsupported_upload_is_refused_with_the_list(page, tmp_path):
    other = tmp_path / "scan.pdf"
    other.write_bytes(b"%PDF-1.4")
    page.set_input_files("#file", str(other))
    assert ".docx" in page.inner_text("#message") and page.get_attribute("#download", "hidden") is not None


def test_clear_and_over_limit_message(page):
    page.fill("#input", "x" * 2001)
    assert "over" in page.get_attribute("#counter", "class")
    page.click("#translate")
    assert "Too long" in page.inner_text("#message")
    page.click("#clear")
    assert page.input_value("#input") == "" and page.inner_text("#output") == ""


def test_phone_sized_screen_and_dark_mode(browser, server, artifacts):
    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True)
    pg = context.new_page()
    pg.goto(server.url + "/")
    pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
    width = pg.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    background = pg.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 18, 18)"
    assert pg.get_attribute("#input", "dir") == "auto" and pg.get_attribute("#output", "dir") == "auto"
    pg.screenshot(path=str(artifacts / "page-phone-dark.png"), full_page=True)
    context.close()


def test_keyboard_only(page):
    page.focus("#input")
    page.keyboard.type("Good night.")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("document.querySelector('#output').textContent.length > 0")
    page.keyboard.press("Shift+Tab")
    focused = page.evaluate("document.activeElement.id")
    assert focused == "target"


@pytest.fixture(scope="module")
def quality_server(family_model, tmp_path_factory):
    srv = Server(family_model("hy-mt1.5-7b"), tmp_path_factory.mktemp("logs") / "browser-quality.log",
                 HYMT_FUSION_MODEL=str(family_model("hunyuan-mt-chimera-7b")))
    srv.wait_healthy()
    yield srv
    srv.stop()


@pytest.fixture
def quality_page(browser, quality_server):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    pg = context.new_page()
    pg.goto(quality_server.url + "/")
    pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
    pg.wait_for_function("!document.querySelector('#quality-best').disabled", timeout=120_000)
    yield pg
    context.close()


def test_model_name_and_best_quality_refused_without_a_fusion_model(page):
    page.wait_for_function("document.querySelector('#model').textContent === 'Hunyuan-MT-7B'")
    assert page.is_disabled("#quality-best")
    assert "HYMT_FUSION_MODEL" in page.inner_text("#quality-note")


def test_glossary_editor_and_best_quality(quality_page, tmp_path, artifacts):
    page = quality_page
    assert page.inner_text("#model") == "HY-MT1.5-7B"
    assert "seven times the work" in page.inner_text("#quality-note")
    page.click("#glossary summary")
    page.click("#glossary-add")
    page.fill("#glossary-rows tr:nth-child(1) td:nth-child(1) input", "GPU")
    page.fill("#glossary-rows tr:nth-child(1) td:nth-child(2) input", "Grafikkarte")
    terms = tmp_path / "terms.tsv"
    terms.write_text("en\tde\ndriver\tTreiber\nkernel\tKern\n", encoding="utf-8")
    page.set_input_files("#glossary-file", str(terms))  # read by the page asynchronously
    page.wait_for_function("document.querySelector('#glossary-count').textContent === '(3 terms)'")
    page.click("#glossary-rows tr:nth-child(3) button")
    assert page.inner_text("#glossary-count") == "(2 terms)"

    page.check("#quality-best")
    page.select_option("#source", "en")
    page.select_option("#target", "de")
    page.fill("#input", "The GPU needs a new driver.")
    with page.expect_request("**/api/translate") as sent:
        page.click("#translate")
    body = sent.value.post_data_json
    assert body["quality"] == "best"
    assert body["glossary"] == [{"source": "GPU", "target": "Grafikkarte"}, {"source": "driver", "target": "Treiber"}]
    page.wait_for_function("!document.querySelector('#translate').disabled", timeout=120_000)
    assert page.inner_text("#output") and "Fusing" not in page.inner_text("#output")
    report = page.inner_text("#glossary-report")
    assert report.startswith("Glossary: 2 terms applied; missed (after a retry) in segment 1: GPU → Grafikkarte")
    page.screenshot(path=str(artifacts / "page-glossary-best.png"), full_page=True)

    page.reload()  # the glossary lives as long as the tab
    page.wait_for_function("document.querySelectorAll('#glossary-rows tr').length === 2")
    fresh = page.context.new_page()
    fresh.goto(page.url)
    assert fresh.inner_text("#glossary-count") == "(0 terms)"


def test_a_server_with_keys_asks_for_one_and_translates_with_it(browser, test_model, tmp_path):
    srv = Server(test_model, tmp_path / "keys.log", HYMT_API_KEYS="page-key-7")
    try:
        srv.wait_healthy()
        context = browser.new_context()
        pg = context.new_page()
        pg.goto(srv.url + "/")
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert pg.is_visible("#api-key") and "requires an API key" in pg.text_content("#message")
        pg.fill("#input", "Hello.")
        pg.click("#translate")
        pg.wait_for_function("document.querySelector('#message').textContent.includes('requires an API key')")
        pg.fill("#api-key", "wrong")
        pg.dispatch_event("#api-key", "change")
        pg.click("#translate")
        pg.wait_for_function("document.querySelector('#message').textContent.includes('was refused')")
        pg.fill("#api-key", "page-key-7")
        pg.dispatch_event("#api-key", "change")
        pg.click("#translate")
        pg.wait_for_function("document.querySelector('#output').textContent.length > 0")
        assert pg.text_content("#message") == ""
        pg.reload()  # the key is remembered in this browser
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert pg.input_value("#api-key") == "page-key-7"
        context.close()
    finally:
        srv.stop()
    assert "page-key-7" not in srv.log_path.read_text()
