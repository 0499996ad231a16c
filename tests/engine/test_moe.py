"""Hy-MT2-30B-A3B (hy_v3, a Mixture of Experts) on its tiny test model: the checkpoint in the published layout and
loaded through transformers' conversion, the router's choices as transformers makes them, the order of the Q/K norms
and the rotary embedding, greedy decoding through the real engine token for token as `generate` decodes (mixed
lengths, chunked prefill, segments joining a running batch), and what /health says of the model."""

from __future__ import annotations

import json
import time

import pytest
import torch

from hymt.engine.sampling_params import Sampling
from hymt.family import HY_MT2_30B_A3B
from hymt.languages import resolve

GREEDY = Sampling(greedy=True)
EN = resolve("en")
TEXTS = [
    "Hello world.",
    "How are you doing today, my dear friend? I hope all is well.",
    "Good morning.",
    "The quick brown fox jumps over the lazy dog.",
]


@pytest.fixture(scope="module")
def checkpoint(family_model):
    return family_model(HY_MT2_30B_A3B.key)


@pytest.fixture(scope="module")
def model(checkpoint):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def tight_engine(checkpoint):
    """Few rows, small prefill steps: segments queue, join a running batch and are prefilled in chunks."""
    from hymt.planner.decide import decision_for
    from hymt.settings import Settings
    from hymt.translation.translator import start

    settings = Settings(
        model=str(checkpoint), profile="cpu", greedy=True, max_new_tokens=16, max_in_flight=3, prefill_tokens=16
    )
    translator = start(settings, decision_for(settings))
    yield translator
    translator.stop()


def test_the_checkpoint_has_the_published_layout_and_loads_whole(checkpoint, model):
    """Each expert's projections apart, the router and the bias under the published names (what Tencent's files
    hold), converted on loading into transformers' stacked experts: nothing missing, nothing left over."""
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    with safe_open(checkpoint / "model.safetensors", framework="pt") as f:
        names = set(f.keys())
        bias = f.get_tensor("model.layers.1.mlp.expert_bias")
    assert {
        "model.layers.0.mlp.gate_proj.weight",
        "model.layers.1.mlp.router.gate.weight",
        "model.layers.1.mlp.experts.7.gate_proj.weight",
        "model.layers.1.mlp.experts.7.down_proj.weight",
        "model.layers.1.mlp.shared_mlp.up_proj.weight",
        "model.layers.1.self_attn.q_norm.weight",
        "lm_head.weight",
    } <= names
    assert not any("gate_up_proj" in name for name in names) and bias.dtype == torch.float32
    _, info = AutoModelForCausalLM.from_pretrained(checkpoint, output_loading_info=True)
    assert not any(info.values()), info
    config = json.loads((checkpoint / "config.json").read_text())
    assert (config["model_type"], config["vocab_size"], config["eos_token_id"], config["eod_token_id"]) == (
        "hy_v3",
        120832,
        120025,
        120026,
    )
    assert config["mlp_layer_types"][0] == "dense" and set(config["mlp_layer_types"][1:]) == {"sparse"}
    experts = model.model.layers[1].mlp.experts
    assert experts.gate_up_proj.shape == (8, 64, 64) and experts.down_proj.shape == (8, 64, 32)
    assert torch.equal(model.model.layers[1].mlp.e_score_correction_bias, bias)


def test_the_router_chooses_and_weighs_as_transformers(model):
    """Every MoE layer's choice for 40 token states, against HYV3TopKRouter: the same experts in the same order and
    the same weights. The bias decides some choices (so it is in the test model's routing), and the weights are
    the unbiased scores."""
    from hymt.engine.moe import route

    torch.manual_seed(0)
    x = torch.randn(40, model.config.hidden_size)
    changed = 0
    for layer in model.model.layers[1:]:
        mlp = layer.mlp
        _, want_weights, want_index = mlp.gate(x, mlp.e_score_correction_bias)
        weights, index = route(x, mlp.gate.weight, mlp.e_score_correction_bias, model.config.num_experts_per_tok, 2.826)
        assert torch.equal(index, want_index) and torch.equal(weights, want_weights)
        unbiased, _ = route(x, mlp.gate.weight, torch.zeros_like(mlp.e_score_correction_bias), 4, 2.826)
        changed += int((index.sort().values != unbiased.sort().values).any(dim=-1).sum())
        assert torch.allclose(weights.sum(dim=-1), torch.full((40,), 2.826))
    assert changed > 0


