"""LoRA adapters per language pair on the test model: active only for their directions, never mixed in a batch."""

from __future__ import annotations

import json

import pytest

from hymt.engine import adapters as registry
from hymt.engine.sampling_params import Sampling
from hymt.errors import ConfigError
from hymt.languages import resolve

GREEDY = Sampling(greedy=True)


@pytest.fixture(scope="module")
def manifest(test_model, tmp_path_factory):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("adapters")
    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(test_model, dtype=torch.float32)
    # init_lora_weights=False: random A and B, so the adapter really changes the output.
    lora = get_peft_model(
        base, LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False)
    )
    lora.save_pretrained(root / "en-bo")
    path = root / "manifest.json"
    path.write_text(json.dumps({"adapters": [{"name": "en-bo", "path": "en-bo", "directions": ["en>bo"]}]}))
    return path


@pytest.fixture(scope="module")
def lora_translator(cpu_settings, manifest):
    from hymt.planner.decide import decision_for
    from hymt.translation.translator import start

    settings = cpu_settings.replace(adapters=str(manifest))
    translator = start(settings, decision_for(settings))
    yield translator
    translator.stop()


TEXT = [("The weather is nice today.", resolve("en"))]


def test_adapter_changes_its_direction_only(translator, lora_translator):
    base_bo = translator.submit(TEXT, resolve("bo"), GREEDY).wait(120)
    lora_bo = lora_translator.submit(TEXT, resolve("bo"), GREEDY).wait(120)
    assert lora_bo != base_bo
    base_zh = translator.submit(TEXT, resolve("zh"), GREEDY).wait(120)
    lora_zh = lora_translator.submit(TEXT, resolve("zh"), GREEDY).wait(120)
    assert lora_zh == base_zh


def test_mixed_directions_in_flight_are_batched_apart(lora_translator, monkeypatch):
    runner, adapters_per_step = lora_translator.engine.runner, []
    for name in ("prefill", "launch"):
        real = getattr(runner, name)

        def recording(items, real=real, name=name):
            seqs = [c.seq for c in items] if name == "prefill" else items
            adapters_per_step.append({s.adapter for s in seqs})
            return real(items)

        monkeypatch.setattr(runner, name, recording)
    bo = lora_translator.submit(TEXT, resolve("bo"), GREEDY)
    zh = lora_translator.submit(TEXT, resolve("zh"), GREEDY)
    together = (bo.wait(120), zh.wait(120))
    assert together == (
        lora_translator.submit(TEXT, resolve("bo"), GREEDY).wait(120),
        lora_translator.submit(TEXT, resolve("zh"), GREEDY).wait(120),
    )
    assert {"en-bo"} in adapters_per_step and {None} in adapters_per_step
    assert all(len(step) == 1 for step in adapters_per_step)


def test_choose_prefers_exact_pairs_over_wildcards(tmp_path):
    adapters = [
        registry.Adapter("any-bo", tmp_path, (("*", "bo"),)),
        registry.Adapter("en-bo", tmp_path, (("en", "bo"),)),
    ]
    assert registry.choose(adapters, "en", "bo") == "en-bo"
    assert registry.choose(adapters, "zh", "bo") == "any-bo"
    assert registry.choose(adapters, "en", "zh") is None


def test_bad_manifests_are_one_clear_error(tmp_path):
    bad = tmp_path / "m.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read adapter manifest"):
        registry.read_manifest(bad)
    bad.write_text(json.dumps({"adapters": [{"name": "x", "path": "missing", "directions": ["en>bo"]}]}))
    with pytest.raises(ConfigError, match="no adapter_config.json"):
        registry.read_manifest(bad)
