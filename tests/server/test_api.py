"""The HTTP API through a real uvicorn server on localhost, with real LibreTranslate and OpenAI clients."""

from __future__ import annotations

import concurrent.futures
import json
import time

import httpx
import pytest

from servers import Server


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    srv = Server(test_model, tmp_path_factory.mktemp("logs") / "api.log", HYMT_MAX_CHARS="500", HYMT_MAX_TEXTS="5")
    srv.wait_healthy()
    yield srv
    srv.stop()


def test_libretranslate_client(server):
    from libretranslatepy import LibreTranslateAPI

    lt = LibreTranslateAPI(server.url)
    out = lt.translate("Hello world. How are you?", "en", "zh")
    assert isinstance(out, str) and out
    detected = lt.detect("Guten Tag, wie geht es Ihnen heute?")
    assert detected[0]["language"] == "de" and 0 < detected[0]["confidence"] <= 100
    codes = {lang["code"] for lang in lt.languages()}
    assert len(codes) == 38 and {"bo", "ug", "kk", "mn", "yue", "zh-Hant"} <= codes


def test_libretranslate_list_and_auto_source(server):
    body = httpx.post(
        f"{server.url}/translate",
        json={"q": ["Good morning.", "Bonjour à tous, comment ça va ?"], "source": "auto", "target": "ja"},
    ).json()
    assert len(body["translatedText"]) == 2
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "fr"]


def test_html_format_keeps_markup(server):
    html = '<p class="x">Hello <b>world</b> &amp; friends</p><script>var a = "keep me";</script>'
    body = httpx.post(
        f"{server.url}/translate", json={"q": html, "source": "en", "target": "de", "format": "html"}, timeout=120
    ).json()
    out = body["translatedText"]
    assert out.startswith('<p class="x">') and out.endswith('<script>var a = "keep me";</script>')
    # One sentence, one segment: its <b> comes back, or (random weights drop markers) the safe form is reported.
    assert ("<b>" in out and "</b>" in out) or body["markup_fallback_segments"] == 1


def test_frontend_settings(server):
    body = httpx.get(f"{server.url}/frontend/settings").json()
    assert body["charLimit"] == 500 and body["keyRequired"] is False


def test_openai_client(server):
    from openai import BadRequestError, OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    reply = client.chat.completions.create(model="hunyuan-mt:de", messages=[{"role": "user", "content": "Hello."}])
    assert reply.choices[0].message.content and reply.choices[0].finish_reason == "stop"
    via_field = client.chat.completions.create(
        model="hunyuan-mt",
        extra_body={"target_language": "de"},
        messages=[{"role": "user", "content": "Hello."}],
        temperature=0,
    )
    assert via_field.choices[0].message.content == reply.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model="hunyuan-mt:de", stream=True, messages=[{"role": "user", "content": "Hello. Goodbye."}]
        )
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed and chunks[-1].choices[0].finish_reason == "stop"
    assert "hunyuan-mt:bo" in {m.id for m in client.models.list()}
    with pytest.raises(BadRequestError) as err:
        client.chat.completions.create(model="hunyuan-mt", messages=[{"role": "user", "content": "Hello."}])
    assert "target language" in str(err.value)


def test_style_and_background_are_refused_by_a_model_without_their_prompts(server):
    from openai import OpenAI, UnprocessableEntityError

    for path, body in (
        ("/translate", {"q": "Hello.", "target": "de", "style": "formal"}),
        ("/api/translate", {"text": "Hello.", "target": "de", "background": "A letter."}),
    ):
        refused = httpx.post(f"{server.url}{path}", json=body)
        assert refused.status_code == 422 and "the model served is Hunyuan-MT-7B" in refused.json()["error"]
    with pytest.raises(UnprocessableEntityError, match="official style prompt"):
        OpenAI(base_url=f"{server.url}/v1", api_key="unused").chat.completions.create(
            model="hunyuan-mt:de", messages=[{"role": "user", "content": "Hello."}], extra_body={"style": "formal"}
        )
    assert httpx.post(f"{server.url}/translate", json={"q": "Hello.", "target": "de", "style": None}).status_code == 200
    properties = httpx.get(f"{server.url}/openapi.json").json()["paths"]["/translate"]["post"]["requestBody"]
    assert properties["content"]["application/json"]["schema"]["properties"]["style"]["type"] == "null"
    assert properties["content"]["multipart/form-data"]["schema"]["properties"]["background"]["not"] == {}


def _sse(response) -> list[tuple[str, dict]]:
    events, kind = [], None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            events.append((kind, json.loads(line[6:])))
    return events


