"""A 1.8B model (Hy-MT2-1.8B's test model: the other vocabulary, full-width special tokens, tied embeddings) served
by a real `hymt serve`: /translate, the OpenAI client, the page's endpoint (streamed) and the page itself, a
document, /health, /v1/models and the OpenAPI document, and the request options style and background."""

from __future__ import annotations

import httpx
import pytest
import torch

from hymt.cleanup import clean
from hymt.family import HY_MT2_1_8B
from servers import serving

TEXT = "Hello world. How are you?"
INSTRUCTION = (
    "Translate the following text into German. Note that you should only output the translated result "
    "without any additional explanation:\n\n"
)


@pytest.fixture(scope="module")
def checkpoint(family_model):
    return family_model(HY_MT2_1_8B.key)


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    with serving(checkpoint, tmp_path_factory.mktemp("logs") / "small.log") as srv:
        yield srv


@pytest.fixture(scope="module")
def expected(checkpoint):
    """What the served model answers (greedy, 12 tokens) to a message in Hy-MT2-1.8B's template, computed here with
    transformers from the official prompt written out."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)

    def answer(message: str, source: str = TEXT) -> str:
        prompt = f"<｜hy_begin▁of▁sentence｜><｜hy_User｜>{message}<｜hy_Assistant｜>"
        ids = torch.tensor([tokenizer(prompt, add_special_tokens=False)["input_ids"]])
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=12,
            do_sample=False,
            repetition_penalty=1.05,
            eos_token_id=120020,
            pad_token_id=120002,
        )
        return clean(source, tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)).text

    return answer


def test_translate_answers_with_the_official_prompt(server, expected):
    body = httpx.post(f"{server.url}/translate", json={"q": TEXT, "source": "en", "target": "de"}).json()
    assert body["translatedText"] == expected(INSTRUCTION + TEXT) != ""


def test_openai_client(server, expected):
    from openai import OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    reply = client.chat.completions.create(
        model="hunyuan-mt:de", messages=[{"role": "user", "content": TEXT}], extra_body={"source_language": "en"}
    )
    assert reply.choices[0].message.content == expected(INSTRUCTION + TEXT)
    styled = client.chat.completions.create(
        model="hunyuan-mt:de",
        messages=[{"role": "user", "content": TEXT}],
        extra_body={"source_language": "en", "style": "formal"},
    )
    assert styled.choices[0].message.content == expected(
        "Please translate the following text into German. Note that the translation style must strictly conform to "
        f"[formal]:\n\n{TEXT}"
    )
    (model,) = [m for m in client.models.list().data if m.id == "hunyuan-mt"]
    assert model.model_extra == {"root": "Hy-MT2-1.8B", "license": "Apache-2.0"}


def test_page_endpoint_streams_and_takes_a_background(server, expected):
    from servers import sse_events

    body = {"text": TEXT, "source": "en", "target": "de", "stream": True, "background": "A letter to a friend."}
    with httpx.stream("POST", f"{server.url}/api/translate", json=body, timeout=60) as response:
        events = list(sse_events(response))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done", events
    assert events[-1][1]["translatedText"] == expected(
        "[Background Information]\nA letter to a friend.\n\nPlease translate the following text into German, taking "
        f"the provided background information into consideration.\n\n[Source Text]\n{TEXT}"
    )


def test_a_document_is_translated(server):
    files = {"file": ("note.txt", b"Good morning.\nSee you soon.\n", "text/plain")}
    response = httpx.post(
        f"{server.url}/translate_file", files=files, data={"source": "en", "target": "de"}, timeout=60
    )
    assert response.status_code == 200, response.text
    translated = httpx.get(response.json()["translatedFileUrl"]).text
    assert translated.count("\n") == 2 and response.json()["segments"] == 2


def test_health_openapi_and_bad_options(server):
    family = httpx.get(f"{server.url}/health").json()["model_family"]
    assert family["name"] == "Hy-MT2-1.8B" and family["license"] == "Apache-2.0" and family["style_prompt"]
    fields = httpx.get(f"{server.url}/openapi.json").json()["paths"]["/translate"]["post"]["requestBody"]
    style = fields["content"]["application/json"]["schema"]["properties"]["style"]
    assert style["type"] == ["string", "null"] and style["maxLength"] == 200
    both = httpx.post(f"{server.url}/translate", json={"q": TEXT, "target": "de", "style": "formal", "background": "x"})
    assert both.status_code == 422 and both.json()["error_type"] == "unsupported_combination"
    blank = httpx.post(f"{server.url}/api/translate", json={"text": TEXT, "target": "de", "style": "  "})
    assert blank.status_code == 400 and blank.json()["error_type"] == "empty_text"
    long = httpx.post(f"{server.url}/translate", data={"q": TEXT, "target": "de", "style": "x" * 201})
    assert long.status_code == 400 and long.json()["error_type"] == "text_too_long"


@pytest.mark.browser
def test_the_page_shows_the_model_its_license_and_the_style_it_offers(browser, server):
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.goto(server.url + "/")
    page.wait_for_function("document.querySelector('#model').textContent === 'Hy-MT2-1.8B'")
    assert page.inner_text("#license") == "License: Apache-2.0"
    assert page.is_visible("#style") and page.is_visible("#background")
    page.select_option("#source", "en")
    page.select_option("#target", "de")
    page.fill("#style", "formal")
    page.fill("#input", TEXT)
    with page.expect_request("**/api/translate") as sent:
        page.click("#translate")
    assert sent.value.post_data_json["style"] == "formal" and "background" not in sent.value.post_data_json
    page.wait_for_function("document.querySelector('#output').textContent.length > 0")
    context.close()


def test_schemathesis_where_style_and_background_are_offered(checkpoint, tmp_path):
    """The OpenAPI document stays exact where the model has the instruction prompts: text accepted, both refused."""
    from fuzzing import LIMITS, schemathesis

    with serving(checkpoint, tmp_path / "fuzz.log", **LIMITS) as srv:
        schemathesis(srv.url, tmp_path, "--max-examples", "10", "--seed", "19")


def test_html_markup_goes_through_the_formatted_prompt(server):
    html = "<p>Press <b>Save</b> now.</p>"
    body = httpx.post(
        f"{server.url}/translate", json={"q": html, "source": "en", "target": "de", "format": "html"}, timeout=120
    ).json()
    out = body["translatedText"]
    # Random weights drop markers: then the safe form (the words, no <b>) is reported.
    assert out.startswith("<p>") and (("<b>" in out and "</b>" in out) or body["markup_fallback_segments"] == 1)
