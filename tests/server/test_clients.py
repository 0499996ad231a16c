"""Clients nobody here wrote, as they call a LibreTranslate server: deep-translator, the request shapes Mastodon and
Weblate send, a page on another origin (CORS), and the OpenAI client streaming with usage; plus `alternatives`."""

from __future__ import annotations

import httpx
import pytest

from hymt.api.alternatives import rank
from hymt.errors import ConfigError
from hymt.settings import Settings
from servers import serving

ALLOWED_ORIGIN = "http://allowed.example"


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    with serving(test_model, tmp_path_factory.mktemp("logs") / "clients.log", HYMT_MAX_CHARS="500") as srv:
        yield srv


@pytest.fixture(scope="module")
def keyed_server(test_model, tmp_path_factory):
    """Keys required, and cross-origin calls allowed from one origin only."""
    with serving(
        test_model, tmp_path_factory.mktemp("logs") / "keyed.log", HYMT_API_KEYS="k1", HYMT_CORS_ORIGINS=ALLOWED_ORIGIN
    ) as srv:
        yield srv


def test_deep_translator(server):
    from deep_translator import LibreTranslator

    # deep-translator insists on a key, and sends every field in the query string of a POST without a body.
    translator = LibreTranslator(source="en", target="de", api_key="unused", custom_url=server.url + "/")
    out = translator.translate("Hello world. How are you?")
    assert isinstance(out, str) and out
    batch = translator.translate_batch(["Good morning.", "Good night."])
    assert len(batch) == 2 and all(batch)


def test_deep_translator_with_keys(keyed_server):
    from deep_translator import LibreTranslator
    from deep_translator.exceptions import AuthorizationException

    good = LibreTranslator(source="en", target="fr", api_key="k1", custom_url=keyed_server.url + "/")
    assert good.translate("Hello world.")
    with pytest.raises(AuthorizationException):
        LibreTranslator(source="en", target="fr", api_key="wrong", custom_url=keyed_server.url + "/").translate("Hi")


def test_query_fields_fill_in_a_form_but_the_body_wins(server):
    response = httpx.post(f"{server.url}/translate?target=de&source=en", data={"q": "Hello.", "target": "fr"})
    assert response.status_code == 200, response.text
    plain = httpx.post(f"{server.url}/translate", json={"q": "Hello.", "source": "en", "target": "fr"}).json()
    assert response.json()["translatedText"] == plain["translatedText"]  # greedy: target fr from the body
    bad = httpx.post(f"{server.url}/translate?q=Hello.&target=de&alternatives=lots")
    assert bad.status_code == 400 and bad.json()["error_type"] == "invalid_value"


def test_mastodon_request_without_a_key(server):
    """Mastodon's LibreTranslate provider: a list in q, format html, api_key null when none is configured, and
    /languages read for each source's targets."""
    body = httpx.post(
        f"{server.url}/translate",
        json={
            "q": ["<p>Hello <b>world</b></p>", "<p>Second post</p>"],
            "source": "en",
            "target": "de",
            "format": "html",
            "api_key": None,
        },
        timeout=120,
    ).json()
    assert len(body["translatedText"]) == 2 and all(t.startswith("<p>") for t in body["translatedText"])
    auto = httpx.post(
        f"{server.url}/translate",
        json={
            "q": ["<p>Bonjour à tous, comment ça va ?</p>"],
            "source": "auto",
            "target": "en",
            "format": "html",
            "api_key": None,
        },
        timeout=120,
    ).json()
    assert auto["detectedLanguage"][0]["language"] == "fr"
    languages = httpx.get(f"{server.url}/languages").json()
    by_code = {lang["code"]: lang for lang in languages}
    assert "de" in by_code["en"]["targets"] and "en" not in by_code["en"]["targets"]
    wrong = httpx.post(f"{server.url}/translate", json={"q": "Hi", "target": "de", "api_key": 5})
    assert wrong.status_code == 400 and "api_key" in wrong.json()["error"]


def test_mastodon_null_key_where_keys_are_required(keyed_server):
    body = {"q": ["<p>Hello</p>"], "source": "en", "target": "de", "format": "html", "api_key": None}
    assert httpx.post(f"{keyed_server.url}/translate", json=body).status_code == 401
    ok = httpx.post(f"{keyed_server.url}/translate", json={**body, "api_key": "k1"}, timeout=120)
    assert ok.status_code == 200 and ok.json()["translatedText"][0].startswith("<p>")


def test_weblate_request_shapes(server):
    """Weblate's LibreTranslate machine: a form (no key on a self-hosted server), and a JSON list with keys absent."""
    form = httpx.post(
        f"{server.url}/translate", data={"q": "Save the file", "source": "en", "target": "cs", "format": "text"}
    )
    assert form.status_code == 200 and isinstance(form.json()["translatedText"], str)
    many = httpx.post(
        f"{server.url}/translate", json={"q": ["Open", "Close", "Save as…"], "source": "en", "target": "uk"}
    ).json()
    assert len(many["translatedText"]) == 3


