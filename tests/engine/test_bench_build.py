"""The benchmark's checkpoints on the CPU (bench/checkpoints.py, bench/random_weights.py): the 1.8B build, at a
reduced size, is served as Hy-MT2-1.8B with its real ids, tied embeddings and tokenizer; at full size its config is
the planner's 1.8B shape and gets the profiles planned for 4, 6 and 8 GB cards; the 7B's config is the one the
benchmark has always built. The 30B-A3B's build holds its config, tokenizer and a marked weights file, no weights;
its weights, generated where read, are the same on every load, load whole through hymt's loader and into llama.cpp's
converter, which writes a GGUF of the same values (skipped where llama.cpp's source is not beside the checkout)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from hymt.chat import MOE_CHAT, MOE_STOP, SMALL_CHAT, SMALL_STOP
from hymt.family import HUNYUAN_MT_7B, HY_MT2_1_8B, HY_MT2_30B_A3B, Identified, identify
from hymt.planner.decide import decision_for
from hymt.planner.shapes import HY_MT2_30B_A3B_SHAPE, HY_MT_1_8B_SHAPE, ModelShape
from hymt.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
# llama.cpp's source and the anchors' to_gguf.py, where bench/carry.sh takes them from.
ANCHORS = Path(os.environ.get("LLAMA_ANCHORS", ROOT.parent / "shared" / "anchors" / "llama-cpp"))
# The test model's dimensions (hymt.testmodel): a build of seconds on the CPU.
SMALLER = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
)


# The 30B-A3B shrunk to a build of seconds on the CPU: two layers (the first dense), 8 experts of which a token
# takes 4, eight query heads over one KV head; every row a multiple of Q8_0's blocks of 32.
SMALLER_MOE = dict(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=2,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=32,
    num_experts=8,
    num_experts_per_tok=4,
    moe_intermediate_size=64,
)


def _bench(name: str):
    """A bench/ module loaded from its file, leaving sys.path alone; registered under its name, by which its
    siblings import it."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


random_weights = _bench("random_weights")
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