def test_the_qk_norm_comes_before_the_rotary_embedding(model):
    """hy_v3's order against the dense models' on the test model's drawn norm weights: they differ, and the
    engine's matches transformers' attention inputs."""
    from transformers.models.hy_v3.modeling_hy_v3 import apply_rotary_pos_emb

    from hymt.engine.model import qk_norm_rope, rope_qk_norm

    attn = model.model.layers[1].self_attn
    torch.manual_seed(1)
    q, k = torch.randn(5, 8, 16), torch.randn(5, 1, 16)
    positions = torch.tensor([[0, 3, 9, 40, 200]])
    cos, sin = model.model.rotary_emb(q, positions)
    # transformers' layout: [batch, heads, tokens, D]
    want_q, want_k = apply_rotary_pos_emb(
        attn.q_norm(q.transpose(0, 1)[None]), attn.k_norm(k.transpose(0, 1)[None]), cos, sin
    )
    args = (q, k, cos[0], sin[0], attn.q_norm.weight, attn.k_norm.weight, model.config.rms_norm_eps)
    got_q, got_k = qk_norm_rope(*args)
    assert torch.equal(got_q, want_q[0].transpose(0, 1)) and torch.equal(got_k, want_k[0].transpose(0, 1))
    other_q, _ = rope_qk_norm(*args)
    assert not torch.allclose(other_q, got_q, atol=1e-3)


def reference(translator, request) -> list[int]:
    """transformers' greedy `generate` for one prompt, with the repetition penalty the engine applies."""
    loaded = translator.engine.runner.loaded
    ids = torch.tensor([request.prompt_ids])
    out = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=request.max_new_tokens,
        do_sample=False,
        repetition_penalty=GREEDY.repetition_penalty,
        eos_token_id=loaded.stop_ids,
        pad_token_id=loaded.pad_id,
    )
    return [t for t in out[0, ids.shape[1] :].tolist() if t not in loaded.stop_ids]


def test_greedy_decoding_matches_generate_in_a_running_batch(tight_engine):
    """Four segments over three rows and prefill steps of 16 tokens (each prompt in chunks), then three more
    joining while the first decodes: every segment's tokens are `generate`'s."""
    assert tight_engine.family is HY_MT2_30B_A3B and tight_engine.engine.runner.loaded.stop_ids == [120025]
    jobs = [tight_engine.submit([(t, EN)], resolve("de"), GREEDY) for t in TEXTS]
    first = tight_engine.submit([(TEXTS[1], EN)], resolve("fr"), GREEDY)
    deadline = time.monotonic() + 60
    running = tight_engine.engine.scheduler.running
    while not any(len(s.output_ids) >= 3 for s in running) and time.monotonic() < deadline:
        time.sleep(0.001)
    later = [tight_engine.submit([(t, EN)], resolve("ja"), GREEDY) for t in TEXTS[:3]]
    for job in [*jobs, first, *later]:
        job.wait(120)
        for request, tokens in zip(job.requests, job.tokens):
            assert tokens and tokens == reference(tight_engine, request)
    assert tight_engine.engine.runner.stats.max_in_flight_seen > 1


def test_health_names_the_model_its_profile_and_license(tight_engine, monkeypatch):
    from starlette.testclient import TestClient

    from hymt.api.app import create_app

    monkeypatch.setattr(tight_engine, "stop", lambda: None)
    app = create_app(
        tight_engine.settings, tight_engine.decision, factory=lambda settings, decision, on_phase: tight_engine
    )
    with TestClient(app) as client:
        deadline = time.monotonic() + 30
        while (health := client.get("/health")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        body = health.json()
        assert body["profile"] == "cpu" and body["model"] == tight_engine.settings.model
        family = body["model_family"]
        assert (family["name"], family["license"], family["source"]) == ("Hy-MT2-30B-A3B", "Apache-2.0", "config.json")
        assert family["terminology_prompt"] and family["style_prompt"] and not family["fusion"]
        models = client.get("/v1/models").json()["data"][0]
        assert (models["root"], models["license"]) == ("Hy-MT2-30B-A3B", "Apache-2.0")
