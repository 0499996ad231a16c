"""The planner's decisions for simulated cards, on the real 7B and 1.8B shapes, without a GPU."""

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from hymt.errors import ConfigError, HymtError, ModelLoadError
from hymt.planner.decision import Decision
from hymt.planner.fusion import plan_with_fusion
from hymt.planner.gpu import GIB, simulate
from hymt.planner.plan import PROMPT_OVERHEAD_TOKENS, plan, segment_kv_tokens
from hymt.planner.shapes import HUNYUAN_MT_7B_SHAPE, HY_MT2_30B_A3B_SHAPE, HY_MT_1_8B_SHAPE, ModelShape
from hymt.settings import Settings
from hymt.tiers import TIERS, TIERS_BY_NAME

SETTINGS = Settings()


def test_shape_numbers_match_the_measured_checkpoint():
    assert HUNYUAN_MT_7B_SHAPE.weight_bytes("bf16") / GIB == pytest.approx(14.96, abs=0.01)
    assert HUNYUAN_MT_7B_SHAPE.weight_bytes("nf4") / GIB == pytest.approx(5.34, abs=0.1)
    assert HUNYUAN_MT_7B_SHAPE.kv_bytes_per_token("bf16") == 131072
    # int8 values with a 16-bit scale per token and head, plus the 16-bit layer flash attention reads
    assert HUNYUAN_MT_7B_SHAPE.kv_bytes_per_token("int8") == 66560 + 4096


def card(gb: float, capability=(9, 0)):
    return dataclasses.replace(simulate(None, gb), compute_capability=capability)


@pytest.mark.parametrize(
    "card_gb,capability,profile",
    [
        (8, (9, 0), "int4-int8kv"),
        (10, (9, 0), "int4"),
        # Ada and Hopper: FP8 weights (8.5 GiB) leave 16,384 KV tokens in int8 on 12 GB, in bf16 from 14 GB.
        (12, (8, 9), "fp8-int8kv"),
        (12, (9, 0), "fp8-int8kv"),
        (16, (9, 0), "fp8"),
        (18, (8, 9), "fp8"),
        # Ampere has no FP8: the next tier down.
        (12, (8, 6), "int4"),
        (16, (8, 0), "int4"),
        (18, (8, 6), "int4"),
        (24, (9, 0), "bf16"),
        (48, (9, 0), "bf16"),
        (80, (9, 0), "bf16"),
    ],
)
def test_cards(card_gb, capability, profile):
    decision = plan(HUNYUAN_MT_7B_SHAPE, card(card_gb, capability), SETTINGS)
    assert decision.profile == profile
    tier = decision.numbers.tiers[profile]
    assert decision.kv_cache_tokens == tier.kv_cache_tokens > decision.max_seq_tokens
    assert decision.kv_cache_bytes == decision.kv_cache_tokens * tier.kv_bytes_per_token
    assert tier.weight_bytes + tier.transient_bytes + decision.kv_cache_bytes <= card_gb * GIB
    assert 1 <= decision.max_in_flight <= SETTINGS.max_in_flight


def test_a_decision_read_back_from_its_json_file_is_the_same():
    """The entrypoint writes the decision as JSON and the server reads it back: every tier's budget typed again."""
    chimera = SETTINGS.replace(fusion_model="/models/Hunyuan-MT-Chimera-7B")
    for decision in (
        plan(HUNYUAN_MT_7B_SHAPE, card(24), SETTINGS),
        plan(HUNYUAN_MT_7B_SHAPE, None, SETTINGS),
        plan_with_fusion(HUNYUAN_MT_7B_SHAPE, HUNYUAN_MT_7B_SHAPE, card(48), chimera),
    ):
        assert Decision.from_json(json.loads(json.dumps(decision.to_json()))) == decision


def test_int8_kv_when_bf16_weights_fit_but_not_the_kv_target():
    decision = plan(HUNYUAN_MT_7B_SHAPE, card(20), SETTINGS.replace(target_kv_tokens=20000))
    assert decision.profile == "bf16-int8kv"


def test_small_card_gets_the_tier_leaving_the_most_room():
    decision = plan(HUNYUAN_MT_7B_SHAPE, card(8), SETTINGS)
    assert decision.profile == "int4-int8kv" and "leaves the most" in decision.reason
    assert decision.max_seq_tokens < decision.kv_cache_tokens < SETTINGS.target_kv_tokens


def test_a_card_without_room_for_one_segment_is_refused_with_the_need():
    with pytest.raises(HymtError) as err:
        plan(HUNYUAN_MT_7B_SHAPE, card(6), SETTINGS)
    assert "needs about" in err.value.message


