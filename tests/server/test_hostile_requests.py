"""Hostile and malformed input against a real server: every answer is a 2xx or a 4xx with a JSON body, never a 5xx,
and the server stays healthy after. The OpenAPI document is fuzzed with schemathesis (all checks, bounded)."""

from __future__ import annotations

import json

import httpx
import pytest

from fuzzing import LIMITS, schemathesis
from servers import Server


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    srv = Server(test_model, tmp_path_factory.mktemp("logs") / "hostile.log", **LIMITS)
    srv.wait_healthy()
    yield srv
    log = srv.log_path.read_text()
    srv.stop()
    assert "Traceback" not in log and " 500 " not in log, log[-3000:]


def post(server, path: str, **kwargs) -> httpx.Response:
    response = httpx.post(f"{server.url}{path}", timeout=60, **kwargs)
    assert response.status_code < 500, response.text
    assert response.headers["content-type"].startswith(("application/json", "text/event-stream")), response.text
    return response


def raw(server, path: str, body: bytes, content_type: str = "application/json", **kwargs) -> httpx.Response:
    return post(server, path, content=body, headers={"content-type": content_type}, **kwargs)


# Every operation fuzzed in turn, two selections of up to 600 s each (fuzzing.py): past the default timeout.
@pytest.mark.timeout(1500)
def test_schemathesis_all_checks_pass(server, tmp_path):
    schemathesis(server.url, tmp_path, "--max-examples", "40", "--seed", "12")


@pytest.mark.timeout(1500)
def test_schemathesis_all_checks_pass_with_keys_required(test_model, tmp_path):
    # With keys, the document declares Bearer authentication: requests without it must get 401, with a wrong
    # one 401 or 403, and every other check holds with the right one.
    srv = Server(test_model, tmp_path / "keys.log", HYMT_API_KEYS="fuzz-key-1", **LIMITS)
    try:
        srv.wait_healthy()
        schemathesis(
            srv.url, tmp_path, "--max-examples", "10", "--seed", "3", "--header", "Authorization: Bearer fuzz-key-1"
        )
    finally:
        srv.stop()
    assert "Traceback" not in srv.log_path.read_text()


# Texts that are valid Unicode but unusual: each is translated (200), and its line structure kept.
ODD_TEXTS = {
    "nul": "Hello\x00world.",
    "bom": "\ufeffHello world.",
    "bidi controls": "Price \u202e123\u202c and \u2067שלום\u2069 today.",
    "combining": "Cafe\u0301 nai\u0308ve re\u0301sume\u0301 \u0915\u094d\u0937.",
    "four-byte": "Emoji \U0001f600\U0001f44d\U0001f3fd and \U00020000\U0002a6d6 ancient \U00010348.",
    "long line without spaces": "x" * 490,
    "long cjk line": "这是一个没有空格的很长的句子" * 30,
    "zero width": "a\u200bb\u200cc\u200dd\u2060e",
    "control characters": "tab\there\x07bell\x1bescape\x7fdel",
    "private use and noncharacters": "\ue000\uf8ff\ufdd0\uffff\U0010ffff",
}


@pytest.mark.parametrize("name", list(ODD_TEXTS))
def test_unusual_unicode_is_translated(server, name):
    text = ODD_TEXTS[name]
    body = post(server, "/translate", json={"q": text, "source": "en", "target": "de"}).json()
    assert isinstance(body["translatedText"], str)
    page = post(server, "/api/translate", json={"text": text, "source": "auto", "target": "zh"})
    assert page.status_code == 200 and "translatedText" in page.json()
    chat = post(
        server, "/v1/chat/completions", json={"model": "hunyuan-mt:fr", "messages": [{"role": "user", "content": text}]}
    )
    assert chat.status_code == 200


def test_mixed_line_endings_keep_their_lines(server):
    body = post(server, "/translate", json={"q": "one\r\ntwo\rthree\nfour", "source": "en", "target": "de"}).json()
    assert body["translatedText"].count("\n") >= 2


@pytest.mark.parametrize("path,field", [("/translate", "q"), ("/detect", "q"), ("/api/translate", "text")])
def test_lone_surrogates_are_a_400(server, path, field):
    for escape in ("\\ud800", "\\udfff", "a\\udc00b", "\\ud800\\ud800"):
        body = f'{{"{field}": "{escape}", "target": "de"}}'.encode()
        response = raw(server, path, body)
        assert response.status_code == 400 and response.json()["error_type"] == "invalid_text", response.text
    chat = raw(
        server,
        "/v1/chat/completions",
        b'{"model": "hunyuan-mt:de", "messages": [{"role": "user", "content": "\\ud83d"}]}',
    )
    assert chat.status_code == 400 and chat.json()["error"]["type"] == "invalid_text"
    key = raw(server, "/translate", b'{"q": "hi", "target": "de", "\\udead": 1}')
    assert key.status_code == 400