def test_the_30b_build_writes_its_config_tokenizer_and_marker_and_no_weights(tmp_path):
    from transformers import AutoConfig, AutoTokenizer

    out = tmp_path / "moe"  # a path that names no model: the config has to
    built = checkpoints.build(out, HY_MT2_30B_A3B, device="cpu")
    assert built["params"] == 30_064_725_888  # the published count (docs/models.md)
    assert sorted(p.name for p in out.iterdir()) == [
        "chat_template.jinja",
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert (out / "model.safetensors").stat().st_size < 1024 and random_weights.generated(out)
    assert identify(out) == Identified(HY_MT2_30B_A3B, "config.json")
    config = AutoConfig.from_pretrained(out)
    assert ModelShape.from_config(config) == HY_MT2_30B_A3B_SHAPE
    assert config.architectures == ["HYV3ForCausalLM"] and config.initializer_range == 0.02
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.convert_tokens_to_ids(MOE_STOP) == 120025 and MOE_CHAT.renders_officially(tokenizer)


@pytest.mark.parametrize("card_gb,profile", [(24, "int4"), (80, "bf16")])
def test_the_full_size_30b_config_gets_its_planned_profiles(tmp_path, card_gb, profile):
    checkpoints.real_config(HY_MT2_30B_A3B).save_pretrained(tmp_path)
    assert decision_for(Settings(model=str(tmp_path), gpu_memory_gb=card_gb)).profile == profile


def test_a_dense_build_is_stored_as_before(tmp_path):
    checkpoints.build(tmp_path, device="cpu", **SMALLER)
    assert not random_weights.generated(tmp_path)
    assert random_weights.command(tmp_path, "hymt", "serve")[1:] == ["-m", "hymt", "serve"]


@pytest.fixture(scope="module")
def small_moe(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("moe") / "hymt-30b-a3b"
    checkpoints.build(out, HY_MT2_30B_A3B, device="cpu", **SMALLER_MOE)
    return out


@pytest.fixture
def hooked(monkeypatch):
    """random_weights.install() in this process, undone afterwards."""
    import transformers.modeling_utils

    monkeypatch.setattr(transformers.modeling_utils, "safe_open", transformers.modeling_utils.safe_open)
    monkeypatch.delenv("HF_DEACTIVATE_ASYNC_LOAD", raising=False)
    random_weights.install()


def test_generated_weights_are_the_same_on_two_loads_and_hymt_loads_them_whole(small_moe, hooked):
    import torch
    from transformers import AutoModelForCausalLM

    from hymt.engine.loader import load
    from hymt.tiers import CPU_TIER

    first, second = (load(str(small_moe), CPU_TIER).model.state_dict() for _ in range(2))
    assert first.keys() == second.keys()
    assert all(torch.equal(first[name], second[name]) for name in first)
    _, info = AutoModelForCausalLM.from_pretrained(small_moe, output_loading_info=True)
    assert not (info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"])
    # transformers stacked the stored experts as it stacks a real checkpoint's: expert 3's gate rows are the
    # generated `experts.3.gate_proj`.
    stored = random_weights.tensor(
        "model.layers.1.mlp.experts.3.gate_proj.weight", (64, 256), torch.bfloat16, 0.02, "cpu"
    )
    assert torch.equal(first["model.layers.1.mlp.experts.gate_up_proj"][3, :64], stored.float())
    assert 0.019 < first["model.embed_tokens.weight"].std() < 0.021  # initializer_range
    assert torch.equal(first["model.layers.1.input_layernorm.weight"], torch.ones(256))
    assert torch.equal(first["model.layers.1.mlp.e_score_correction_bias"], torch.zeros(8))


def test_generated_weights_read_layer_by_layer_are_the_weights_read_whole(small_moe, hooked):
    """The GPU profiles' reading (engine/layerwise.py) of a generated checkpoint, each layer placed as it is read
    (kept here): the weights of a whole read, and the generator's setting of transformers left as it was."""
    import os

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from hymt.engine import layerwise, loader

    whole = AutoModelForCausalLM.from_pretrained(small_moe, dtype=torch.bfloat16).state_dict()
    placed = []
    streamed = loader._read(
        small_moe,
        AutoConfig.from_pretrained(small_moe),
        torch.bfloat16,
        None,
        None,
        layerwise.Placement(layer=lambda name, layer: placed.append(name)),
    ).state_dict()
    assert placed == [f"model.layers.{i}" for i in range(len(placed))] and len(placed) > 1
    assert streamed.keys() == whole.keys() and all(torch.equal(streamed[name], whole[name]) for name in whole)
    assert os.environ["HF_DEACTIVATE_ASYNC_LOAD"] == "1"


def test_a_stored_checkpoint_loads_as_stored_beside_the_hook(test_model, hooked):
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(test_model, dtype=torch.bfloat16)
    stored = load_file(str(test_model / "model.safetensors"))
    assert torch.equal(model.state_dict()["model.embed_tokens.weight"], stored["model.embed_tokens.weight"])


def test_a_generated_checkpoint_read_without_the_hook_fails(small_moe):
    from transformers import AutoModelForCausalLM

    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        AutoModelForCausalLM.from_pretrained(small_moe)


def test_hymt_started_through_the_wrapper_translates_with_generated_weights(small_moe, tmp_path):
    document = tmp_path / "document.txt"
    document.write_text("Please keep your luggage with you.\n")
    command = random_weights.command(
        small_moe,
        "hymt",
        "translate",
        str(document),
        "--model",
        str(small_moe),
        "--from",
        "en",
        "--to",
        "de",
        "--stats",
    )
    assert command[1] == str(ROOT / "bench" / "random_weights.py")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "app"),
        "HYMT_PROFILE": "cpu",
        "HYMT_MAX_NEW_TOKENS": "4",
        "HYMT_DATA_DIR": str(tmp_path),
    }
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    stats = next(json.loads(line)["stats"] for line in done.stderr.splitlines() if line.startswith('{"stats"'))
    assert stats["segments_done"] == 1 and stats["tokens_out"] == 4


@pytest.fixture(scope="module")
def llama_source(tmp_path_factory) -> Path:
    if not (ANCHORS / "llama-src.tar.xz").is_file():
        pytest.skip(f"llama.cpp's source is not at {ANCHORS}")
    src = tmp_path_factory.mktemp("llama")
    with tarfile.open(ANCHORS / "llama-src.tar.xz") as archive:
        wanted = ("./convert_hf_to_gguf.py", "./conversion/", "./gguf-py/")
        archive.extractall(src, [m for m in archive.getmembers() if m.name.startswith(wanted)], filter="data")
    return src


def test_llama_cpp_converter_writes_the_generated_weights_to_a_gguf(small_moe, llama_source, tmp_path, monkeypatch):
    import numpy as np
    import torch

    out = tmp_path / "model-q8_0.gguf"
    converter = (ANCHORS / "to_gguf.py", llama_source, small_moe, out)
    done = subprocess.run(
        random_weights.command(small_moe, "gguf", *map(str, converter), "q8_0"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.syspath_prepend(str(llama_source / "gguf-py"))
    import gguf

    reader = gguf.GGUFReader(out)
    field = reader.fields["general.architecture"]
    assert bytes(field.parts[field.data[0]]).decode() == "hy_v3"
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 30  # output, its norm and the embeddings; 10 in the dense layer, 17 in the other
    shapes = {name: [int(n) for n in tensors[name].shape] for name in tensors if name.startswith("blk.1.")}
    assert shapes == {
        "blk.1.attn_norm.weight": [256],
        "blk.1.attn_q.weight": [256, 256],
        "blk.1.attn_k.weight": [256, 32],
        "blk.1.attn_v.weight": [256, 32],
        "blk.1.attn_output.weight": [256, 256],
        "blk.1.attn_q_norm.weight": [32],
        "blk.1.attn_k_norm.weight": [32],
        "blk.1.ffn_norm.weight": [256],
        "blk.1.ffn_gate_inp.weight": [256, 8],
        "blk.1.exp_probs_b": [8],
        "blk.1.ffn_gate_exps.weight": [256, 64, 8],
        "blk.1.ffn_up_exps.weight": [256, 64, 8],
        "blk.1.ffn_down_exps.weight": [64, 256, 8],
        "blk.1.ffn_gate_shexp.weight": [256, 64],
        "blk.1.ffn_up_shexp.weight": [256, 64],
        "blk.1.ffn_down_shexp.weight": [64, 256],
    }

    def generated(name: str, shape: tuple[int, ...]) -> np.ndarray:
        return random_weights.tensor(name, shape, torch.bfloat16, 0.02, "cpu").float().numpy()

    # The same values as hymt gets: the experts within Q8_0's rounding (an 8-bit step of each block's largest
    # value), the router as generated (float32).
    experts = tensors["blk.1.ffn_up_exps.weight"]
    ups = np.stack([generated(f"model.layers.1.mlp.experts.{e}.up_proj.weight", (64, 256)) for e in range(8)])
    assert experts.tensor_type == gguf.GGMLQuantizationType.Q8_0
    assert np.abs(gguf.quants.dequantize(experts.data, experts.tensor_type) - ups).max() < 0.001
    router = generated("model.layers.1.mlp.router.gate.weight", (8, 256))
    assert np.array_equal(np.asarray(tensors["blk.1.ffn_gate_inp.weight"].data), router)
