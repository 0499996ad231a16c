"""The web page in a real headless Chromium (Debian's package) driven by Playwright: what a person does."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import urlsplit

import httpx
import pytest
import srt as srt_lib

from browsers import LAN_HOST
from servers import Server, serving, wait_until

pytestmark = pytest.mark.browser

IDLE = "document.querySelector('#output').textContent.length > 0 && !document.querySelector('#translate').disabled"


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    with serving(test_model, tmp_path_factory.mktemp("logs") / "browser.log", HYMT_MAX_CHARS="2000") as srv:
        yield srv


@pytest.fixture
def page(browser, server):
    context = browser.new_context(
        permissions=["clipboard-read", "clipboard-write"],
        accept_downloads=True,
        viewport={"width": 1100, "height": 800},
    )
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
    page.wait_for_function(
        "document.querySelector('#output').textContent.length > 0 && !document.querySelector('#translate').disabled"
    )
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


def test_search_filters_without_changing_the_selection(page):
    page.select_option("#target", "de")
    page.fill("#target-filter", "tibet")
    options = page.eval_on_selector_all("#target option", "els => els.map(e => e.value)")
    assert options == ["de", "bo"] and page.input_value("#target") == "de"  # the selection stays, listed first
    assert page.inner_text("#target-hint").startswith("1 match")
    page.fill("#target-filter", "粤")
    assert page.eval_on_selector_all("#target option", "els => els.map(e => e.value)") == ["de", "yue"]
    page.fill("#target-filter", "xyzzy")
    assert page.input_value("#target") == "de" and "No language matches" in page.inner_text("#target-hint")
    page.fill("#input", "Hello.")
    with page.expect_request("**/api/translate") as sent:
        page.click("#translate")
    assert sent.value.post_data_json["target"] == "de"  # a search without a match never empties the target
    page.wait_for_function(IDLE)
    page.fill("#target-filter", "tibet")
    page.press("#target-filter", "Enter")  # an explicit pick
    assert page.input_value("#target") == "bo" and page.input_value("#target-filter") == ""


def test_upload_srt_and_download_result(page, tmp_path):
    srt = tmp_path / "clip.srt"
    srt.write_text(
        "1\n00:00:01,000 --> 00:00:02,000\nHello there.\n\n2\n00:00:03,000 --> 00:00:04,000\nGoodbye.\n",
        encoding="utf-8",
    )
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
    # The files view: the translation shown, none of the text's controls as if it were a text's.
    assert page.get_attribute("#view-files", "aria-pressed") == "true"
    assert page.inner_text("#doc-preview").startswith("1\n00:00:01,000 --> 00:00:02,000")
    for selector in ("#input", "#translate", "#counter", "#output", "#copy", "#more", "#quality-best"):
        assert page.is_hidden(selector), selector
    assert page.is_visible("#download") and page.is_visible("#glossary")  # a glossary applies to documents too
    page.click("#view-text")  # the text view, as it was: the document's text is not the text's translation
    assert page.is_visible("#input") and page.is_visible("#copy") and page.is_hidden("#doc-preview")
    assert page.text_content("#output") == "" and page.is_visible("#download")  # its report stays by the text box


def test_the_files_view_offers_the_formats_and_a_drop_zone(page):
    page.click("#view-files")
    assert page.get_attribute("#view-files", "aria-pressed") == "true"
    assert page.get_attribute("#view-text", "aria-pressed") == "false"
    assert page.is_hidden("#input") and page.is_hidden("#copy") and page.is_visible("#files")
    assert ".docx" in page.inner_text("#formats") and page.inner_text("#files").startswith("Drop a document here")
    page.click("#view-text")
    assert page.is_hidden("#files") and page.evaluate("document.activeElement.id") == "input"


def test_upload_docx_and_download_same_structure(page, tmp_path):
    import docx

    import samples

    source = tmp_path / "report.docx"
    source.write_bytes(samples.docx_structured())
    page.select_option("#target", "de")
    page.set_input_files("#file", str(source))
    page.wait_for_selector("#download:not([hidden])")
    assert "segments translated" in page.inner_text("#doc-status")
    with page.expect_download() as info:
        page.click("#download")
    assert info.value.suggested_filename == "report.de.docx"
    before, after = docx.Document(str(source)), docx.Document(info.value.path())
    assert [p.style.name for p in after.paragraphs] == [p.style.name for p in before.paragraphs]
    assert len(after.tables) == 1 and len(after.tables[0].rows) == 2


def test_unsupported_upload_is_refused_with_the_list(page, tmp_path):
    other = tmp_path / "slides.key"
    other.write_bytes(b"PK\x03\x04")
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
    srv = Server(
        family_model("hy-mt1.5-7b"),
        tmp_path_factory.mktemp("logs") / "browser-quality.log",
        HYMT_FUSION_MODEL=str(family_model("hunyuan-mt-chimera-7b")),
    )
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
    assert "Tencent Hunyuan Community License" in page.inner_text("#license")
    assert page.is_hidden("#instructions")  # no official style or background prompt
    assert page.is_disabled("#quality-best")
    assert "HYMT_FUSION_MODEL" in page.inner_text("#quality-note")


def record_forms(page) -> None:
    """Keep the text fields of each form the page's fetch sends in window.sentForms: Chromium does not show a
    multipart body with a file to Playwright."""
    page.evaluate(
        """() => {
          const send = window.fetch;
          window.sentForms = [];
          window.fetch = (url, init) => {
            if (init && init.body instanceof FormData)
              window.sentForms.push(Object.fromEntries([...init.body].filter(([, v]) => typeof v === "string")));
            return send(url, init);
          };
        }"""
    )


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
    document = tmp_path / "gpu.txt"
    document.write_text("The GPU is fast.\n", encoding="utf-8")
    record_forms(page)
    page.set_input_files("#file", str(document))
    page.wait_for_selector("#download:not([hidden])")
    [form] = page.evaluate("window.sentForms")
    assert json.loads(form["glossary"]) == [
        {"source": "GPU", "target": "Grafikkarte"},
        {"source": "driver", "target": "Treiber"},
    ]

    page.reload()  # the glossary lives as long as the tab
    page.wait_for_function("document.querySelectorAll('#glossary-rows tr').length === 2")
    fresh = page.context.new_page()
    fresh.goto(page.url)
    assert fresh.inner_text("#glossary-count") == "(0 terms)"


def test_a_stored_glossary_is_picked_and_sent_with_text_and_documents(page, server, tmp_path):
    created = httpx.post(
        f"{server.url}/v2/glossaries",
        json={"name": "Hardware", "source_lang": "en", "target_lang": "de", "entries": "GPU\tGrafikkarte\n"},
    ).json()
    try:
        page.reload()
        page.wait_for_selector("#glossary-stored-field:not([hidden])", state="attached")
        page.click("#glossary summary")
        label = page.inner_text(f"#glossary-stored option[value='{created['glossary_id']}']")
        assert label == "Hardware (en → de, 1 term)"
        page.select_option("#glossary-stored", created["glossary_id"])
        page.select_option("#source", "en")
        page.select_option("#target", "de")
        page.fill("#input", "The GPU is fast.")
        with page.expect_request("**/api/translate") as sent:
            page.click("#translate")
        assert sent.value.post_data_json["glossary_id"] == created["glossary_id"]
        page.wait_for_function(IDLE)
        assert page.inner_text("#glossary-report").startswith("Glossary: 1 terms applied")
        record_forms(page)
        document = tmp_path / "gpu.txt"
        document.write_text("The GPU is fast.\n", encoding="utf-8")
        page.set_input_files("#file", str(document))
        page.wait_for_selector("#download:not([hidden])")
        [form] = page.evaluate("window.sentForms")
        assert form["glossary_id"] == created["glossary_id"]
        page.reload()  # the choice lives as long as the tab
        page.wait_for_function(f"document.querySelector('#glossary-stored').value === '{created['glossary_id']}'")
    finally:
        httpx.delete(f"{server.url}/v2/glossaries/{created['glossary_id']}")


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
        long = tmp_path / "long.txt"
        long.write_text(lines_of_text(300), encoding="utf-8")
        pg.set_input_files("#file", str(long))
        pg.wait_for_function("document.querySelector('#doc-status').textContent.startsWith('Translating long.txt')")
        with pg.expect_response(lambda r: r.request.method == "DELETE") as answer:
            pg.click("#doc-cancel")  # a job is its key's alone: without the key, the DELETE would be refused
        assert answer.value.status == 200 and answer.value.json()["status"] == "cancelled"
        pg.wait_for_function("document.querySelector('#doc-status').textContent.startsWith('Cancelled')")
        pg.reload()  # the key is remembered in this browser
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert pg.input_value("#api-key") == "page-key-7"
        context.close()
    finally:
        srv.stop()
    assert "page-key-7" not in srv.log_path.read_text()


def test_typing_translates_after_the_pause_and_cancels_the_running_request(page):
    """Translate as you type: a request once the typing pauses (frontendTimeout), none pressed; more typing
    cancels the request still running. The first request is held unanswered, so it is still running."""
    held, failed = [], []

    def handle(route):
        if not held:
            held.append(route)
        else:
            route.continue_()

    page.route("**/api/translate", handle)
    page.on("requestfailed", lambda request: failed.append(request))
    page.select_option("#target", "de")
    page.fill("#input", "Hello")
    page.wait_for_function("document.querySelector('#translate').disabled")  # the first request runs
    page.fill("#input", "Hello world.")
    page.wait_for_function(IDLE)
    assert held[0].request.post_data_json["text"] == "Hello"
    assert [r.post_data_json["text"] for r in failed] == ["Hello"]  # cancelled by the newer one
    assert page.inner_text("#output")


def test_shareable_url_carries_languages_and_text(page, server):
    page.goto(server.url + "/?source=en&target=fr&q=Good%20morning.")
    page.wait_for_function(IDLE)  # the shared text is translated on arrival
    assert page.input_value("#source") == "en" and page.input_value("#target") == "fr"
    assert page.input_value("#input") == "Good morning."
    page.select_option("#target", "ja")
    assert "target=ja" in page.url and "q=Good+morning." in page.url and "source=en" in page.url
    with page.expect_request("**/api/translate") as sent:  # sent as typed, after a pause
        page.goto(server.url + "/?source=xx&target=klingon&q=Good%20night.")
        page.wait_for_function("document.querySelectorAll('#target option').length === 38")
        # Unknown codes leave the defaults and say so; the shared text waits for a language to be picked.
        assert page.input_value("#source") == "auto" and page.input_value("#target") == "en"
        message = page.inner_text("#message")
        assert "source language “xx”" in message and "target language “klingon”" in message, message
        assert "pick one from the list" in message
        page.wait_for_timeout(1500)  # nothing goes on its own meanwhile
        assert page.inner_text("#output") == "" and not page.is_disabled("#translate")
        page.select_option("#target", "fr")
    assert sent.value.post_data_json["target"] == "fr" and sent.value.post_data_json["text"] == "Good night."


def test_copy_over_plain_http_on_a_lan(browser, server):
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    lan = context.new_page()
    lan.goto(f"http://{LAN_HOST}:{server.port}/")
    lan.wait_for_function("document.querySelectorAll('#target option').length === 38")
    assert lan.evaluate("window.isSecureContext === false && navigator.clipboard === undefined")
    lan.fill("#input", "Hello there.")
    lan.click("#translate")
    lan.wait_for_function(IDLE)
    lan.click("#copy")
    assert lan.inner_text("#copy") == "Copied" and lan.inner_text("#message") == ""
    local = context.new_page()  # a secure page of the same browser reads the clipboard back
    local.goto(server.url + "/static/favicon.svg")
    assert local.evaluate("navigator.clipboard.readText()") == lan.text_content("#output")

    lan.evaluate("document.execCommand = () => false")  # a browser that refuses to copy
    lan.click("#copy")
    assert "press Ctrl+C" in lan.inner_text("#message")
    assert lan.evaluate("getSelection().toString()") == lan.text_content("#output")  # selected, ready to copy
    context.close()


def test_actions_that_do_nothing_say_so(page):
    page.click("#swap")  # auto-detect has detected nothing yet
    assert "Nothing to swap yet" in page.inner_text("#message")
    page.click("#translate")
    assert "Nothing to translate yet" in page.inner_text("#message")
    page.click("#copy")
    assert "Nothing to copy yet" in page.inner_text("#message")
    page.click("#more")
    assert "Translate a text first" in page.inner_text("#message")


def test_clear_resets_every_report(page):
    page.click("#glossary summary")
    page.click("#glossary-add")
    page.fill("#glossary-rows tr:nth-child(1) td:nth-child(1) input", "world")
    page.fill("#glossary-rows tr:nth-child(1) td:nth-child(2) input", "Welt")
    page.select_option("#target", "de")
    page.fill("#input", "Hello world, how are you today?")
    page.click("#translate")
    page.wait_for_function(IDLE)
    page.click("#more")
    page.wait_for_selector("#alternatives:not([hidden])")
    assert page.inner_text("#glossary-report").startswith("Glossary: 1 terms applied")
    assert page.inner_text("#detected").startswith("Detected: English") and "q=" in page.url
    page.click("#clear")
    for selector in ("#output", "#detected", "#glossary-report", "#message", "#announce", "#alternatives"):
        assert page.text_content(selector) == "", selector
    assert page.is_hidden("#alternatives") and page.is_hidden("#download") and "q=" not in page.url


def test_alternatives_on_the_page(page):
    page.select_option("#source", "en")
    page.select_option("#target", "fr")
    page.fill("#input", "The weather is nice today.")
    page.click("#translate")
    page.wait_for_function(IDLE)
    with page.expect_request("**/translate") as sent:
        page.click("#more")
    assert sent.value.post_data_json["alternatives"] == 3
    page.wait_for_function("document.querySelectorAll('#alternatives li').length === 4")
    choices = page.eval_on_selector_all("#alternatives button", "els => els.map(e => e.textContent)")
    assert len(set(choices)) == 4  # the best, then three distinct others
    page.click("#alternatives li:nth-child(3) button")
    assert page.text_content("#output") == choices[2]


def test_one_announcement_per_finished_translation(page):
    assert page.get_attribute("#output", "aria-live") is None and page.get_attribute("#counter", "aria-live") is None
    page.evaluate("""window.announced = [];
        new MutationObserver(() => { const t = document.querySelector('#announce').textContent;
          if (t) window.announced.push(t); }).observe(document.querySelector('#announce'),
          { childList: true, characterData: true, subtree: true });""")
    page.select_option("#target", "de")
    page.fill("#input", "One sentence. Another sentence. A third one.")
    page.click("#translate")
    page.wait_for_function(IDLE)
    announced = page.evaluate("window.announced")
    assert len(announced) == 1 and announced[0].startswith("Translation into German finished: ")


def test_drop_a_document_on_the_text(page, tmp_path):
    page.select_option("#target", "fr")
    page.evaluate("""() => {
        const data = new DataTransfer();
        data.items.add(new File(["1\\n00:00:01,000 --> 00:00:02,000\\nHello there.\\n"], "clip.srt"));
        const pane = document.querySelector('#input-pane');
        pane.dispatchEvent(new DragEvent('dragover', { dataTransfer: data, bubbles: true, cancelable: true }));
        pane.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
    }""")
    page.wait_for_selector("#download:not([hidden])")
    assert page.inner_text("#download") == "Download clip.fr.srt"


def test_favicon(page, server):
    assert page.get_attribute("link[rel=icon]", "href") == "/static/favicon.svg"
    icon = httpx.get(server.url + "/static/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")


def test_page_modules_load_as_javascript_without_errors(browser, server):
    """The page's script is native ES modules from /static, each of which a browser runs only when it comes with a
    JavaScript media type; every module in the ui folder is loaded, and a translation logs no error."""
    from hymt.api.page import UI_DIR

    context = browser.new_context()
    pg = context.new_page()
    errors, scripts = [], {}
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on(
        "response",
        lambda r: (
            scripts.update({r.url.rsplit("/", 1)[1]: (r.status, r.headers["content-type"])})
            if r.request.resource_type == "script"
            else None
        ),
    )
    pg.goto(server.url + "/?source=en&target=de&q=Hello%20world.")
    pg.wait_for_function(IDLE)
    assert pg.get_attribute("script[src='/static/main.js']", "type") == "module"  # early.js: classic
    assert set(scripts) == {p.name for p in UI_DIR.glob("*.js")}
    for name, (status, media_type) in scripts.items():
        assert status == 200 and media_type.split(";")[0] in ("text/javascript", "application/javascript"), name
    assert errors == []
    context.close()


CONTRAST_JS = """() => {
  // WCAG 2 contrast of every visible text against the background it is drawn on (alpha composited).
  const parse = (c) => {
    const m = c.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
  };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] === 1) break;
    }
    let color = [255, 255, 255, 1];
    for (const layer of layers.reverse()) color = over(layer, color);
    return color;
  };
  const lum = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const found = [];
  for (const el of document.querySelectorAll('body *')) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()) || el.tagName === 'SELECT';
    if (!own || el.closest('[hidden], .sr-only, option') || el.disabled) continue;
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    const bg = background(el), fg = over(parse(getComputedStyle(el).color), bg);
    const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
    found.push({ what: `${el.tagName}#${el.id}.${el.className}: ${el.textContent.trim().slice(0, 30)}`,
                 ratio: (a + 0.05) / (b + 0.05) });
  }
  return found;
}"""


@pytest.mark.parametrize(("scheme", "chosen"), [("light", None), ("dark", None), ("light", "dark"), ("dark", "light")])
def test_contrast_of_every_text_in_both_themes(browser, server, scheme, chosen, artifacts):
    """Each theme, followed from the system or chosen against it (the switch's choice, kept in localStorage)."""
    context = browser.new_context(viewport={"width": 1100, "height": 900}, color_scheme=scheme)
    if chosen:
        context.add_init_script(f"localStorage.setItem('hymt-theme', '{chosen}')")
    pg = context.new_page()
    pg.goto(server.url + "/?source=en&target=de&q=Hello%20world.")
    pg.wait_for_function(IDLE)
    pg.click("#more")
    pg.wait_for_selector("#alternatives:not([hidden])")
    pg.fill("#target-filter", "xyzzy")  # a search hint
    pg.click("#glossary summary")
    # The colours only errors and guesses use, shown as the page shows them.
    pg.evaluate("""document.querySelector('#message').textContent = 'An error';
        const d = document.querySelector('#detected'); d.textContent = 'Detected: perhaps English (a guess, 30%)';
        d.classList.add('guess');
        document.querySelector('#document').hidden = false;
        const s = document.querySelector('#doc-status'); s.textContent = 'report.txt was not translated: an error';
        s.classList.add('failed'); document.querySelector('#doc-cancel').hidden = false;""")
    pg.screenshot(path=str(artifacts / f"page-contrast-{chosen or scheme}-on-{scheme}.png"), full_page=True)
    assert pg.evaluate(BACKGROUND) == {"light": LIGHT, "dark": DARK}[chosen or scheme]
    measured = pg.evaluate(CONTRAST_JS)
    texts = {m["what"].split(":")[0] for m in measured}
    assert {
        "BUTTON#translate.primary",
        "P#message.",
        "SMALL#detected.detected guess",
        "SELECT#target.",
        "P#doc-status.failed",
        "BUTTON#doc-cancel.",
    } <= texts
    low = [m for m in measured if m["ratio"] < 4.5]
    assert not low, low
    context.close()


def test_phone_layout_result_in_view_and_bounded_output(browser, server, artifacts):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    pg = context.new_page()
    pg.goto(server.url + "/")
    pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
    pg.select_option("#target", "de")
    pg.fill("#input", "Hello world. " * 20)
    pg.click("#translate")
    pg.wait_for_function(IDLE)
    box = pg.evaluate(
        "(() => { const r = document.querySelector('#output').getBoundingClientRect(); "
        "return { top: r.top, bottom: r.bottom, height: innerHeight }; })()"
    )
    assert 0 <= box["top"] < box["height"] - 80, box  # the translation's start is on the screen
    assert pg.evaluate("document.documentElement.scrollWidth") <= 390
    pg.evaluate("document.querySelector('#output').textContent = 'A long translation line.\\n'.repeat(400)")
    sizes = pg.evaluate(
        "(() => { const o = document.querySelector('#output'); "
        "return { client: o.clientHeight, scroll: o.scrollHeight, view: innerHeight }; })()"
    )
    assert sizes["client"] <= sizes["view"] * 0.7 and sizes["scroll"] > sizes["client"]  # it scrolls on its own
    pg.screenshot(path=str(artifacts / "page-phone-result.png"))
    context.close()


def test_a_page_on_another_origin_calls_the_api(browser, server, tmp_path):
    """A web app served from elsewhere (another port: another origin) calls /translate with an Authorization header
    and JSON, which makes Chromium send a preflight first; CORS lets it read the answers."""
    import functools
    import http.server
    import threading

    (tmp_path / "index.html").write_text("<!doctype html><title>elsewhere</title><p>another app</p>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.goto(f"http://127.0.0.1:{other.server_address[1]}/")
        answer = pg.evaluate(
            """async (api) => {
            const r = await fetch(api + '/translate', { method: 'POST',
              headers: { 'Content-Type': 'application/json', 'Authorization': 'Bearer none-needed' },
              body: JSON.stringify({ q: 'Hello.', source: 'en', target: 'de' }) });
            const languages = await (await fetch(api + '/languages')).json();
            return { status: r.status, body: await r.json(), languages: languages.length };
        }""",
            server.url,
        )
        assert answer["status"] == 200 and answer["body"]["translatedText"] and answer["languages"] == 38
        refused = pg.evaluate(
            """async (api) => {
            const r = await fetch(api + '/translate', { method: 'POST', headers: { 'Content-Type': 'application/json' },
              body: JSON.stringify({ q: 'Hello.' }) });
            return { status: r.status, body: await r.json() };
        }""",
            server.url,
        )
        assert refused["status"] == 400 and "target" in refused["body"]["error"]  # the page can read why
    finally:
        context.close()
        other.shutdown()


def lines_of_text(n: int, word: str = "hello") -> str:
    return "".join(f"Line number {i} says {word} to the world.\n" for i in range(n))


def open_page(browser, url: str):
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    pg = context.new_page()
    pg.goto(url + "/")
    pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
    return context, pg


def record(page, selector: str, name: str) -> None:
    """Every text the element shows from now on, in window[name] (a MutationObserver)."""
    page.evaluate(
        """([selector, name]) => { window[name] = []; const el = document.querySelector(selector);
        new MutationObserver(() => window[name].push(el.textContent)).observe(el,
          { childList: true, characterData: true, subtree: true }); }""",
        [selector, name],
    )


@pytest.fixture(scope="module")
def jobs_server(test_model, tmp_path_factory):
    """One document translating at a time and few segments in flight: a document waits behind another, and the
    tiny model on a CPU takes long enough over one of tens of lines for the page to be used meanwhile (a text gets
    rows as they free, ahead of the document's)."""
    log = tmp_path_factory.mktemp("logs") / "browser-jobs.log"
    with serving(test_model, log, HYMT_MAX_RUNNING_JOBS="1", HYMT_MAX_IN_FLIGHT="8") as srv:
        yield srv


@pytest.fixture
def jobs_page(browser, jobs_server):
    context, pg = open_page(browser, jobs_server.url)
    yield pg
    context.close()


def submit_job(srv, name: str, lines: int) -> dict:
    answer = httpx.post(
        f"{srv.url}/api/jobs",
        files={"file": (name, lines_of_text(lines, name).encode())},
        data={"source": "en", "target": "de"},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    return answer.json()


def job_status(srv, job: dict) -> str:
    return httpx.get(f"{srv.url}/api/jobs/{job['id']}", timeout=10).json()["status"]


def cancel_job(srv, job: dict) -> None:
    assert httpx.delete(f"{srv.url}/api/jobs/{job['id']}", timeout=10).json()["status"] == "cancelled"


def doc_status_is(page, text: str) -> None:
    page.wait_for_function("(t) => document.querySelector('#doc-status').textContent === t", arg=text)


def test_a_document_waits_its_turn_shows_progress_and_the_text_box_translates_meanwhile(
    jobs_page, jobs_server, tmp_path, artifacts
):
    """The page's document waits behind two others (one translating), says its place as it moves up, then its
    progress with the time left, in its own place; a text typed while it translates is translated (the text's
    stream is its own) and stays the translation shown when the document's download comes."""
    page, srv = jobs_page, jobs_server
    first, second = submit_job(srv, "first.txt", 300), submit_job(srv, "second.txt", 300)
    try:
        wait_until(lambda: job_status(srv, first) == "translating", 30, srv.log_path.read_text, "first job started")
        record(page, "#doc-status", "docStatus")
        report = tmp_path / "report.txt"
        report.write_text(lines_of_text(60), encoding="utf-8")
        page.select_option("#source", "en")
        page.select_option("#target", "de")
        page.set_input_files("#file", str(report))
        doc_status_is(page, "Waiting to translate report.txt: 1 document ahead")
        assert page.is_visible("#doc-cancel") and page.is_hidden("#download")
        cancel_job(srv, second)
        doc_status_is(page, "Waiting to translate report.txt: next in line")
        cancel_job(srv, first)
        page.wait_for_function(
            "document.querySelector('#doc-status').textContent.startsWith('Translating report.txt: ')"
        )
    finally:
        for job in (first, second):
            httpx.delete(f"{srv.url}/api/jobs/{job['id']}", timeout=10)

    page.click("#view-text")  # the upload opened the files view
    assert page.is_visible("#doc-status")  # the document's report stays by the text box
    page.fill("#input", "Hello world.")  # translated as typed, while the document translates
    page.wait_for_function(IDLE)
    translation = page.inner_text("#output")
    seen = page.evaluate("window.docStatus.length")
    assert page.is_hidden("#download") and page.inner_text("#doc-status").startswith("Translating report.txt: ")
    assert page.is_visible("#doc-cancel")  # the document still runs
    page.screenshot(path=str(artifacts / "page-document-and-text.png"), full_page=True)

    page.wait_for_function(
        "document.querySelector('#announce').textContent === 'report.de.txt is translated and ready to download.'",
        timeout=120_000,
    )
    assert page.is_visible("#download") and page.inner_text("#doc-status") == "report.de.txt: 60 segments translated."
    assert page.inner_text("#output") == translation  # the document's text did not replace the text's translation
    statuses = page.evaluate("window.docStatus")
    progress = [s for s in statuses if s.startswith("Translating")]
    for status in progress:
        assert re.fullmatch(r"Translating report\.txt: \d+ / 60 segments(, about \d+ (s|min) left)?", status), status
    assert any("left" in s for s in progress), progress
    assert any(s.startswith("Translating") for s in statuses[seen:]), statuses  # it kept updating in its place
    assert page.is_hidden("#doc-cancel") and page.is_hidden("#doc-progress")
    with page.expect_download() as info:
        page.click("#download")
    assert len(open(info.value.path(), encoding="utf-8").read().splitlines()) == 60


def stream_of(*events: tuple[str, dict]) -> str:
    """A Server-Sent Events body of (kind, data) events."""
    return "".join(f"event: {kind}\ndata: {json.dumps(data)}\n\n" for kind, data in events)


def upload_lost_after_its_start(page, tmp_path, job: dict, *then: tuple[str, dict]) -> None:
    """The page uploads notes.txt, and its stream tells of the job `job` (one already on the server), then `then`,
    then ends: what a page sees of a server that restarts, or of a connection cut, while its document runs."""
    start = {"segments": job["segments_total"], "name": job["name"], "id": job["id"]}
    body = stream_of(("start", start), *then)
    page.route("**/api/translate_file", lambda route: route.fulfill(content_type="text/event-stream", body=body))
    record(page, "#doc-status", "docStatus")
    notes = tmp_path / "notes.txt"
    notes.write_text(lines_of_text(5), encoding="utf-8")
    page.set_input_files("#file", str(notes))


def test_a_document_whose_server_restarts_is_followed_to_its_download(jobs_page, jobs_server, tmp_path):
    """The server drains while the page's document runs (its stream ends with "draining"): the page says so, asks
    after the job until it is done (the server keeps it over a restart), then offers its download."""
    page, srv = jobs_page, jobs_server
    job = submit_job(srv, "notes.txt", 5)
    draining = f"the server is restarting; document job {job['id']} is kept and resumes after the restart"
    upload_lost_after_its_start(page, tmp_path, job, ("error", {"error": draining, "error_type": "draining"}))
    page.wait_for_selector("#download:not([hidden])", timeout=120_000)
    statuses = page.evaluate("window.docStatus")
    assert "notes.txt: the server is restarting; the document is kept and resumes after the restart" in statuses
    assert page.inner_text("#doc-status") == "notes.de.txt: 5 segments translated."
    with page.expect_download() as info:
        page.click("#download")
    assert open(info.value.path(), encoding="utf-8").read().count("\n") == 5


def test_a_document_whose_stream_was_cut_says_the_server_cancelled_it(jobs_page, jobs_server, tmp_path):
    """The stream ends after the job's start, and the server, which saw it close, has cancelled the job: the page
    asks after it and says what happened, not that the person cancelled it."""
    page, srv = jobs_page, jobs_server
    job = submit_job(srv, "notes.txt", 300)
    cancel_job(srv, job)
    upload_lost_after_its_start(page, tmp_path, job)
    doc_status_is(page, "notes.txt was not translated: The connection was lost, and the server cancelled the document")
    assert page.is_hidden("#doc-cancel") and page.is_hidden("#download")


def test_cancel_stops_a_running_document(jobs_page, jobs_server, tmp_path):
    page, srv = jobs_page, jobs_server
    long = tmp_path / "long.txt"
    long.write_text(lines_of_text(300), encoding="utf-8")
    page.set_input_files("#file", str(long))
    page.wait_for_function("document.querySelector('#doc-status').textContent.startsWith('Translating long.txt: ')")
    with page.expect_response(lambda r: r.request.method == "DELETE" and "/api/jobs/" in r.url) as answer:
        page.click("#doc-cancel")
    job = answer.value.json()
    assert answer.value.status == 200 and job["status"] == "cancelled"
    doc_status_is(page, "Cancelled: long.txt was not translated.")
    assert page.inner_text("#announce") == "Translation of long.txt cancelled."
    assert page.is_hidden("#doc-cancel") and page.is_hidden("#download") and page.is_hidden("#doc-progress")
    assert job_status(srv, job) == "cancelled"
    page.wait_for_timeout(1000)  # nothing of the cancelled document comes later
    assert page.inner_text("#doc-status") == "Cancelled: long.txt was not translated." and page.is_hidden("#download")


BUSY = {
    "error": "the server is busy: this request would wait about 40 s to start (the limit is 30 s); try again in 1 s",
    "error_type": "overloaded",
}


def refused_once(page, status: int, answer: dict, retry_after: str = "1") -> list[tuple[float, str]]:
    """The page's first text translation refused with `status`, `answer` and Retry-After, the others served: the
    (time, text) of each sent, as they come."""
    sent: list[tuple[float, str]] = []

    def handle(route):
        sent.append((time.monotonic(), route.request.post_data_json["text"]))
        if len(sent) == 1:
            route.fulfill(status=status, headers={"Retry-After": retry_after}, json=answer)
        else:
            route.continue_()

    page.route("**/api/translate", handle)
    return sent


def test_a_busy_server_is_said_once_and_the_text_is_sent_again_by_itself(page):
    """A 429 for the text (Retry-After: 1): one clean message, then the page asks again by itself."""
    sent = refused_once(page, 429, BUSY)
    record(page, "#message", "messages")
    page.select_option("#target", "de")
    page.fill("#input", "Hello world.")  # as typed: nothing pressed, then or later
    record(page, "#status", "statuses")
    page.wait_for_function("document.querySelector('#message').textContent.length > 0")
    assert page.inner_text("#message") == "The server is busy; trying again in 1 s"
    page.wait_for_function(IDLE)
    assert [text for _, text in sent] == ["Hello world.", "Hello world."]
    assert [m for m in page.evaluate("window.messages") if m] == ["The server is busy; trying again in 1 s"]
    assert page.inner_text("#message") == ""
    # The status line said so meanwhile (not "Ready"), and is the server's state again after the retry.
    statuses = page.evaluate("window.statuses")
    assert "Busy: the server refused a translation for now; it is sent again in 1 s" in statuses, statuses
    assert page.inner_text("#status").startswith("Ready")


STARTING = {"error": "the server is starting (loading weights); try again shortly", "error_type": "not_ready"}


def test_a_translation_refused_by_a_starting_server_is_sent_again_by_itself(page):
    """A 503 with Retry-After (the server starting, restarting or shutting down): the server's reason said once,
    then the text sent again; the status line is left to /health (not "Busy")."""
    sent = refused_once(page, 503, STARTING)
    record(page, "#message", "messages")
    record(page, "#status", "statuses")
    page.select_option("#target", "de")
    page.fill("#input", "Hello world.")
    page.wait_for_function(IDLE)
    assert [text for _, text in sent] == ["Hello world.", "Hello world."]
    said = [m for m in page.evaluate("window.messages") if m]
    assert said == ["The server is starting (loading weights); trying again in 1 s"], said
    assert not [s for s in page.evaluate("window.statuses") if s.startswith("Busy")]


def test_a_translation_that_got_no_answer_is_sent_again_by_itself(page):
    """No answer at all (a network change, a server restarting): said, then the page asks again by itself, after
    2 s, then 4 s while none comes."""
    sent = []

    def handle(route):
        sent.append((time.monotonic(), route.request.post_data_json["text"]))
        if len(sent) <= 2:
            route.abort("connectionrefused")
        else:
            route.continue_()

    page.route("**/api/translate", handle)
    record(page, "#message", "messages")
    page.select_option("#target", "de")
    page.fill("#input", "Hello world.")
    page.wait_for_function("document.querySelector('#message').textContent.includes('trying again in 4 s')")
    page.wait_for_function(IDLE)
    assert [text for _, text in sent] == ["Hello world."] * 3
    assert sent[1][0] - sent[0][0] >= 1.9 and sent[2][0] - sent[1][0] >= 3.9
    said = [m for m in page.evaluate("window.messages") if m]
    assert said == [
        "The server could not be reached: Failed to fetch; trying again in 2 s",
        "The server could not be reached: Failed to fetch; trying again in 4 s",
    ], said
    assert page.inner_text("#message") == ""


def test_a_document_refused_by_a_busy_server_is_sent_again_by_itself(page, tmp_path):
    """A 429 for a document (its queue full, Retry-After: 1): said once in its place, then sent again."""
    sent = []

    def handle(route):
        sent.append(route.request.url)
        if len(sent) == 1:
            route.fulfill(status=429, headers={"Retry-After": "1"}, json=BUSY)
        else:
            route.continue_()

    page.route("**/api/translate_file", handle)
    record(page, "#doc-status", "docStatus")
    document = tmp_path / "notes.txt"
    document.write_text("Hello there.\n", encoding="utf-8")
    page.set_input_files("#file", str(document))
    page.wait_for_selector("#download:not([hidden])")
    assert len(sent) == 2
    said = [s for s in page.evaluate("window.docStatus") if "busy" in s]
    assert said == ["Sending notes.txt: the server is busy; trying again in 1 s"], said
    assert page.inner_text("#message") == ""


def test_an_edit_while_a_retry_waits_goes_with_that_one_retry(page):
    """Typing on while the page waits out Retry-After sends nothing sooner and stacks no retry: the one retry, when
    its time comes, carries the latest text."""
    sent = refused_once(page, 429, BUSY, retry_after="2")
    page.select_option("#target", "de")
    page.fill("#input", "Hello")
    page.wait_for_function("document.querySelector('#message').textContent.includes('trying again in 2 s')")
    page.fill("#input", "Hello world.")
    page.wait_for_function(IDLE)
    page.wait_for_timeout(1500)  # no other request follows
    assert [text for _, text in sent] == ["Hello", "Hello world."]
    assert sent[1][0] - sent[0][0] >= 1.9  # Retry-After was waited out


def test_an_error_reads_once(page):
    """The server's own words already say it is busy: the page does not say it twice."""
    page.fill("#input", "Hello.")
    page.wait_for_function(IDLE)
    page.route(
        lambda url: urlsplit(url).path == "/translate",  # LibreTranslate's call, not the page's /api/translate
        lambda route: route.fulfill(status=429, headers={"Retry-After": "1"}, json=BUSY),
    )
    page.click("#more")  # Other translations: a click, told what happened (no retry of its own)
    page.wait_for_function("document.querySelector('#message').textContent.length > 0")
    assert page.inner_text("#message") == "T" + BUSY["error"][1:]


def new_page(browser, url: str, **options):
    """A page of a fresh browser context (its own localStorage), loaded and its pickers filled."""
    context = browser.new_context(**{"viewport": {"width": 1100, "height": 800}, **options})
    pg = context.new_page()
    pg.goto(url)
    pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
    return context, pg


def test_the_page_asks_again_for_its_languages_until_the_server_answers(browser, server):
    """A server starting, restarting or busy answers /languages and /frontend/settings with an error for a while (a
    fresh clone's CI once saw the page stay empty for 90 s): the page asks again until they come, then fills its
    pickers."""
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    refused: list[str] = []

    def busy_twice(route):
        if sum(url == route.request.url for url in refused) < 2:
            refused.append(route.request.url)
            route.fulfill(status=503, content_type="application/json", body='{"error": "starting"}')
        else:
            route.continue_()

    try:
        pg = context.new_page()
        pg.route("**/languages", busy_twice)
        pg.route("**/frontend/settings", busy_twice)
        pg.goto(server.url + "/")
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert len(refused) == 4 and pg.locator("#file").get_attribute("accept")
    finally:
        context.close()


DARK, LIGHT = "rgb(18, 18, 18)", "rgb(250, 250, 250)"
BACKGROUND = "getComputedStyle(document.body).backgroundColor"


def test_the_theme_switch_overrides_the_system_and_is_remembered(browser, server):
    context, pg = new_page(browser, server.url + "/", color_scheme="light")
    try:
        assert pg.input_value("#theme") == "system" and pg.evaluate(BACKGROUND) == LIGHT
        pg.select_option("#theme", "dark")
        assert pg.evaluate(BACKGROUND) == DARK and pg.evaluate("getComputedStyle(document.body).colorScheme") == "dark"
        pg.reload()
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert pg.input_value("#theme") == "dark" and pg.evaluate(BACKGROUND) == DARK  # remembered
        pg.select_option("#theme", "system")
        assert pg.evaluate(BACKGROUND) == LIGHT
        pg.emulate_media(color_scheme="dark")  # the system's setting, followed again
        assert pg.evaluate(BACKGROUND) == DARK
        pg.select_option("#theme", "light")  # light chosen on a dark system
        assert pg.evaluate(BACKGROUND) == LIGHT
        assert pg.evaluate("localStorage.getItem('hymt-theme')") == "light"
        assert pg.inner_text("label:has(#theme)").startswith("Theme")  # labelled
    finally:
        context.close()


def test_the_chosen_theme_is_there_before_the_page_script_runs(browser, server):
    """No flash of the other theme on load: the choice applies before the modules (held here) have run."""
    context = browser.new_context(color_scheme="light")
    context.add_init_script("localStorage.setItem('hymt-theme', 'dark')")
    held = []
    context.route("**/static/main.js", lambda route: held.append(route))
    try:
        pg = context.new_page()
        pg.goto(server.url + "/", wait_until="commit")
        pg.wait_for_function("document.readyState === 'interactive'")  # parsed, its module not run (held)
        assert held and pg.evaluate("document.querySelector('#theme').value") == "system"  # theme.js has not run
        assert pg.evaluate(BACKGROUND) == DARK
        held[0].continue_()
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert pg.input_value("#theme") == "dark" and pg.evaluate(BACKGROUND) == DARK
    finally:
        context.close()


def test_the_page_speaks_the_browsers_language_and_another_one_picked(browser, server):
    context, pg = new_page(browser, server.url + "/", locale="zh-CN")
    try:
        assert pg.evaluate("document.documentElement.lang") == "zh-CN" and pg.input_value("#page-language") == "zh"
        assert pg.inner_text("#translate") == "翻译" and pg.get_attribute("#input", "placeholder").startswith("输入")
        assert pg.get_attribute("#target", "aria-label") == "目标语言" and pg.title() == "hymt · 混元翻译"
        pg.wait_for_function("document.querySelector('#status').textContent.startsWith('就绪')")
        pg.select_option("#target", "de")
        assert pg.inner_text("#target option:checked") == "德语 · Deutsch (de)"
        pg.fill("#target-filter", "法")  # found by its Chinese name
        assert pg.eval_on_selector_all("#target option", "els => els.map(e => e.value)") == ["de", "fr"]
        assert pg.inner_text("#target-hint").startswith("1 个匹配")
        pg.fill("#target-filter", "")
        pg.click("#copy")
        assert pg.inner_text("#message") == "还没有可复制的内容：请先翻译。"

        # Another language picked: what is shown says it again in that one, and it is remembered.
        pg.select_option("#page-language", "en")
        assert pg.evaluate("document.documentElement.lang") == "en" and pg.inner_text("#translate") == "Translate"
        assert pg.inner_text("#message") == "Nothing to copy yet: translate something first."
        assert (
            pg.inner_text("#status").startswith("Ready")
            and pg.get_attribute("#target", "aria-label") == "Target language"
        )
        assert pg.inner_text("#target option:checked") == "German · Deutsch (de)"
        pg.reload()
        pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
        assert pg.input_value("#page-language") == "en" and pg.inner_text("#translate") == "Translate"
        labels = pg.eval_on_selector_all("#page-language option", "els => els.map(e => [e.value, e.lang, e.text])")
        assert labels == [["en", "en", "English"], ["zh", "zh-CN", "中文"], ["de", "de", "Deutsch"]]
    finally:
        context.close()
    context, pg = new_page(browser, server.url + "/", locale="de-AT")
    try:
        assert pg.input_value("#page-language") == "de" and pg.inner_text("#translate") == "Übersetzen"
        pg.select_option("#target", "fr")  # the languages' German names are the browser's
        assert pg.inner_text("#target option:checked") == "Französisch · Français (fr)"
        pg.fill("#target-filter", "kantones")
        assert pg.eval_on_selector_all("#target option", "els => els.map(e => e.value)") == ["fr", "yue"]
    finally:
        context.close()
    context, pg = new_page(browser, server.url + "/", locale="ja-JP")  # a language the page lacks: English
    try:
        assert pg.input_value("#page-language") == "en" and pg.inner_text("#translate") == "Translate"
    finally:
        context.close()


HIDDEN = "getComputedStyle(document.body).visibility === 'hidden'"


def _holder(held: list):
    return lambda route: held.append(route)


def test_a_page_in_another_language_never_shows_english_first(browser, server):
    """A saved language (or the browser's) other than English: the page is hidden until i18n.js (held here) has
    worded it; in English nothing waits; and a module that never runs leaves the page shown, in English."""
    for saved, locale, waits in (("de", "en-US", True), (None, "zh-CN", True), ("en", "de-DE", False)):
        context = browser.new_context(locale=locale)
        if saved:
            context.add_init_script(f"localStorage.setItem('hymt-page-language', '{saved}')")
        held: list = []
        context.route("**/static/main.js", _holder(held))
        try:
            pg = context.new_page()
            pg.goto(server.url + "/", wait_until="commit")
            pg.wait_for_function("document.readyState === 'interactive'")  # parsed, its module not run (held)
            assert held and pg.evaluate(HIDDEN) is waits, (saved, locale)
            held[0].continue_()
            pg.wait_for_function("document.querySelectorAll('#target option').length === 38")
            assert not pg.evaluate(HIDDEN)
            assert pg.inner_text("#translate") == {"de": "Übersetzen", None: "翻译", "en": "Translate"}[saved]
        finally:
            context.close()
    context = browser.new_context(locale="de-DE")
    context.route("**/static/main.js", lambda route: route.abort())
    try:
        pg = context.new_page()
        pg.goto(server.url + "/")  # to its load event
        assert not pg.evaluate(HIDDEN) and pg.inner_text("#translate") == "Translate"
    finally:
        context.close()


CATALOGUE_CHECK = """async () => {
  // Each language's catalogue has English's keys, each the same kind (string or function), a string with the
  // same placeholders; every key the page's markup names exists.
  const { CATALOGUE } = await import('/static/catalogue.js');
  const holes = (s) => typeof s === 'string' ? (s.match(/\\{\\w+\\}/g) || []).sort().join() : 'function';
  const problems = [];
  for (const [code, words] of Object.entries(CATALOGUE)) {
    for (const key of Object.keys(CATALOGUE.en)) {
      if (!(key in words)) problems.push(`${code}: ${key} missing`);
      else if (typeof words[key] === 'string' && typeof CATALOGUE.en[key] === 'string' &&
               holes(words[key]) !== holes(CATALOGUE.en[key])) problems.push(`${code}: ${key} placeholders`);
    }
    for (const key of Object.keys(words)) if (!(key in CATALOGUE.en)) problems.push(`${code}: ${key} unknown`);
  }
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.getAttributeNames().filter((a) => a.startsWith('data-i18n'))) {
      if (!(el.getAttribute(attr) in CATALOGUE.en)) problems.push(`markup: ${el.getAttribute(attr)}`);
    }
  }
  return problems;
}"""


def test_every_page_language_has_every_message(page):
    assert page.evaluate(CATALOGUE_CHECK) == []


FITS_JS = """() => {
  // For each picker and its search box: how much wider than its box the widest text it shows is (<= 0: it fits).
  const canvas = document.createElement('canvas').getContext('2d');
  const width = (el, text) => { const s = getComputedStyle(el); canvas.font = `${s.fontSize} ${s.fontFamily}`;
    return canvas.measureText(text).width; };
  const room = (el) => { const s = getComputedStyle(el);
    return el.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); };
  const over = {};
  for (const id of ['source', 'target']) {
    const select = document.getElementById(id);
    const widest = Math.max(...[...select.options].map((o) => width(select, o.text)));
    over[id] = widest + 20 - room(select);  // the drop-down arrow takes about 20 px
    const search = document.getElementById(`${id}-filter`);
    over[`${id}-filter`] = width(search, search.placeholder) + 16 - room(search);  // and the search's clear button
  }
  return over;
}"""


@pytest.mark.parametrize("locale", ["en-US", "zh-CN", "de-DE"])
def test_pickers_are_read_whole_on_a_phone(browser, server, locale, artifacts):
    context, pg = new_page(
        browser, server.url + "/", viewport={"width": 390, "height": 844}, is_mobile=True, locale=locale
    )
    try:
        over = pg.evaluate(FITS_JS)
        assert all(excess <= 0 for excess in over.values()), over  # every language's name, whole
        assert pg.evaluate("document.documentElement.scrollWidth") <= 390
        pg.screenshot(path=str(artifacts / f"page-phone-pickers-{locale}.png"))
    finally:
        context.close()


def test_copy_stays_in_view_below_a_long_translation(browser, server):
    context, pg = new_page(
        browser, server.url + "/", viewport={"width": 1280, "height": 800}, permissions=["clipboard-write"]
    )
    try:
        pg.select_option("#target", "de")
        pg.fill("#input", lines_of_text(40))
        pg.click("#translate")
        pg.wait_for_function(IDLE, timeout=120_000)
        sizes = pg.evaluate(
            "(() => { const o = document.querySelector('#output'); return [o.scrollHeight, innerHeight]; })()"
        )
        assert sizes[0] > sizes[1], sizes  # the translation is taller than the screen
        for scroll in (0, 200):
            pg.evaluate(f"scrollTo(0, {scroll})")
            seen = pg.evaluate(
                """(() => { const r = document.querySelector('#copy').getBoundingClientRect();
                return { top: r.top, bottom: r.bottom, height: innerHeight,
                  hit: document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2).id }; })()"""
            )
            assert 0 <= seen["top"] and seen["bottom"] <= seen["height"] and seen["hit"] == "copy", (scroll, seen)
        pg.click("#copy", no_wait_after=True)
        pg.wait_for_function("document.querySelector('#copy').textContent === 'Copied'")
    finally:
        context.close()


def test_screenshots_are_taken_by_the_script(browser, server, tmp_path):
    """docs/screenshots/ is made by tests/screenshots.py; it runs here as there, into a folder of the test's."""
    import struct

    import screenshots

    made = screenshots.take(browser, server.url, tmp_path)
    assert sorted(p.name for p in made) == sorted(
        f"page-{size}-{theme}.png" for size in ("1280x800", "390x844") for theme in ("light", "dark")
    )
    for png in made:
        width, height = struct.unpack(">II", png.read_bytes()[16:24])
        assert f"{width}x{height}" in png.name, png