BAD_BODIES = [
    (b"\xff\xfe\x00garbage", "invalid_json"),  # not UTF-8 (nor UTF-16 JSON)
    (b'{"q": "caf\xe9", "target": "de"}', "invalid_json"),  # Latin-1 bytes in a UTF-8 body
    (b"[" * 100_000, "invalid_json"),  # nested past any parser's recursion
    (b'{"a":' * 20_000 + b"1" + b"}" * 20_000, "invalid_json"),
    (b'{"q": "hi", "target": "de", "alternatives": NaN}', "invalid_json"),
    (b'{"q": "hi", "target": "de", "temperature": Infinity}', "invalid_json"),
    (b'"just a string"', "invalid_json"),
    (b"null", "invalid_json"),
    (b'{"q": ["a", ["nested"]], "target": "de"}', "invalid_type"),
    (b'{"q": {"text": "hi"}, "target": "de"}', "invalid_type"),
    (b'{"q": "hi", "target": ["de"]}', "invalid_type"),
    (b'{"q": "hi", "target": "de", "source": null}', "missing_field"),
    (b'{"q": "hi", "target": "de", "api_key": 12}', "invalid_type"),
    (b'{"q": "hi", "target": "de", "alternatives": -1}', "invalid_value"),
    (b'{"q": "hi", "target": "de", "format": null}', "invalid_value"),
    (b'{"q": "' + b"y" * 501 + b'", "target": "de"}', "text_too_long"),
]