def test_int4_runs_on_ampere_or_later_and_nf4_serves_older_gpus():
    assert plan(HUNYUAN_MT_7B_SHAPE, card(12), SETTINGS.replace(profile="int4")).profile == "int4"
    with pytest.raises(HymtError, match="compute capability 8.0 or later"):
        plan(HUNYUAN_MT_7B_SHAPE, card(12, (7, 5)), SETTINGS.replace(profile="int4"))
    older = plan(HUNYUAN_MT_7B_SHAPE, card(12, (7, 5)), SETTINGS)
    assert older.profile == "nf4" and not older.allows(TIERS_BY_NAME["int4"]) and older.allows(TIERS_BY_NAME["nf4"])
    assert older.reason.endswith(
        "; fp8, fp8-int8kv need compute capability 8.9 or later; int4, int4-int8kv need compute capability 8.0 or "
        "later (compute capability 7.5)"
    )


def test_the_fp8_tiers_sit_between_bf16_and_int4_and_need_ada():
    assert [t.name for t in TIERS][:6] == ["bf16", "bf16-int8kv", "fp8", "fp8-int8kv", "int4", "int4-int8kv"]
    assert plan(HUNYUAN_MT_7B_SHAPE, card(12, (8, 9)), SETTINGS.replace(profile="fp8")).profile == "fp8"
    ampere = plan(HUNYUAN_MT_7B_SHAPE, card(12, (8, 6)), SETTINGS)
    assert not ampere.allows(TIERS_BY_NAME["fp8"]) and ampere.allows(TIERS_BY_NAME["int4"])
    assert "fp8, fp8-int8kv need compute capability 8.9 or later (compute capability 8.6)" in ampere.reason
    for forced, instead in (("fp8", "int4"), ("fp8-int8kv", "int4-int8kv")):
        with pytest.raises(HymtError) as err:
            plan(HUNYUAN_MT_7B_SHAPE, card(12, (8, 6)), SETTINGS.replace(profile=forced))
        assert err.value.message == (
            f"profile {forced} needs a GPU of compute capability 8.9 or later (compute capability 8.6): "
            f"use {instead} instead"
        )
    # Before Ampere the one to use instead is NF4.
    with pytest.raises(HymtError, match="8.9 or later \\(compute capability 7.5\\): use nf4 instead$"):
        plan(HUNYUAN_MT_7B_SHAPE, card(12, (7, 5)), SETTINGS.replace(profile="fp8"))


def test_fp8_weights_take_a_byte_and_a_row_scale_beside_16_bit_embeddings_and_head():
    shape = HUNYUAN_MT_7B_SHAPE
    rows = 32 * (4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096)
    assert shape.linear_rows == rows
    assert shape.weight_bytes("fp8") == shape.linear_params + 4 * rows + 2 * shape.other_params
    assert shape.weight_bytes("fp8") / GIB == pytest.approx(8.46, abs=0.01)
    # The prefill's widest input, quantized to a byte with a float32 scale per token, beside bf16's scratch.
    assert shape.transient_bytes("fp8", 128, 1024) - shape.transient_bytes("bf16", 128, 1024) == 1024 * (14336 + 4)


def test_an_fp8_checkpoint_is_served_by_the_fp8_tiers_alone():
    fp8 = dataclasses.replace(HUNYUAN_MT_7B_SHAPE, quantized_bits=8, quantized_format="compressed-tensors-fp8")
    assert [t.name for t in TIERS if fp8.serves(t)] == ["fp8", "fp8-int8kv"]
    decision = plan(fp8, card(24), SETTINGS)  # where a bf16 checkpoint would run in bf16
    assert decision.profile == "fp8" and decision.weights == "compressed-tensors-fp8"
    with pytest.raises(ConfigError) as err:
        plan(fp8, card(24), SETTINGS.replace(profile="int4"))
    assert err.value.message == (
        "profile int4 cannot hold this checkpoint's compressed-tensors-fp8 weights: fp8, fp8-int8kv can"
    )
    with pytest.raises(ModelLoadError) as err:  # not for want of memory: no 1.8B model is offered instead
        plan(fp8, card(24, (8, 6)), SETTINGS)
    assert err.value.message == (
        "this checkpoint's compressed-tensors-fp8 weights need a GPU of compute capability 8.9 or later "
        "(compute capability 8.6): serve its bf16 checkpoint (int4 runs on this GPU)"
    )
    assert plan(fp8, None, SETTINGS).profile == "cpu"  # the CPU reads it dequantized


