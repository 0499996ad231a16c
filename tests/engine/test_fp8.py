"""The fp8 tiers on the CPU (torch's CPU build runs torch._scaled_mm): Fp8Linear's arithmetic, a bf16 checkpoint
quantized at load, Tencent's FP8 layout (`hymt make-test-model --fp8`) read as published, the engine's fp8 model
against a float reference of its dequantized weights, and the CPU tier serving such a checkpoint end to end."""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open

from hymt.engine import loader
from hymt.engine.fp8 import Fp8Linear, quantize_rows
from hymt.engine.model import PROJECTIONS
from hymt.errors import ModelLoadError
from hymt.fp8_checkpoint import Fp8Scheme

TENSOR = Fp8Scheme("tensor")


@pytest.fixture(scope="module")
def fp8_model(tmp_path_factory):
    """The 7B's tiny test model as Tencent publishes FP8 checkpoints, made by the command line."""
    out = tmp_path_factory.mktemp("fp8") / "tiny-hunyuan-mt-fp8"
    made = subprocess.run(
        [sys.executable, "-m", "hymt", "make-test-model", str(out), "--fp8"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    return out


def _stored(checkpoint) -> dict[str, torch.Tensor]:
    with safe_open(checkpoint / "model.safetensors", framework="pt") as f:
        return {name: f.get_tensor(name) for name in f.keys()}


def _config(checkpoint):
    """The checkpoint's config without its quantization_config, as the loader reads it."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(checkpoint)
    if hasattr(config, "quantization_config"):
        config = copy.deepcopy(config)
        del config.quantization_config
    return config


def _plain(checkpoint, dtype: torch.dtype):
    """The checkpoint through transformers, as the loader reads it."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(checkpoint, config=_config(checkpoint), dtype=dtype).eval()


def _placed(checkpoint, scheme: Fp8Scheme | None):
    """The checkpoint as the fp8 profiles read it (loader.py), each layer placed as it is read, on the CPU here."""
    with contextlib.ExitStack() as stack:
        placement = loader._placement("fp8", checkpoint, scheme, torch.device("cpu"), stack)
        return loader._read(checkpoint, _config(checkpoint), torch.bfloat16, None, None, placement).eval()


def _ranged_weight(rows: int = 96, cols: int = 64) -> torch.Tensor:
    """Rows of ranges a thousand apart, so that one scale for all of them would not do."""
    torch.manual_seed(0)
    return (torch.randn(rows, cols) * torch.logspace(-2, 1, rows)[:, None]).to(torch.bfloat16)


def test_a_quantized_layer_keeps_each_row_to_its_own_scale():
    weight = _ranged_weight()
    layer = Fp8Linear.quantized(weight)
    assert layer.weight.dtype == torch.float8_e4m3fn and layer.scale.dtype == torch.float32
    assert torch.equal(layer.scale, weight.float().abs().amax(dim=1) / 448)
    assert torch.equal(layer.weight.float().abs().amax(dim=1), torch.full((96,), 448.0))
    # Every weight within half a step of e4m3 (three bits of mantissa: a sixteenth of itself), or of the smallest
    # step below its normal range.
    error = (layer.dequantized() - weight.float()).abs()
    assert (error <= weight.float().abs() / 16 + layer.scale[:, None] * 2.0**-10).all()


def test_a_layers_output_is_its_quantized_arithmetic():
    layer = Fp8Linear.quantized(_ranged_weight())
    x = torch.randn(2, 3, 64).to(torch.bfloat16)
    x[1, 2] = 0.0
    y = layer(x)
    assert y.shape == (2, 3, 96) and y.dtype == torch.bfloat16
    assert not y[1, 2].any()  # a row of zeros keeps a finite scale
    q, scale = quantize_rows(x.reshape(6, 64))
    assert torch.equal(scale, x.reshape(6, 64).float().abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / 448)
    exact = (q.float() * scale) @ layer.dequantized().T
    assert torch.allclose(y.reshape(6, 96).float(), exact, rtol=2**-8, atol=1e-3)  # bf16's rounding of the output
    # Against the input unquantized: each token in e4m3 costs a few percent.
    full = x.reshape(6, 64).float() @ layer.dequantized().T
    assert (y.reshape(6, 96).float() - full).norm() / full.norm() < 0.04
    one = layer(x[0, :1])  # one row, as a segment decoding alone (torch._scaled_mm here: no Triton)
    assert torch.equal(one, y[0, :1])


def test_fp8_layers_refuse_what_they_cannot_hold():
    weight = Fp8Linear.quantized(_ranged_weight()).weight
    with pytest.raises(ValueError, match="e4m3 weight and a float32 scale per row"):
        Fp8Linear(weight.float(), torch.ones(96))
    with pytest.raises(ValueError, match="e4m3 weight and a float32 scale per row"):
        Fp8Linear(weight, torch.ones(1))
    with pytest.raises(ValueError, match="multiple of 16, not 88 x 64"):
        Fp8Linear(weight[:88], torch.ones(88))


def test_a_bf16_checkpoint_is_fused_and_quantized_at_load(test_model):
    plain = _plain(test_model, torch.bfloat16)
    attn, mlp = plain.model.layers[1].self_attn, plain.model.layers[1].mlp
    qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).float()
    down = mlp.down_proj.weight.float()
    model = _placed(test_model, None)
    attn, mlp = model.model.layers[1].self_attn, model.model.layers[1].mlp
    assert not hasattr(attn, "q_proj") and not hasattr(mlp, "gate_proj")
    assert all(isinstance(m, Fp8Linear) for m in (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj))
    for layer, weight in ((attn.qkv_proj, qkv), (mlp.down_proj, down)):
        assert torch.equal(layer.scale, weight.abs().amax(dim=1) / 448)
        assert (layer.dequantized() - weight).abs().max() <= weight.abs().max() / 16
    assert model.lm_head.weight.dtype == torch.bfloat16  # the head stays 16-bit


def test_tencents_layout_is_written_as_published(fp8_model):
    config = json.loads((fp8_model / "config.json").read_text())
    assert config["quantization_config"]["format"] == "naive-quantized"
    assert config["quantization_config"]["ignored_layers"] == ["lm_head"]
    stored = _stored(fp8_model)
    for name in ("model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"):
        assert stored[f"{name}.weight"].dtype == torch.float8_e4m3fn
        assert stored[f"{name}.weight_scale"].shape == stored[f"{name}.input_scale"].shape == (1,)
        assert stored[f"{name}.weight_scale"].dtype == torch.float32
        assert stored[f"{name}.weight"].float().abs().max() == 448
    assert stored["lm_head.weight"].dtype == stored["model.embed_tokens.weight"].dtype == torch.bfloat16


def test_tencents_layout_loads_as_published(fp8_model):
    stored = _stored(fp8_model)
    model = _placed(fp8_model, TENSOR)
    for i, layer in enumerate(model.model.layers):
        for owner, fused, parts in PROJECTIONS:
            module = getattr(getattr(layer, owner), fused)
            names = [f"model.layers.{i}.{owner}.{part}" for part in parts]
            weight = torch.cat([stored[f"{n}.weight"] for n in names])
            assert torch.equal(module.weight.view(torch.uint8), weight.view(torch.uint8))  # the bytes as written
            # Each part's per-tensor scale on its own rows.
            scales = [stored[f"{n}.weight_scale"].expand(stored[f"{n}.weight"].shape[0]) for n in names]
            assert torch.equal(module.scale, torch.cat(scales))
    assert torch.equal(model.lm_head.weight, stored["lm_head.weight"])


def test_published_weights_that_are_not_as_declared_are_refused(fp8_model, tmp_path):
    from safetensors.torch import save_file

    for broken, says in (
        ({"model.layers.0.mlp.up_proj.weight_scale": torch.tensor([0.0])}, "1 positive value"),
        ({"model.layers.0.mlp.up_proj.weight_scale": torch.ones(2)}, "up_proj.weight_scale is (2,)"),
        ({"model.layers.0.mlp.up_proj.weight": torch.zeros(128, 64, dtype=torch.bfloat16)}, "torch.bfloat16"),
        ({"model.layers.0.mlp.up_proj.weight_scale": None}, "has no tensor model.layers.0.mlp.up_proj.weight_scale"),
    ):
        copy_dir = tmp_path / f"broken{len(list(tmp_path.iterdir()))}"
        copy_dir.mkdir()
        for file in fp8_model.iterdir():
            if file.name != "model.safetensors":
                (copy_dir / file.name).write_bytes(file.read_bytes())
        tensors = _stored(fp8_model)
        for name, tensor in broken.items():
            if tensor is None:
                del tensors[name]
            else:
                tensors[name] = tensor
        save_file(tensors, str(copy_dir / "model.safetensors"), metadata={"format": "pt"})
        with pytest.raises(ModelLoadError, match=says.replace("(", r"\(").replace(")", r"\)")):
            _placed(copy_dir, TENSOR)


def test_the_engines_fp8_model_matches_a_float_reference(fp8_model):
    """Prefill logits at every position, then a decoding step's: the engine's Decoder on Fp8Linear layers (bf16
    activations, quantized per token) against transformers' float32 forward of the dequantized weights."""
    from hymt.engine.kvcache import KVArena
    from hymt.engine.loader import load
    from hymt.engine.model import Batch, Decoder
    from hymt.tiers import CPU_TIER

    reference = load(str(fp8_model), CPU_TIER).model  # the CPU tier's float32 weights: e4m3 * scale
    model = _placed(fp8_model, TENSOR)
    config = model.config
    arena = KVArena(
        config.num_hidden_layers,
        64,
        config.num_key_value_heads,
        config.head_dim,
        False,
        torch.bfloat16,
        torch.device("cpu"),
    )
    decoder = Decoder(model, arena, "dense", compiled=False, max_positions=64)
    assert len(decoder.fp8) == 4 * config.num_hidden_layers
    torch.manual_seed(3)
    ids = torch.randint(0, 1000, (13,))

    def cosine(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cosine_similarity(got.float(), want.float(), dim=-1)

    with torch.inference_mode():
        want = reference(ids[None]).logits[0]
    prompt = 12
    prefill = Batch(
        input_ids=ids[:prompt],
        positions=torch.arange(prompt),
        write_index=torch.arange(prompt) + 5,
        query_starts=torch.tensor([0, prompt], dtype=torch.int32),
        kv_starts=torch.tensor([5, 0], dtype=torch.int32),
        kv_lengths=torch.tensor([prompt], dtype=torch.int32),
        logits_index=torch.arange(prompt),
        max_query=prompt,
        max_kv=prompt,
        spans=[(0, prompt, 5, prompt)],
    )
    assert (cosine(decoder.forward(prefill), want[:prompt]) >= 0.999).all()
    step = Batch(
        input_ids=ids[prompt:],
        positions=torch.tensor([prompt]),
        write_index=torch.tensor([prompt + 5]),
        query_starts=torch.tensor([0, 1], dtype=torch.int32),
        kv_starts=torch.tensor([5, 0], dtype=torch.int32),
        kv_lengths=torch.tensor([prompt + 1], dtype=torch.int32),
        logits_index=torch.tensor([0]),
        max_query=1,
        max_kv=prompt + 1,
        spans=[(0, 1, 5, prompt + 1)],
    )
    assert cosine(decoder.forward(step)[0], want[prompt]) >= 0.999


def test_the_cpu_serves_an_fp8_checkpoint_dequantized(fp8_model, cpu_settings):
    """The CPU's tier reads the FP8 checkpoint as float32 weight * scale, and translates with it as `generate`."""
    from hymt.engine.sampling_params import Sampling
    from hymt.languages import resolve
    from hymt.planner.decide import decision_for
    from hymt.translation.translator import start

    stored = _stored(fp8_model)
    settings = cpu_settings.replace(model=str(fp8_model), max_in_flight=2)
    decision = decision_for(settings)
    assert decision.profile == "cpu" and decision.weights == "fp32"
    translator = start(settings, decision)
    try:
        loaded = translator.engine.runner.loaded
        down = loaded.model.model.layers[1].mlp.down_proj.weight
        name = "model.layers.1.mlp.down_proj"
        assert torch.equal(down, stored[f"{name}.weight"].float() * stored[f"{name}.weight_scale"])
        job = translator.submit([("Good morning, friend.", resolve("en"))], resolve("de"), Sampling(greedy=True))
        job.wait(120)
        (request,), (tokens,) = job.requests, job.tokens
        ids = torch.tensor([request.prompt_ids])
        out = loaded.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=request.max_new_tokens,
            do_sample=False,
            repetition_penalty=Sampling(greedy=True).repetition_penalty,
            eos_token_id=loaded.stop_ids,
            pad_token_id=loaded.pad_id,
        )
        want = [t for t in out[0, ids.shape[1] :].tolist() if t not in loaded.stop_ids and t != loaded.pad_id]
        assert tokens == want and tokens
    finally:
        translator.stop()


def test_start_up_steps_down_through_the_tiers_that_hold_the_checkpoint():
    import dataclasses

    from hymt.engine.startup import tiers_to_try
    from hymt.planner.gpu import simulate
    from hymt.planner.plan import plan
    from hymt.planner.shapes import HUNYUAN_MT_7B_SHAPE
    from hymt.settings import Settings

    ada = dataclasses.replace(simulate(None, 12), compute_capability=(8, 9))
    bf16 = plan(HUNYUAN_MT_7B_SHAPE, ada, Settings())
    assert [t.name for t in tiers_to_try(bf16, auto=True)] == [
        "fp8-int8kv",
        "int4",
        "int4-int8kv",
        "nf4",
        "nf4-int8kv",
    ]
    assert [t.name for t in tiers_to_try(bf16, auto=False)] == ["fp8-int8kv"]
    published = dataclasses.replace(HUNYUAN_MT_7B_SHAPE, quantized_bits=8, quantized_format="compressed-tensors-fp8")
    decision = plan(published, dataclasses.replace(ada, total_bytes=24 << 30, free_bytes=24 << 30), Settings())
    assert [t.name for t in tiers_to_try(decision, auto=True)] == ["fp8", "fp8-int8kv"]


def test_a_device_whose_fp8_matmul_fails_is_named_before_loading(monkeypatch):
    from hymt.engine import fp8

    assert fp8.unavailable(torch.device("cpu")) is None

    def refuse(*args, **kwargs):
        raise RuntimeError("Only row-wise scaling on sm90 is supported")

    monkeypatch.setattr(torch, "_scaled_mm", refuse)
    assert fp8.unavailable(torch.device("cpu")) == (
        "torch._scaled_mm with row-wise scales does not run here: RuntimeError: Only row-wise scaling on sm90 is "
        "supported"
    )


def test_hymt_profile_plans_an_fp8_checkpoint_in_the_fp8_tiers(fp8_model):
    result = subprocess.run(
        [sys.executable, "-m", "hymt", "profile", "--model", str(fp8_model), "--gpu-memory-gb", "4"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)  # a tiny model: bf16 would fit, but its weights are FP8
    assert decision["profile"] == "fp8" and decision["weights"] == "compressed-tensors-fp8"


def test_the_few_rows_matmul_takes_tiles_that_divide_the_weights_columns():
    """kernels/fp8_matmul.tiling: K whole in tiles of 256 (the 7B's 4,096 and 14,336), of 128 where 256 do not
    divide it, and no tiling (torch._scaled_mm serves) where neither does."""
    from hymt.engine.kernels.fp8_matmul import tiling

    assert tiling(4096) == tiling(14336) == {"block_n": 64, "block_k": 256, "splits": 1}
    assert tiling(6912 - 128)["block_k"] == 128  # 6,784: 53 tiles of 128
    assert tiling(1040) is None
