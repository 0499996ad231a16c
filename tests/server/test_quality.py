"""Quality "best", glossaries and the model's name through every API, on real servers: HY-MT1.5-7B with the tiny
Chimera beside it, Chimera serving alone, and Hunyuan-MT-7B without a fusion model (the mode refused)."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from servers import Server

GLOSSARY = [{"source": "GPU", "target": "Grafikkarte"}]


def _card(gb: float, capability: tuple[int, int]):
    import dataclasses

    from hymt.planner.gpu import simulate

    return dataclasses.replace(simulate(None, gb), compute_capability=capability)


@pytest.mark.parametrize(
    "card_gb,capability,translation,fusion",
    [
        (8, (8, 9), "int4-int8kv", None),
        (12, (8, 9), "fp8-int8kv", None),
        (12, (8, 6), "int4", None),
        (16, (8, 9), "int4-int8kv", "nf4-int8kv"),
        (24, (8, 9), "fp8", "nf4"),
        (24, (8, 6), "int4", "nf4"),
        (48, (8, 9), "bf16", "bf16"),
        (80, (8, 9), "bf16", "bf16"),
    ],
)
def test_planner_places_the_fusion_model_beside_the_translation_model_or_refuses(
    card_gb, capability, translation, fusion
):
    from hymt.planner.fusion import fusion_need_bytes, fusion_settings, plan_with_fusion
    from hymt.planner.gpu import GIB
    from hymt.planner.plan import plan
    from hymt.planner.shapes import HUNYUAN_MT_7B_SHAPE
    from hymt.settings import Settings
    from hymt.tiers import TIERS, TIERS_BY_NAME

    settings = Settings(fusion_model="/models/Hunyuan-MT-Chimera-7B")
    decision = plan_with_fusion(HUNYUAN_MT_7B_SHAPE, HUNYUAN_MT_7B_SHAPE, _card(card_gb, capability), settings)
    assert decision.profile == translation
    if fusion is None:
        assert decision.fusion.placement == "refused" and "no room for both" in decision.fusion.reason
        assert decision == plan(HUNYUAN_MT_7B_SHAPE, _card(card_gb, capability), settings).with_fusion(decision.fusion)
        return
    own = decision.fusion.decision
    assert decision.fusion.placement == "resident" and own.profile == fusion
    assert own.max_in_flight == 4 and own.max_seq_tokens > decision.max_seq_tokens
    tier = decision.numbers.tiers[translation]
    need = fusion_need_bytes(HUNYUAN_MT_7B_SHAPE, TIERS_BY_NAME[fusion], fusion_settings(settings))
    assert tier.weight_bytes + tier.transient_bytes + decision.kv_cache_bytes + need <= card_gb * GIB
    # Out of memory at start-up, the fusion model steps down inside what is set aside for it, with real numbers.
    for lower in (t for t in TIERS[TIERS.index(own.tier) + 1 :] if t.auto):
        stepped = own.with_tier(lower, "stepped down")
        per_token = HUNYUAN_MT_7B_SHAPE.kv_bytes_per_token(lower.kv_cache)
        assert stepped.kv_cache_tokens >= own.kv_cache_tokens and stepped.max_in_flight == 4
        assert stepped.kv_cache_bytes == stepped.kv_cache_tokens * per_token > 0


def test_planning_knows_chimera_serves_itself_and_a_missing_fusion_model(family_model):
    from hymt.planner.decide import decision_for
    from hymt.settings import Settings

    chimera = decision_for(Settings(model=str(family_model("hunyuan-mt-chimera-7b")), profile="cpu"))
    assert chimera.fusion.placement == "same"
    alone = decision_for(Settings(model=str(family_model("hy-mt1.5-7b")), profile="cpu"))
    assert alone.fusion.placement == "off" and "HYMT_FUSION_MODEL" in alone.fusion.reason
    both = decision_for(
        Settings(
            model=str(family_model("hy-mt1.5-7b")),
            profile="cpu",
            fusion_model=str(family_model("hunyuan-mt-chimera-7b")),
        )
    )
    assert both.fusion.placement == "resident" and both.fusion.decision.profile == "cpu"


def _wait_for_fusion(server: Server, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = httpx.get(f"{server.url}/health").json()
        if health["quality"]["best"]:
            return health
        time.sleep(0.3)
    raise TimeoutError(f"quality best not available: {health['quality']}")


@pytest.fixture(scope="module")
def glossary_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("glossaries")
    (folder / "server.tsv").write_text("en\tde\ndriver\tTreiber\n")
    return folder


@pytest.fixture(scope="module")
def server(family_model, glossary_dir, tmp_path_factory):
    srv = Server(
        family_model("hy-mt1.5-7b"),
        tmp_path_factory.mktemp("logs") / "quality.log",
        HYMT_FUSION_MODEL=str(family_model("hunyuan-mt-chimera-7b")),
        HYMT_GLOSSARIES=str(glossary_dir),
    )
    srv.wait_healthy()
    _wait_for_fusion(srv)
    yield srv
    srv.stop()


def test_health_and_models_name_the_model_and_the_fusion_placement(server):
    health = httpx.get(f"{server.url}/health").json()
    assert health["model_family"]["name"] == "HY-MT1.5-7B" and health["model_family"]["source"] == "config.json"
    assert health["quality"] == {
        "best": True,
        "placement": "resident",
        "fusion_profile": "cpu",
        "candidates": 6,
        "fusion_model": "Hunyuan-MT-Chimera-7B",
        "reason": health["quality"]["reason"],
    }
    assert health["context"] is True and health["glossaries"]["files"] == 1
    models = httpx.get(f"{server.url}/v1/models").json()["data"]
    assert {m["root"] for m in models} == {"HY-MT1.5-7B"}
    spec = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    for path in ("/translate", "/api/translate", "/v1/chat/completions"):
        fields = spec[path]["post"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert {"glossary", "context", "quality"} <= set(fields) and "422" in spec[path]["post"]["responses"]


def test_glossary_terms_are_checked_and_misses_reported_per_segment(server):
    body = httpx.post(
        f"{server.url}/translate",
        timeout=60,
        json={
            "q": ["The GPU is fast.\nNo terms here.", "A new driver."],
            "source": "en",
            "target": "de",
            "glossary": GLOSSARY,
        },
    ).json()
    assert len(body["translatedText"]) == 2
    report = body["glossary"]
    assert report["terms_applied"] == 2 and report["segments_with_terms"] == 2
    # The random-weight model writes neither term: each miss was retried once, then reported where it happened.
    assert [(m["document"], m["segment"], m["retried"]) for m in report["misses"]] == [(0, 0, True), (1, 0, True)]
    assert report["misses"][1]["missing"] == [{"source": "driver", "target": "Treiber"}]
    form = httpx.post(
        f"{server.url}/translate",
        data={"q": "The GPU.", "source": "en", "target": "de", "glossary": json.dumps(GLOSSARY)},
    ).json()
    assert form["glossary"]["terms_applied"] == 1
    plain = httpx.post(f"{server.url}/translate", json={"q": "Nothing.", "source": "en", "target": "fr"}).json()
    assert "glossary" not in plain


def test_a_stream_never_shows_a_translation_that_a_retry_replaces(server):
    from openai import OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    messages = [{"role": "user", "content": "The GPU is fast."}]
    extra = {"glossary": GLOSSARY, "source_language": "en"}
    whole = client.chat.completions.create(model="hunyuan-mt:de", messages=messages, extra_body=extra)
    chunks = list(
        client.chat.completions.create(model="hunyuan-mt:de", messages=messages, extra_body=extra, stream=True)
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert streamed == whole.choices[0].message.content
    assert chunks[-1].model_extra["glossary"]["misses"][0]["retried"] is True


def test_server_glossary_is_read_again_without_a_restart(server, glossary_dir):
    def applied() -> int:
        body = httpx.post(
            f"{server.url}/api/translate",
            timeout=60,
            json={"text": "Install the kernel module.", "source": "en", "target": "de"},
        ).json()
        return body["glossary"]["terms_applied"] if body["glossary"] else 0

    assert applied() == 0
    path = glossary_dir / "kernel.csv"
    path.write_text("en,de\nkernel module,Kernelmodul\n")
    os.utime(path, ns=(time.time_ns() + 10**9,) * 2)
    assert applied() == 1
    assert httpx.get(f"{server.url}/health").json()["glossaries"]["files"] == 2


def test_best_quality_on_every_api(server):
    libre = httpx.post(
        f"{server.url}/translate",
        timeout=120,
        json={"q": "Hello. Goodbye.\nSecond line.", "source": "en", "target": "de", "quality": "best"},
    ).json()
    assert libre["translatedText"].count("\n") == 1
    page = httpx.post(
        f"{server.url}/api/translate",
        timeout=120,
        json={"text": "Hello.", "source": "en", "target": "de", "quality": "best", "glossary": GLOSSARY},
    ).json()
    assert page["quality"] == "best" and page["translatedText"] and page["glossary"] is None
    assert "unfused_segments" not in page  # the resident fusion translator has room for the six candidates
    with httpx.stream(
        "POST",
        f"{server.url}/api/translate",
        timeout=120,
        json={"text": "One.\nTwo.", "source": "en", "target": "de", "quality": "best", "stream": True},
    ) as response:
        kinds = [line[7:] for line in response.iter_lines() if line.startswith("event: ")]
    assert kinds[:2] == ["start", "candidates"] and kinds[-1] == "done" and kinds[2:-1] == ["progress"] * 2

    from openai import OpenAI

    client = OpenAI(base_url=f"{server.url}/v1", api_key="unused")
    reply = client.chat.completions.create(
        model="hunyuan-mt:de", extra_body={"quality": "best"}, messages=[{"role": "user", "content": "Hello."}]
    )
    assert reply.choices[0].message.content
    chunks = list(
        client.chat.completions.create(
            model="hunyuan-mt:de",
            stream=True,
            extra_body={"quality": "best", "glossary": GLOSSARY},
            messages=[{"role": "user", "content": "The GPU."}],
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks)
    assert chunks[-1].model_extra["glossary"]["terms_applied"] == 1


def test_fusion_prompt_holds_the_six_candidates_and_unfitting_segments_keep_the_greedy_one(family_model):
    from hymt.engine.sampling_params import Sampling
    from hymt.languages import resolve
    from hymt.planner.decide import decision_for
    from hymt.prompts import fusion_message, render
    from hymt.settings import Settings
    from hymt.translation.candidates import CANDIDATE_SAMPLINGS
    from hymt.translation.translator import start

    # Room for the tiny model's candidates (random tokens, about 170 prompt tokens each) beside a short line.
    settings = Settings(
        model=str(family_model("hunyuan-mt-chimera-7b")),
        profile="cpu",
        greedy=True,
        max_new_tokens=12,
        max_segment_tokens=1536,
    )
    translator = start(settings, decision_for(settings))
    try:
        en, de = resolve("en"), resolve("de")
        jobs = [
            translator.submit([("Hi.\nA much longer second line " + "word " * 340, en)], de, sampling)
            for sampling in CANDIDATE_SAMPLINGS
        ]
        for job in jobs:
            job.wait(120)
        assert [job.requests[0].sampling for job in jobs] == list(CANDIDATE_SAMPLINGS)
        fused = translator.submit_fusion(jobs, Sampling(greedy=True))
        fused.wait(120)
        tokenizer = translator.tokenizer
        expected = render(tokenizer, fusion_message(en, de, "Hi.", [job.results[0].text for job in jobs]))
        assert tokenizer.decode(fused.requests[0].prompt_ids) == expected
        # The long line's six candidates do not fit one KV range with its output: its greedy candidate stands.
        assert fused.unfused == {1} and fused.results[1] == jobs[0].results[1]
        assert fused.flags()["unfused_segments"] == 1
    finally:
        translator.stop()


@pytest.mark.parametrize(
    "body,error_type",
    [
        ({"quality": "great"}, "invalid_value"),
        ({"glossary": "GPU=Grafikkarte"}, "invalid_json"),
        ({"glossary": [{"source": "GPU"}]}, "invalid_type"),
        ({"context": "sometimes"}, "invalid_type"),
    ],
)
def test_bad_quality_fields_get_a_400(server, body, error_type):
    for path, text_field in (("/translate", "q"), ("/api/translate", "text")):
        response = httpx.post(f"{server.url}{path}", json={text_field: "Hi.", "source": "en", "target": "de", **body})
        assert response.status_code == 400 and response.json()["error_type"] == error_type


def test_without_a_fusion_model_best_is_refused_with_the_reason(test_model, tmp_path):
    srv = Server(test_model, tmp_path / "plain.log")
    try:
        health = srv.wait_healthy()
        assert health["model_family"]["name"] == "Hunyuan-MT-7B" and health["context"] is False
        assert health["quality"]["best"] is False and health["quality"]["placement"] == "off"
        for path, body in (
            ("/translate", {"q": "Hi."}),
            ("/api/translate", {"text": "Hi.", "stream": True}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi."}]}),
        ):
            response = httpx.post(
                f"{srv.url}{path}",
                json={**body, "source": "en", "target": "de", "model": "hunyuan-mt:de", "quality": "best"},
            )
            assert response.status_code == 422, response.text
            assert response.json()["error_type"] == "quality_unavailable"
            assert "HYMT_FUSION_MODEL" in response.text
    finally:
        srv.stop()


def test_chimera_served_alone_fuses_its_own_candidates(family_model, tmp_path):
    srv = Server(family_model("hunyuan-mt-chimera-7b"), tmp_path / "chimera.log")
    try:
        health = srv.wait_healthy()
        assert health["model_family"]["name"] == "Hunyuan-MT-Chimera-7B"
        assert health["quality"]["best"] is True and health["quality"]["placement"] == "same"
        body = httpx.post(
            f"{srv.url}/api/translate",
            timeout=120,
            json={"text": "Hello.", "source": "en", "target": "de", "quality": "best"},
        ).json()
        assert body["translatedText"] and body["quality"] == "best" and body["segments"] == 1
    finally:
        srv.stop()