def test_forced_profile_and_no_gpu():
    assert plan(HUNYUAN_MT_7B_SHAPE, card(80), SETTINGS.replace(profile="nf4")).profile == "nf4"
    assert plan(HUNYUAN_MT_7B_SHAPE, None, SETTINGS).profile == "cpu"
    with pytest.raises(HymtError):
        plan(HUNYUAN_MT_7B_SHAPE, card(12), SETTINGS.replace(profile="bf16"))
    forced = plan(HUNYUAN_MT_7B_SHAPE, card(24), SETTINGS.replace(kv_cache_tokens=5000))
    assert forced.kv_cache_tokens == 5000


def test_a_smaller_output_budget_lets_segments_hold_less():
    short = SETTINGS.replace(max_new_tokens=64)
    assert segment_kv_tokens(short) == PROMPT_OVERHEAD_TOKENS + 256 + 64
    assert segment_kv_tokens(SETTINGS) == PROMPT_OVERHEAD_TOKENS + 256 + 3 * 256 + 16


def test_the_small_shape_ties_its_embeddings_and_has_four_kv_heads():
    # 1.54 B parameters in the layers, 0.25 B in the tied embeddings: about 3.6 GB in bf16, as published.
    assert HY_MT_1_8B_SHAPE.weight_bytes("bf16") / GIB == pytest.approx(3.34, abs=0.01)
    assert HY_MT_1_8B_SHAPE.kv_bytes_per_token("bf16") == 2 * 32 * 4 * 128 * 2
    untied = dataclasses.replace(HY_MT_1_8B_SHAPE, tied_embeddings=False)
    embeddings = 120818 * 2048 * 2
    assert untied.weight_bytes("bf16") - HY_MT_1_8B_SHAPE.weight_bytes("bf16") == embeddings
    # INT4 keeps the head in 8 bits beside the tied 16-bit embeddings.
    assert HY_MT_1_8B_SHAPE.weight_bytes("int4") - untied.weight_bytes("int4") == -embeddings + 120818 * 2048


@pytest.mark.parametrize("card_gb,profile", [(4, "int4-int8kv"), (6, "bf16-int8kv"), (8, "bf16")])
def test_small_cards_plan_the_small_models(card_gb, profile):
    decision = plan(HY_MT_1_8B_SHAPE, card(card_gb), SETTINGS)
    assert decision.profile == profile and decision.kv_cache_tokens >= SETTINGS.target_kv_tokens
    tier = decision.numbers.tiers[profile]
    assert tier.weight_bytes + tier.transient_bytes + decision.kv_cache_bytes <= card_gb * GIB


def test_shape_from_a_config_object():
    from transformers import HunYuanDenseV1Config

    config = HunYuanDenseV1Config(
        vocab_size=128167,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
    )
    assert ModelShape.from_config(config) == HUNYUAN_MT_7B_SHAPE


def _profile_cli(env_extra: dict, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "hymt", "profile", *args], capture_output=True, text=True, env=env, timeout=120
    )


# No GPU here: a simulated card's generation is unknown, and may run FP8.
@pytest.mark.parametrize("card_gb,profile", [("8", "int4-int8kv"), ("12", "fp8-int8kv"), ("24", "bf16")])
def test_profile_command_reads_simulated_card_from_environment(card_gb, profile, tmp_path):
    out = tmp_path / "decision.json"
    result = _profile_cli({"HYMT_GPU_MEMORY_GB": card_gb, "HYMT_MODEL": "tencent/Hunyuan-MT-7B"}, "--output", str(out))
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["profile"] == profile
    assert decision["gpu"]["source"] == "simulated"
    assert list(decision["numbers"]["tiers"])[:4] == ["bf16", "bf16-int8kv", "fp8", "fp8-int8kv"]
    assert json.loads(out.read_text()) == decision


def test_profile_command_refuses_a_six_gb_card():
    result = _profile_cli({"HYMT_GPU_MEMORY_GB": "6", "HYMT_MODEL": "tencent/Hunyuan-MT-7B"})
    assert result.returncode == 1
    assert json.loads(result.stdout)["profile"] is None
    assert result.stderr.strip().startswith("hymt: error: the model does not fit")


def test_profile_command_plans_a_named_models_shape_without_a_checkpoint():
    result = _profile_cli({"HYMT_MODEL": "tencent/Hunyuan-MT-7B"}, "--family", "hy-mt2-1.8b", "--gpu-memory-gb", "4")
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["profile"] == "int4-int8kv"
    assert decision["numbers"]["shape_source"] == "built-in Hy-MT2-1.8B shape (no checkpoint on disk)"


