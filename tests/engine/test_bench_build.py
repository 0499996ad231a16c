"""The benchmark's checkpoint builder (bench/checkpoints.py) on the CPU: the 1.8B build, at a reduced size, is served
as Hy-MT2-1.8B with its real ids, tied embeddings and tokenizer; at full size its config is the planner's 1.8B shape
and gets the profiles planned for 4, 6 and 8 GB cards; the 7B's config is the one the benchmark has always built."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from hymt.chat import SMALL_CHAT, SMALL_STOP
from hymt.family import HUNYUAN_MT_7B, HY_MT2_1_8B, Identified, identify
from hymt.planner.decide import decision_for
from hymt.planner.shapes import HY_MT_1_8B_SHAPE, ModelShape
from hymt.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# The test model's dimensions (hymt.testmodel): a build of seconds on the CPU.
SMALLER = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
)


def _bench(name: str):
    """A bench/ module loaded from its file, leaving sys.path alone."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checkpoints = _bench("checkpoints")


def test_the_1_8b_build_is_served_as_hy_mt2_1_8b_with_its_real_ids(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "hymt-1.8b"  # a path that names no model: the config has to
    checkpoints.build(out, HY_MT2_1_8B, device="cpu", **SMALLER)
    assert identify(out) == Identified(HY_MT2_1_8B, "config.json")
    config = json.loads((out / "config.json").read_text())
    ids = ("vocab_size", "bos_token_id", "eos_token_id", "pad_token_id", "eod_token_id")
    assert [config[k] for k in ids] == [120818, 120000, 120020, 120002, 120020]
    assert config["tie_word_embeddings"] and config["num_hidden_layers"] == 2
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.convert_tokens_to_ids(SMALL_STOP) == 120020 and SMALL_CHAT.renders_officially(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


def test_the_7b_build_stays_unnamed_and_is_served_as_hunyuan_mt_7b(tmp_path):
    checkpoints.build(tmp_path, device="cpu", **SMALLER)
    config = json.loads((tmp_path / "config.json").read_text())
    assert "_name_or_path" not in config and config["vocab_size"] == 128167
    assert identify(tmp_path).family is HUNYUAN_MT_7B


def test_the_7b_config_is_the_one_the_benchmark_has_built():
    config = checkpoints.real_config().to_dict()
    expected = dict(
        vocab_size=128167,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
        bos_token_id=127958,
        eos_token_id=127960,
        pad_token_id=127961,
        eod_token_id=127967,
        tie_word_embeddings=False,
        attention_bias=False,
    )
    assert {k: config[k] for k in expected} == expected


@pytest.mark.parametrize("card_gb,profile", [(4, "int4-int8kv"), (6, "bf16-int8kv"), (8, "bf16")])
def test_the_full_size_1_8b_config_gets_its_planned_profiles(tmp_path, card_gb, profile):
    config = checkpoints.real_config(HY_MT2_1_8B)
    assert ModelShape.from_config(config) == HY_MT_1_8B_SHAPE
    config.save_pretrained(tmp_path)  # the planner reads the config alone
    decision = decision_for(Settings(model=str(tmp_path), gpu_memory_gb=card_gb))
    assert decision.profile == profile and decision.numbers.shape_source == str(tmp_path / "config.json")
