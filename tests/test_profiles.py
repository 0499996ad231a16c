"""The planner's decisions for simulated cards, on the real 7B shape, without a GPU."""

import json
import os
import subprocess
import sys

import pytest

from hymt.errors import HymtError
from hymt.hardware import GIB, simulate
from hymt.planning import HUNYUAN_MT_7B
from hymt.profiles import ModelShape, plan


def test_shape_numbers_match_the_measured_checkpoint():
    assert HUNYUAN_MT_7B.weight_bytes("bf16") / GIB == pytest.approx(14.96, abs=0.01)
    assert HUNYUAN_MT_7B.weight_bytes("nf4") / GIB == pytest.approx(5.34, abs=0.1)
    assert HUNYUAN_MT_7B.kv_bytes_per_token("bf16") == 131072
    assert HUNYUAN_MT_7B.kv_bytes_per_token("int8") == 66560


@pytest.mark.parametrize("card_gb,profile", [(8, "nf4"), (12, "nf4"), (16, "nf4"), (18, "bf16"), (24, "bf16"),
                                             (48, "bf16"), (80, "bf16")])
def test_cards(card_gb, profile):
    decision = plan(HUNYUAN_MT_7B, simulate(None, card_gb))
    assert decision.profile == profile
    assert decision.batch_tokens >= 4096
    tier = decision.numbers["tiers"][profile]
    assert tier["weight_bytes"] + tier["transient_bytes"] + decision.batch_tokens * tier["bytes_per_batch_token"] \
        <= card_gb * GIB


def test_int8_kv_when_bf16_weights_fit_but_not_the_kv_target():
    decision = plan(HUNYUAN_MT_7B, simulate(None, 18), target_batch_tokens=5000)
    assert decision.profile == "bf16-int8kv"


def test_small_card_gets_the_smallest_tier_with_what_is_left():
    decision = plan(HUNYUAN_MT_7B, simulate(None, 7))
    assert decision.profile == "nf4-int8kv"
    assert 512 <= decision.batch_tokens < 4096


def test_six_gb_card_is_refused_with_the_need():
    with pytest.raises(HymtError) as err:
        plan(HUNYUAN_MT_7B, simulate(None, 6))
    assert "needs about" in err.value.message


def test_eighty_gb_card_gets_a_large_budget():
    assert plan(HUNYUAN_MT_7B, simulate(None, 80)).batch_tokens == 65536


def test_forced_profile_and_no_gpu():
    assert plan(HUNYUAN_MT_7B, simulate(None, 80), forced="nf4").profile == "nf4"
    assert plan(HUNYUAN_MT_7B, None).profile == "cpu"
    with pytest.raises(HymtError):
        plan(HUNYUAN_MT_7B, simulate(None, 12), forced="bf16")


def test_shape_from_a_config_object():
    from transformers import HunYuanDenseV1Config

    config = HunYuanDenseV1Config(vocab_size=128167, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                  num_attention_heads=32, num_key_value_heads=8, head_dim=128)
    assert ModelShape.from_config(config) == HUNYUAN_MT_7B


def _profile_cli(env_extra: dict, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, "-m", "hymt", "profile", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("card_gb,profile", [("8", "nf4"), ("24", "bf16")])
def test_profile_command_reads_simulated_card_from_environment(card_gb, profile, tmp_path):
    out = tmp_path / "decision.json"
    result = _profile_cli({"HYMT_GPU_MEMORY_GB": card_gb, "HYMT_MODEL": "tencent/Hunyuan-MT-7B"},
                          "--output", str(out))
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["profile"] == profile
    assert decision["gpu"]["source"] == "simulated"
    assert json.loads(out.read_text()) == decision


def test_profile_command_refuses_a_six_gb_card():
    result = _profile_cli({"HYMT_GPU_MEMORY_GB": "6", "HYMT_MODEL": "tencent/Hunyuan-MT-7B"})
    assert result.returncode == 1
    assert json.loads(result.stdout)["profile"] is None
    assert result.stderr.strip().startswith("hymt: error: the model does not fit")