@pytest.mark.parametrize("body,error_type", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_malformed_json_is_a_400(server, body, error_type):
    response = raw(server, "/translate", body)
    assert response.status_code == 400 and response.json()["error_type"] == error_type, response.text


def test_json_with_a_byte_order_mark_and_a_charset_is_read(server):
    body = b"\xef\xbb\xbf" + json.dumps({"q": "hi", "source": "en", "target": "de"}).encode()
    assert raw(server, "/translate", body, "application/json; charset=utf-8").status_code == 200


def test_huge_bodies_are_a_413_declared_or_streamed(server):
    huge = json.dumps({"q": "word " * 100_000, "target": "de"}).encode()
    assert raw(server, "/translate", huge).status_code == 413

    def chunks():  # no content-length: refused while it streams in
        for _ in range(100):
            yield b" " * 10_000

    streamed = post(server, "/translate", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error_type"] == "too_large"
    many_keys = json.dumps({"q": "hi", "source": "en", "target": "de", **{f"k{i}": i for i in range(10_000)}})
    assert raw(server, "/translate", many_keys.encode()).status_code == 200


@pytest.mark.parametrize(
    "path,content_type",
    [
        ("/translate", "text/plain"),
        ("/translate", "application/xml"),
        ("/detect", "application/octet-stream"),
        ("/api/translate", "application/x-www-form-urlencoded"),
        ("/v1/chat/completions", "multipart/form-data"),
        ("/v1/chat/completions", "text/html"),
    ],
)
def test_other_content_types_are_a_415(server, path, content_type):
    response = raw(server, path, b'{"q": "hi", "target": "de"}', content_type)
    assert response.status_code == 415, response.text
    body = response.json()
    assert (body["error"]["type"] if path.startswith("/v1/") else body["error_type"]) == "unsupported_media_type"


def test_a_form_whose_body_is_json_says_what_is_missing(server):
    response = raw(server, "/translate", b'{"q": "hi", "target": "de"}', "application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json()["error_type"] == "missing_field"


MULTIPART = "multipart/form-data; boundary=XyZ"


def _part(name: str, value: bytes, filename: str | None = None) -> bytes:
    disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
    return f"--XyZ\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"


@pytest.mark.parametrize(
    "body,content_type",
    [
        (b"--XyZ\r\nno headers at all", MULTIPART),  # truncated
        (_part("q", b"hi"), MULTIPART),  # no closing boundary
        (_part("q", b"hi") + b"--XyZ--\r\n", "multipart/form-data"),  # no boundary parameter
        (_part("q", b"hi") + b"--XyZ--\r\n", "multipart/form-data; boundary="),
        (b"--XyZ\r\nContent-Disposition: form-data\r\n\r\nnameless\r\n--XyZ--\r\n", MULTIPART),
        (_part("q", b"hi", filename="a.txt") + _part("target", b"de") + b"--XyZ--\r\n", MULTIPART),  # q as a file
        (b"".join(_part(f"f{i}", b"v") for i in range(1500)) + b"--XyZ--\r\n", MULTIPART),  # too many fields
        (b"".join(_part("q", b"x", filename=f"{i}.txt") for i in range(1500)) + b"--XyZ--\r\n", MULTIPART),
        (b"q=%ED%A0%80&target=de", "application/x-www-form-urlencoded"),  # an encoded lone surrogate
        (b"q=%FF%FE&target=de", "application/x-www-form-urlencoded"),
        (b"q=" + b"a" * 501 + b"&target=de", "application/x-www-form-urlencoded"),
        (b"q=hi&target=de&alternatives=lots", "application/x-www-form-urlencoded"),
    ],
)
def test_multipart_and_form_abuse_is_a_4xx(server, body, content_type):
    response = raw(server, "/translate", body, content_type)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]


def test_a_form_or_query_string_that_is_not_utf8_or_has_too_many_fields_says_which(server):
    form = "application/x-www-form-urlencoded"
    for path, body, said in (
        ("/translate", b"q=%FF%FE&target=de", "the form is not UTF-8 text"),
        ("/translate?q=%FF%FE&target=de", b"", "the query string is not UTF-8 text"),
        ("/translate", b"&".join(b"f%d=v" % i for i in range(1500)), "invalid form: Max number of fields exceeded"),
    ):
        response = raw(server, path, body, form)
        assert response.status_code == 400 and response.json()["error"] == said, response.text


def test_multipart_text_that_is_not_utf8_is_refused(server):
    # Starlette alone reads such a part as Latin-1, and the garbled text would be translated.
    for value in (b"caf\xe9 \xff\xfe", "\ud800".encode("utf-8", "surrogatepass")):
        body = _part("q", value) + _part("source", b"fr") + _part("target", b"de") + b"--XyZ--\r\n"
        response = raw(server, "/translate", body, MULTIPART)
        assert response.status_code == 400 and response.json()["error_type"] == "invalid_text", response.text
        assert response.json()["error"] == "form field 'q' is not UTF-8 text"
    body = _part("q", "café".encode()) + _part("source", b"fr") + _part("target", b"de") + b"--XyZ--\r\n"
    assert raw(server, "/translate", body, MULTIPART).status_code == 200


def test_a_multipart_part_over_the_upload_limit_is_refused(server):
    body = _part("q", b"z" * 250_000) + _part("target", b"de") + b"--XyZ--\r\n"
    response = raw(server, "/translate", body, MULTIPART)
    assert response.status_code == 413


GARBAGE = [
    b"",
    b"\x00" * 64,
    b"PK\x03\x04" + bytes(range(256)) * 4,
    "<p>\ud800</p>".encode("utf-8", "surrogatepass"),
    b"\xff\xfe" + "héllo".encode("utf-16-le"),
    b"<" * 5000,
]


@pytest.mark.parametrize(
    "name",
    [
        "a.docx",
        "a.pptx",
        "a.xlsx",
        "a.epub",
        "a.po",
        "a.xliff",
        "a.html",
        "a.srt",
        "a.vtt",
        "a.md",
        "a.txt",
        "../../etc/passwd.txt",
        "noext",
        "a.exe",
    ],
)
@pytest.mark.parametrize("content", range(len(GARBAGE)))
@pytest.mark.parametrize("endpoint", ["libre", "jobs", "deepl"])
def test_garbage_documents_are_a_4xx_or_translated(server, name, content, endpoint):
    # Every call that takes a document: LibreTranslate's (translated before it answers), and the document jobs' and
    # DeepL's (accepted, then translated in the background). DeepL's statuses have no 415: it says 400.
    path, fields, accepted = {
        "libre": ("/translate_file", {"source": "en", "target": "de"}, (200, 400, 413, 415)),
        "jobs": ("/api/jobs", {"source": "en", "target": "de"}, (202, 400, 413, 415)),
        "deepl": ("/v2/document", {"source_lang": "EN", "target_lang": "DE"}, (200, 400, 413)),
    }[endpoint]
    response = post(server, path, files={"file": (name, GARBAGE[content])}, data=fields)
    assert response.status_code in accepted, response.text
    body = response.json()
    if endpoint == "libre" and response.status_code == 200:
        assert "/download_file/" in body["translatedFileUrl"]
    elif endpoint == "jobs" and response.status_code == 202:
        assert body["status"] in ("queued", "translating", "done") and body["segments_total"] >= 0
    elif endpoint == "deepl":
        assert set(body) == ({"document_id", "document_key"} if response.status_code == 200 else {"message"})


def test_unsupported_methods_get_405_with_allow(server):
    for path, allowed in (("/translate", "POST"), ("/v1/chat/completions", "POST"), ("/health", "GET")):
        response = httpx.request("DELETE", f"{server.url}{path}")
        assert response.status_code == 405 and allowed in response.headers["allow"]
        assert response.json()["error_type"] == "method_not_allowed"


def test_server_is_healthy_after_all_of_it(server):
    health = httpx.get(f"{server.url}/health").json()
    assert health["status"] == "healthy" and health["queue_depth"] == 0
    assert post(server, "/translate", json={"q": "Still here?", "source": "en", "target": "de"}).status_code == 200