def test_a_card_too_small_for_the_7b_names_the_small_models():
    result = _profile_cli({"HYMT_MODEL": "tencent/Hy-MT2-7B"}, "--gpu-memory-gb", "4")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert (
        "a 1.8B model fits (int4-int8kv): set HYMT_MODEL to tencent/Hy-MT2-1.8B (Apache-2.0) or "
        "tencent/HY-MT1.5-1.8B" in result.stderr
    )
    # Where not even the small shape fits, the refusal says only what the model needs.
    tiny = _profile_cli({"HYMT_MODEL": "tencent/Hunyuan-MT-7B"}, "--gpu-memory-gb", "2")
    assert tiny.returncode == 1 and "1.8B" not in tiny.stderr


def test_the_moe_shape_counts_every_expert_and_is_read_from_its_config():
    """All 30.06 B parameters in memory (a third party's count of the published checkpoint: 30,064,725,888), the
    experts 28.4 B of them; its KV cache from 4 KV heads of 128 over 48 layers."""
    from transformers import HYV3Config

    shape = HY_MT2_30B_A3B_SHAPE
    assert shape.linear_params + shape.expert_params + shape.other_params == 30_064_725_888
    assert shape.expert_params == 47 * 128 * 3 * 2048 * 768
    assert shape.weight_bytes("bf16") / GIB == pytest.approx(56.0, abs=0.01)
    assert shape.weight_bytes("int4") / GIB == pytest.approx(15.57, abs=0.01)
    assert shape.kv_bytes_per_token("bf16") == 2 * 48 * 4 * 128 * 2
    # bitsandbytes quantizes linear layers only: the stacked experts stay 16-bit under NF4.
    assert shape.weight_bytes("nf4") > 2 * shape.expert_params
    config = HYV3Config(
        vocab_size=120832,
        hidden_size=2048,
        intermediate_size=6912,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        num_shared_experts=1,
        moe_intermediate_size=768,
    )
    assert ModelShape.from_config(config) == shape


@pytest.mark.parametrize(
    "card_gb,profile", [(20, "int4-int8kv"), (24, "int4"), (48, "int4"), (80, "bf16"), (141, "bf16")]
)
def test_the_moe_runs_in_bf16_from_80_gb_and_in_4_bits_below(card_gb, profile):
    """bf16 where its 56 GiB fit; its experts in 4 bits (15.6 GiB in all) on 24 and 48 GB; a 20 GB card's KV cache
    in int8 to reach the target."""
    decision = plan(HY_MT2_30B_A3B_SHAPE, card(card_gb), SETTINGS)
    assert decision.profile == profile and decision.kv_cache_tokens >= SETTINGS.target_kv_tokens
    tier = decision.numbers.tiers[profile]
    assert tier.weight_bytes + tier.transient_bytes + decision.kv_cache_bytes <= card_gb * GIB


def test_the_moe_is_refused_below_the_4_bit_profiles_need():
    with pytest.raises(HymtError, match=r"the smallest profile \(int4-int8kv\) needs about 18.2 GiB"):
        plan(HY_MT2_30B_A3B_SHAPE, card(16), SETTINGS)
    # Before Ampere the 4-bit profiles do not run, and NF4 leaves the experts 16-bit: nothing below 80 GB.
    with pytest.raises(HymtError, match="does not fit in 48.0 GiB"):
        plan(HY_MT2_30B_A3B_SHAPE, card(48, (7, 5)), SETTINGS)


def test_profile_command_plans_the_moe_and_refuses_a_small_card_naming_the_smaller_models(tmp_path):
    result = _profile_cli({}, "--family", "hy-mt2-30b-a3b", "--gpu-memory-gb", "80")
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["profile"] == "bf16"
    assert decision["numbers"]["shape_source"] == "built-in Hy-MT2-30B-A3B shape (no checkpoint on disk)"
    refused = _profile_cli({"HYMT_MODEL": "tencent/Hy-MT2-30B-A3B"}, "--gpu-memory-gb", "16")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1
    assert (
        "set HYMT_MODEL to tencent/Hy-MT2-7B (next to it in the published evaluation; it fits here as fp8) or "
        "tencent/Hy-MT2-1.8B (it fits here as bf16)" in refused.stderr
    )
    # A checkpoint on disk under any name is planned from its config: with half the experts, bf16 fits 48 GB.
    published = dict(
        model_type="hy_v3",
        vocab_size=120832,
        hidden_size=2048,
        intermediate_size=6912,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts_per_tok=8,
        num_shared_experts=1,
        moe_intermediate_size=768,
    )
    (tmp_path / "config.json").write_text(json.dumps({**published, "num_experts": 64}))
    on_disk = _profile_cli({}, "--model", str(tmp_path), "--gpu-memory-gb", "48")
    assert on_disk.returncode == 0, on_disk.stderr
    decision = json.loads(on_disk.stdout)
    assert decision["profile"] == "bf16" and decision["numbers"]["shape_source"] == str(tmp_path / "config.json")