def test_page_endpoint_streams_progress_then_done(server):
    text = "First sentence.\nSecond one.\n\nThird."
    with httpx.stream(
        "POST", f"{server.url}/api/translate", json={"text": text, "source": "en", "target": "zh", "stream": True}
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = _sse(response)
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and kinds.count("progress") == 3
    assert [b["done"] for k, b in events if k == "progress"] == [1, 2, 3]
    # Between them, the text as it is generated: a segment's words appear before the segment ends.
    tokens = [b for k, b in events if k == "token"]
    assert tokens and tokens[0]["done"] == 0 and tokens[0]["partial"]
    final = events[-1][1]["translatedText"]
    assert final.count("\n") == 3 and final.split("\n")[2] == ""
    plain = httpx.post(f"{server.url}/api/translate", json={"text": text, "source": "en", "target": "zh"}).json()
    assert plain["translatedText"] == final and plain["segments"] == 3


BAD_INPUTS = [
    ("/translate", {"content": b"{not json", "headers": {"content-type": "application/json"}}, 400, "invalid_json"),
    ("/translate", {"json": ["a list"]}, 400, "invalid_json"),
    ("/translate", {"json": {"target": "de"}}, 400, "missing_field"),
    ("/translate", {"json": {"q": "hi"}}, 400, "missing_field"),
    ("/translate", {"json": {"q": 5, "target": "de"}}, 400, "invalid_type"),
    ("/translate", {"json": {"q": ["a", 3], "target": "de"}}, 400, "invalid_type"),
    ("/translate", {"json": {"q": "hi", "target": "xx"}}, 400, "unsupported_language"),
    ("/translate", {"json": {"q": "hi", "source": "qq", "target": "de"}}, 400, "unsupported_language"),
    ("/translate", {"json": {"q": "hi", "target": "auto"}}, 400, "unsupported_language"),
    ("/translate", {"json": {"q": "   ", "target": "de"}}, 400, "empty_text"),
    ("/translate", {"json": {"q": [], "target": "de"}}, 400, "empty_text"),
    ("/translate", {"json": {"q": "x" * 501, "target": "de"}}, 400, "text_too_long"),
    ("/translate", {"json": {"q": ["a"] * 6, "target": "de"}}, 400, "too_many_texts"),
    ("/translate", {"json": {"q": "hi", "target": "de", "format": "pdf"}}, 400, "invalid_value"),
    ("/translate", {"content": b"x" * 3_000_000, "headers": {"content-type": "application/json"}}, 413, "too_large"),
    ("/detect", {"json": {}}, 400, "missing_field"),
    ("/api/translate", {"json": {"text": "hi", "target": "de", "stream": "maybe"}}, 400, "invalid_type"),
    ("/v1/chat/completions", {"json": {"model": "hunyuan-mt:de"}}, 400, "missing_field"),
    (
        "/v1/chat/completions",
        {"json": {"model": "hunyuan-mt:de", "messages": [{"role": "system", "content": "x"}]}},
        400,
        "missing_field",
    ),
    (
        "/v1/chat/completions",
        {"json": {"model": "hunyuan-mt:zz", "messages": [{"role": "user", "content": "x"}]}},
        400,
        "unsupported_language",
    ),
    (
        "/v1/chat/completions",
        {"json": {"model": "hunyuan-mt:de", "temperature": "hot", "messages": [{"role": "user", "content": "x"}]}},
        400,
        "invalid_value",
    ),
    ("/nowhere", {"json": {}}, 404, "not_found"),
]


@pytest.mark.parametrize("path,kwargs,status,error_type", BAD_INPUTS)
def test_bad_inputs_get_a_4xx_with_a_json_body(server, path, kwargs, status, error_type):
    response = httpx.post(f"{server.url}{path}", timeout=30, **kwargs)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_type"] == error_type and body["error"]
    assert "Traceback" not in response.text


def test_health_metrics_openapi_docs(server):
    health = httpx.get(f"{server.url}/health").json()
    for key in (
        "status",
        "gpu_memory_used_gb",
        "gpu_memory_total_gb",
        "profile",
        "model",
        "queue_depth",
        "uptime_s",
        "in_flight",
        "kv_cache_used_tokens",
    ):
        assert key in health
    assert health["status"] == "healthy" and health["gpu_memory_used_gb"] == 0 and health["phase"] == "ready"
    assert health["kv_cache_tokens"] > 0 and health["max_in_flight"] >= 1 and health["startup"]["total_s"] > 0
    metrics = httpx.get(f"{server.url}/metrics").text
    for name in (
        "hymt_requests_total",
        "hymt_request_seconds_bucket",
        "hymt_queue_depth",
        "hymt_tokens_in_total",
        "hymt_tokens_out_total",
        "hymt_gpu_memory_used_bytes",
        "hymt_kv_cache_tokens",
        "hymt_kv_cache_bytes",
        "hymt_max_in_flight",
        "hymt_in_flight",
        "hymt_startup_seconds",
        "hymt_decode_steps_total",
        "hymt_gpu_memory_total_bytes",
        "hymt_oom_recoveries_total",
        "hymt_profile_info",
        'hymt_segment_seconds_bucket{class="interactive",le="+Inf"}',
        'hymt_segment_queue_seconds_count{class="batch"}',
        "hymt_segment_first_token_seconds_sum",
        "hymt_segment_token_seconds_bucket",
    ):
        assert name in metrics
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert {"/translate", "/detect", "/languages", "/v1/chat/completions", "/api/translate"} <= set(spec["paths"])
    assert httpx.get(f"{server.url}/docs").status_code == 200
    # The page and its modules are revalidated on every load, so an upgrade never mixes two versions' modules.
    for path in ("/", "/static/main.js", "/static/style.css"):
        assert httpx.get(f"{server.url}{path}").headers["cache-control"] == "no-cache"


@pytest.fixture(scope="module")
def busy_server(test_model, tmp_path_factory):
    # A small queue and long outputs, so a flood overflows it and a long job is still running when the client leaves.
    srv = Server(
        test_model,
        tmp_path_factory.mktemp("logs") / "busy.log",
        HYMT_MAX_QUEUE_SEGMENTS="40",
        HYMT_MAX_NEW_TOKENS="64",
        HYMT_MAX_IN_FLIGHT="2",
        HYMT_MAX_CHARS="100000",
    )
    srv.wait_healthy()
    yield srv
    srv.stop()


def test_flood_gets_429_with_retry_after_and_nothing_hangs(busy_server):
    text = "\n".join(f"Line number {i} of the flood." for i in range(8))

    def one(_):
        r = httpx.post(f"{busy_server.url}/translate", json={"q": text, "source": "en", "target": "de"}, timeout=120)
        return r.status_code, r.headers.get("retry-after"), r.json()

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, range(24)))
    statuses = [s for s, _, _ in results]
    assert set(statuses) <= {200, 429}
    assert statuses.count(429) >= 1 and statuses.count(200) >= 1
    for status, retry_after, body in results:
        if status == 429:
            assert retry_after and int(retry_after) > 0
            assert body["error_type"] == "overloaded"
        else:
            assert body["translatedText"].count("\n") == 7


