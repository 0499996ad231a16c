"""/docs: the API explorer (Swagger UI from its pinned package, served by hymt itself) in headless Chromium on the
server's own /openapi.json, with and without keys; and that document's request examples, each valid against its
own schema and answered as the document says."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx
import pytest
from jsonschema import Draft202012Validator

from hymt.api.openapi import build_spec
from hymt.settings import Settings
from servers import serving

KEY = "docs-key"
# A path item's operations (beside them it may hold its parameters, a summary).
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def operations(spec: dict):
    """(path, method, operation) of every operation of the document."""
    for path, item in spec["paths"].items():
        for method in METHODS & set(item):
            yield path, method, item[method]


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    with serving(test_model, tmp_path_factory.mktemp("logs") / "docs.log", HYMT_MAX_CHARS="500") as srv:
        yield srv


@pytest.fixture(scope="module")
def keyed_server(test_model, tmp_path_factory):
    with serving(test_model, tmp_path_factory.mktemp("logs") / "docs-keys.log", HYMT_API_KEYS=KEY) as srv:
        yield srv


@pytest.fixture
def explorer(browser):
    """Opens /docs of a server in a fresh page once the explorer has drawn its operations; what the page asked for
    and every error it logged are kept on the page (requested, errors)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})

    def open_docs(url: str):
        pg = context.new_page()
        pg.requested, pg.errors = [], []
        pg.on("request", lambda r: pg.requested.append(r.url))
        pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
        pg.on("pageerror", lambda e: pg.errors.append(str(e)))
        pg.goto(url + "/docs")
        pg.wait_for_selector(".opblock")
        return pg

    yield open_docs
    context.close()


def try_out(pg, operation: str) -> str:
    """Opens an operation (by the id the explorer gives it) and its Try it out: the operation's selector."""
    op = f"#operations-default-{operation}"
    pg.click(f"{op} .opblock-summary")
    pg.click(f"{op} .try-out__btn")
    return op


def execute(pg, op: str):
    """Executes the operation as filled in: the server's response, once the explorer shows it."""
    with pg.expect_response(lambda r: r.request.resource_type == "fetch" and "/openapi.json" not in r.url) as answer:
        pg.click(f"{op} .execute")
    pg.wait_for_selector(f"{op} .live-responses-table tbody .response-col_status")
    return answer.value


@pytest.mark.browser
def test_explorer_shows_every_operation_offline(explorer, server, artifacts):
    pg = explorer(server.url)
    spec = httpx.get(f"{server.url}/openapi.json").json()
    shown = pg.eval_on_selector_all(
        ".opblock",
        "els => els.map(e => e.querySelector('.opblock-summary-method').textContent + ' ' + "
        "e.querySelector('.opblock-summary-path').dataset.path)",
    )
    assert sorted(shown) == sorted(f"{method.upper()} {path}" for path, method, _ in operations(spec))
    assert {"POST /suggest", "GET /frontend/settings", "GET /v1/models", "GET /metrics"} <= set(shown)
    pg.screenshot(path=str(artifacts / "docs.png"))
    # Everything from the server itself (no CDN, no validator badge): the appliance may be offline.
    assert {urlsplit(url).netloc for url in pg.requested} == {urlsplit(server.url).netloc}
    assert pg.errors == []
    assert (
        httpx.get(f"{server.url}/docs/assets/swagger-ui-bundle.js")
        .headers["content-type"]
        .startswith("text/javascript")
    )
    # The package's own demo page (which loads a document from the internet) is not served.
    assert httpx.get(f"{server.url}/docs/assets/index.html").status_code == 404


@pytest.mark.browser
def test_try_it_out_sends_the_example_and_shows_the_translation(explorer, server):
    pg = explorer(server.url)
    op = try_out(pg, "post_translate")
    example = {"q": "Hello, world!", "source": "auto", "target": "de"}
    assert json.loads(pg.input_value(f"{op} textarea.body-param__text")) == example
    response = execute(pg, op)
    assert response.status == 200 and response.request.post_data_json == example
    assert pg.inner_text(f"{op} .live-responses-table tbody .response-col_status") == "200"
    shown = json.loads(pg.inner_text(f"{op} .live-responses-table tbody .response-col_description pre"))
    assert shown == response.json() and shown["translatedText"]
    languages = execute(pg, try_out(pg, "get_languages"))
    assert languages.status == 200 and len(languages.json()) == 38