def test_alternatives_are_distinct_candidates_best_first(server):
    body = httpx.post(
        f"{server.url}/translate",
        json={"q": "Hello world. How are you?", "source": "en", "target": "de", "alternatives": 3},
        timeout=120,
    ).json()
    alternatives = body["alternatives"]
    assert len(alternatives) == 3 and all(alternatives)
    assert len({body["translatedText"], *alternatives}) == 4  # distinct, the translation not among them
    listed = httpx.post(
        f"{server.url}/translate",
        json={"q": ["One.", "Two."], "source": "en", "target": "fr", "alternatives": 2},
        timeout=120,
    ).json()
    assert [len(a) for a in listed["alternatives"]] == [2, 2]
    for text, others in zip(listed["translatedText"], listed["alternatives"]):
        assert text not in others and len(set(others)) == 2
    too_many = httpx.post(f"{server.url}/translate", json={"q": "Hi", "target": "de", "alternatives": 4})
    assert too_many.status_code == 400 and "alternatives" in too_many.json()["error"]
    none = httpx.post(f"{server.url}/translate", json={"q": "Hi", "source": "en", "target": "de", "alternatives": 0})
    assert none.json()["alternatives"] == []


def test_rank_puts_the_consensus_first_and_drops_repeats():
    candidates = ["Der Hund schläft.", "Ein Auto fährt.", "Der Hund schläft.", "Der Hund schlief.", " "]
    order = rank(candidates)
    assert order[0] == 0 and order[1] == 3 and sorted(order) == [0, 1, 3]


def test_openai_stream_with_usage(server):
    from openai import OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    messages = [{"role": "user", "content": "Hello. Goodbye."}]
    whole = client.chat.completions.create(model="hunyuan-mt:de", messages=messages)
    chunks = list(
        client.chat.completions.create(
            model="hunyuan-mt:de", messages=messages, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()  # greedy: the same tokens either way
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1])
    plain = list(client.chat.completions.create(model="hunyuan-mt:de", messages=messages, stream=True))
    assert all(c.usage is None for c in plain) and plain[-1].choices[0].finish_reason == "stop"


def test_cors_preflight_and_answers(server):
    preflight = httpx.options(
        f"{server.url}/translate",
        headers={
            "Origin": "http://elsewhere.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, x-custom",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    allowed = {h.strip() for h in preflight.headers["access-control-allow-headers"].lower().split(",")}
    assert {"authorization", "content-type", "x-custom"} <= allowed
    assert "access-control-allow-credentials" not in preflight.headers
    answer = httpx.post(
        f"{server.url}/translate", json={"q": "Hi", "target": "de"}, headers={"Origin": "http://elsewhere.example"}
    )
    assert answer.headers["access-control-allow-origin"] == "*"
    refused = httpx.post(f"{server.url}/translate", json={"target": "de"}, headers={"Origin": "http://x.example"})
    assert refused.status_code == 400 and refused.headers["access-control-allow-origin"] == "*"


def test_cors_limited_to_configured_origins(keyed_server):
    def preflight(origin):
        return httpx.options(
            f"{keyed_server.url}/translate",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )

    ok = preflight(ALLOWED_ORIGIN)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    assert "authorization" in ok.headers["access-control-allow-headers"].lower()
    other = preflight("http://other.example")
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    answer = httpx.post(
        f"{keyed_server.url}/translate",
        json={"q": "Hi", "target": "de"},
        headers={"Origin": "http://other.example", "Authorization": "Bearer k1"},
    )
    assert answer.status_code == 200 and "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize("value", ["example.org", "https://a.example/path", "none,https://a.example"])
def test_cors_setting_refuses_what_is_not_an_origin(value):
    with pytest.raises(ConfigError, match="HYMT_CORS_ORIGINS"):
        Settings.from_env({"HYMT_CORS_ORIGINS": value})
    assert Settings.from_env({}).cors_origins == ("*",)
    assert Settings.from_env({"HYMT_CORS_ORIGINS": "none"}).cors_origins == ("none",)


def test_suggest_is_refused_as_libretranslate_refuses_it_with_suggestions_off(server, keyed_server):
    """LibreTranslate's front-end posts suggestions to /suggest; with suggestions off (as /frontend/settings says)
    LibreTranslate answers 403 with its message, before looking at the body or the key."""
    suggestion = {"q": "Hello, world!", "s": "Hallo, Welt!", "source": "en", "target": "de"}
    assert httpx.get(f"{server.url}/frontend/settings").json()["suggestions"] is False
    for srv in (server, keyed_server):
        for body in ({"json": suggestion}, {"data": suggestion}, {"json": {**suggestion, "api_key": "k1"}}, {}):
            refused = httpx.post(f"{srv.url}/suggest", **body)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "Suggestions are disabled on this server."


def test_openai_usage_counts_the_prompt_the_model_reads(server, test_model):
    """prompt_tokens: the whole prompt (chat template, instruction and text), not the text alone."""
    from openai import OpenAI
    from transformers import AutoTokenizer

    from hymt import prompts
    from hymt.languages import resolve

    text = "Hello, world!"
    reply = OpenAI(base_url=f"{server.url}/v1", api_key="unused").chat.completions.create(
        model="hunyuan-mt:de", messages=[{"role": "user", "content": text}], extra_body={"source_language": "en"}
    )
    tokenizer = AutoTokenizer.from_pretrained(test_model)
    prompt = prompts.render(tokenizer, prompts.user_message(resolve("en"), resolve("de"), text))
    read = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert reply.usage.prompt_tokens == read > len(tokenizer(text, add_special_tokens=False)["input_ids"])
    assert 0 < reply.usage.completion_tokens <= 12  # HYMT_MAX_NEW_TOKENS of the test servers
    assert reply.usage.total_tokens == read + reply.usage.completion_tokens