def test_client_disconnect_cancels_queued_work(busy_server):
    text = "\n".join(f"Sentence {i} to keep the engine busy." for i in range(38))
    with httpx.stream(
        "POST",
        f"{busy_server.url}/api/translate",
        json={"text": text, "source": "en", "target": "fr", "stream": True},
        timeout=60,
    ) as response:
        for line in response.iter_lines():
            if line.startswith("event: progress"):
                break
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        health = httpx.get(f"{busy_server.url}/health").json()
        if health["queue_depth"] == 0:
            break
        time.sleep(0.2)
    assert health["queue_depth"] == 0
    assert "cancelled" in busy_server.log_path.read_text()


def test_unexpected_error_is_a_500_with_an_id(monkeypatch, caplog, tmp_path):
    from starlette.testclient import TestClient

    from hymt.api import libre
    from hymt.api.app import create_app
    from hymt.planner.plan import plan
    from hymt.planner.shapes import HUNYUAN_MT_7B_SHAPE
    from hymt.settings import Settings
    from hymt.tiers import CPU_TIER

    decision = plan(HUNYUAN_MT_7B_SHAPE, None, Settings())
    assert CPU_TIER.name == decision.profile

    def broken_factory(settings, decision, on_phase):
        raise RuntimeError("no engine in this test")

    monkeypatch.setattr(libre, "detect", lambda text: 1 / 0)
    app = create_app(Settings(model="/nonexistent", data_dir=str(tmp_path)), decision, factory=broken_factory)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/detect", json={"q": "hello"})
        assert response.status_code == 500
        body = response.json()
        assert body["error_type"] == "internal_error" and body["error_id"] in caplog.text
        assert "ZeroDivisionError" not in response.text
        time.sleep(0.2)
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "unhealthy"
        assert client.post("/translate", json={"q": "hi", "target": "de"}).status_code == 503


def test_api_keys_when_configured(test_model, tmp_path):
    srv = Server(test_model, tmp_path / "keys.log", HYMT_API_KEYS="k1,k2")
    try:
        srv.wait_healthy()
        refused = httpx.post(f"{srv.url}/translate", json={"q": "hi", "source": "en", "target": "de"})
        assert refused.status_code == 401 and refused.json()["error_type"] == "invalid_api_key"
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = httpx.post(f"{srv.url}/translate", json={"q": "hi", "target": "de", "api_key": "nope"})
        assert wrong.status_code == 403
        ok = httpx.post(f"{srv.url}/translate", data={"q": "hi", "source": "en", "target": "de", "api_key": "k2"})
        assert ok.status_code == 200
        bearer = httpx.post(
            f"{srv.url}/v1/chat/completions",
            headers={"Authorization": "Bearer k1"},
            json={"model": "hunyuan-mt:de", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert bearer.status_code == 200
        assert httpx.get(f"{srv.url}/frontend/settings").json()["keyRequired"] is True
    finally:
        srv.stop()