@pytest.mark.browser
def test_try_it_out_of_a_document_with_the_example_target(explorer, server, tmp_path):
    """A form with a file: the target its example, the fields the model has no prompt for left out, the key empty."""
    document = tmp_path / "note.txt"
    document.write_text("Hello there.\nGoodbye.\n", encoding="utf-8")
    pg = explorer(server.url)
    op = try_out(pg, "post_translate_file")
    pg.set_input_files(f"{op} input[type=file]", str(document))
    response = execute(pg, op)
    assert response.status == 200, response.text()
    assert response.json()["name"] == "note.de.txt"


@pytest.mark.browser
def test_try_it_out_with_keys_through_authorize(explorer, keyed_server):
    pg = explorer(keyed_server.url)
    op = try_out(pg, "post_translate")
    assert execute(pg, op).status == 401
    pg.click(".auth-wrapper .authorize")
    schemes = pg.eval_on_selector_all(".modal-ux .auth-container h4", "els => els.map(e => e.textContent)")
    assert [s.split()[0] for s in schemes] == ["bearer", "deepl"]
    pg.fill(".modal-ux .auth-container:has-text('bearer') input", KEY)
    pg.click(".modal-ux .auth-container:has-text('bearer') .btn.authorize")
    pg.click(".modal-ux .btn-done")
    response = execute(pg, op)
    assert response.status == 200 and response.request.headers["authorization"] == f"Bearer {KEY}"


def request_examples(spec: dict):
    """(operation, example, schema) for each example of a request body: a media type's, or one of a field's (a form
    with a file, which the explorer has the person choose)."""
    for path, method, operation in operations(spec):
        for media, content in operation.get("requestBody", {}).get("content", {}).items():
            name = f"{method.upper()} {path} ({media})"
            if "example" in content:
                yield name, content["example"], content["schema"]
            for field, schema in content["schema"].get("properties", {}).items():
                for example in schema.get("examples", []):
                    yield f"{name} {field}", example, schema


@pytest.mark.parametrize(
    "settings,best,offered",
    [
        (Settings(), False, frozenset()),
        (Settings(api_keys=(KEY,)), True, frozenset({"style", "background"})),
        (Settings(max_chars=20), False, frozenset({"background"})),
    ],
)
def test_every_request_body_has_an_example_valid_against_its_schema(settings, best, offered):
    spec = build_spec(settings, best, offered)
    examples = list(request_examples(spec))
    bodies = {f"{method.upper()} {path}" for path, method, op in operations(spec) if "requestBody" in op}
    assert {" ".join(name.split()[:2]) for name, _, _ in examples} == bodies
    for name, example, schema in examples:
        errors = list(Draft202012Validator({**schema, "components": spec["components"]}).iter_errors(example))
        assert not errors, (name, example, [e.message for e in errors])


def test_the_examples_are_answered_as_documented(server):
    """Each example of a JSON or urlencoded body of an operation without path parameters, sent as it is: answered
    with the operation's documented success (or, for /suggest, which has none, its one documented status)."""
    spec = httpx.get(f"{server.url}/openapi.json").json()
    sent = set()
    for path, method, operation in operations(spec):
        for media, body in (("application/json", "json"), ("application/x-www-form-urlencoded", "data")):
            content = operation.get("requestBody", {}).get("content", {}).get(media)
            if content is None or "example" not in content or "{" in path:  # a missing one: the test above
                continue
            response = httpx.request(method, f"{server.url}{path}", **{body: content["example"]}, timeout=60)
            statuses = sorted(operation["responses"])
            expected = next((status for status in statuses if status.startswith("2")), statuses[0])
            assert str(response.status_code) == expected, (path, media, response.text)
            sent.add(f"{method.upper()} {path}")
    assert {"POST /translate", "POST /detect", "POST /api/translate", "POST /v1/chat/completions"} <= sent
