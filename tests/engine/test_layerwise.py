"""A checkpoint read one decoder layer at a time (engine/layerwise.py), on the CPU: each layer is placed as soon as
transformers has read it, while the layers after it are still unread; its 16-bit modules are let go; and the model
comes out as the one read whole and quantized afterwards, for the 7B's and the MoE's tiny models (Tencent's FP8
layout is read the same way in test_fp8.py). And humming's kernels built for each new layer shape as it is placed
(weights.KernelBuilds), on threads of their own."""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from hymt.engine import fp8_weights, layerwise, loader, weights
from hymt.engine.fp8 import Fp8Linear
from hymt.errors import ModelLoadError

CPU = torch.device("cpu")


def _read(checkpoint, placement):
    """As the loader reads for the GPU profiles (loader.py), on the CPU."""
    return loader._read(checkpoint, AutoConfig.from_pretrained(checkpoint), torch.bfloat16, None, None, placement)


def _whole(checkpoint):
    return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16).eval()


@pytest.mark.parametrize("family", ["hunyuan-mt-7b", "hy-mt2-30b-a3b"])
def test_each_layer_is_placed_as_soon_as_it_is_read_and_its_16_bit_weights_go(family, family_model):
    placed = []  # (name, every weight of the part read, no weight of a later layer read)
    sixteen_bit = []

    def layer(name, part):
        layers, _ = watch.owner(part) or (None, "")
        later = list(layers or [])[int(name.rsplit(".", 1)[1]) + 1 :]
        placed.append((name, _read_whole(part), all(p.is_meta for m in later for p in m.parameters())))
        # What a placement does: the projections replaced by modules of its own, the 16-bit ones let go.
        for owner in (part.self_attn, part.mlp):
            for child, module in list(owner.named_children()):
                if isinstance(module, torch.nn.Linear) or child == "experts":
                    sixteen_bit.append(weakref.ref(module))
                    setattr(owner, child, torch.nn.Identity())

    def head(part):
        placed.append(("lm_head", _read_whole(part), True))
        sixteen_bit.append(weakref.ref(part))
        return torch.nn.Linear(part.in_features, part.out_features, bias=False, dtype=torch.bfloat16)

    with layerwise.reading(layerwise.Placement(layer=layer, head=head)) as watch:
        model = AutoModelForCausalLM.from_pretrained(family_model(family), dtype=torch.bfloat16)
        watch.finish(model)
        gc.collect()
        assert sixteen_bit and [ref for ref in sixteen_bit if ref() is not None] == []  # nothing holds them

    count = model.config.num_hidden_layers
    assert [name for name, _, _ in placed] == ["lm_head"] + [f"model.layers.{i}" for i in range(count)]
    assert all(whole and first for _, whole, first in placed), placed
    assert not any(p.is_meta for p in model.parameters())


def _read_whole(part: torch.nn.Module) -> bool:
    return all(not p.is_meta for p in part.parameters())


@pytest.mark.parametrize(
    ("family", "quantized"), [("hunyuan-mt-7b", True), ("hy-mt2-30b-a3b", False)], ids=["7b-fp8", "moe-kept"]
)
def test_the_model_read_layer_by_layer_is_the_model_read_whole(family, quantized, family_model):
    """The fp8 profiles' placement (on the CPU) against the model read whole and quantized afterwards; the MoE's
    layers kept as read, against the model read whole: the same weights and buffers, nothing made up."""
    checkpoint = family_model(family)
    whole = _whole(checkpoint)
    with contextlib.ExitStack() as stack:
        if quantized:
            for layer in whole.model.layers:
                fp8_weights.quantize_layer(layer, CPU)
            placement = loader._placement("fp8", checkpoint, None, CPU, stack)
        else:
            placement = layerwise.Placement(layer=lambda name, layer: None)
        streamed = _read(checkpoint, placement).eval()
    want, got = whole.state_dict(), streamed.state_dict()
    assert list(got) == list(want)
    for name, tensor in want.items():
        assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name
    if quantized:
        assert isinstance(streamed.model.layers[1].mlp.gate_up_proj, Fp8Linear)


class _StandIn(torch.nn.Module):
    """humming's layer where there is no GPU: the 16-bit weight it was given, and the format it was asked for."""

    def __init__(self, weight: torch.Tensor, dtype: str):
        super().__init__()
        self.register_buffer("weight", weight.clone())
        self.dtype_asked = dtype


class _StandInExperts(torch.nn.Module):
    """Int4Experts where the tiny model's experts are narrower than its groups of 128: what it was given."""

    def __init__(self, gate_up: torch.Tensor, down: torch.Tensor, device: torch.device, shared: tuple | None = None):
        super().__init__()
        self.register_buffer("gate_up", gate_up.to(device, copy=True))
        self.register_buffer("down", down.to(device, copy=True))
        for name, weight in zip(("shared_gate_up", "shared_down"), shared or ()):
            self.register_buffer(name, weight.to(device, copy=True))


@pytest.mark.parametrize("family", ["hunyuan-mt-7b", "hy-mt2-30b-a3b"])
def test_the_int4_placement_as_read_is_the_int4_placement_afterwards(family, family_model, monkeypatch):
    """The int4 profiles' own placement (weights.int4_layer and int8_head) with humming and the 4-bit experts stood
    in by modules that keep what they are given: the head in 8 bits, each layer's projections fused and 4-bit, a
    MoE's stacked experts, as the model read whole and placed afterwards has them."""
    monkeypatch.setattr(weights, "int4_unavailable", lambda: None)
    monkeypatch.setattr(weights, "_humming", _StandIn)
    monkeypatch.setattr(weights, "Int4Experts", _StandInExperts)
    checkpoint = family_model(family)
    whole = _whole(checkpoint)
    whole.lm_head = weights.int8_head(whole.lm_head, CPU)
    for layer in whole.model.layers:
        weights.int4_layer(layer, CPU)
    with contextlib.ExitStack() as stack:
        streamed = _read(checkpoint, loader._placement("int4", checkpoint, None, CPU, stack)).eval()
    want, got = whole.state_dict(), streamed.state_dict()
    assert list(got) == list(want)
    for name, tensor in want.items():
        assert torch.equal(got[name], tensor), name
    assert streamed.lm_head.layer.dtype_asked == "uint8"
    attn = streamed.model.layers[1].self_attn
    assert attn.qkv_proj.dtype_asked == "uint4" and not hasattr(attn, "q_proj")
    if family == "hy-mt2-30b-a3b":  # the shared expert handed to the experts, its own projections gone
        mlp = streamed.model.layers[1].mlp
        assert isinstance(mlp.experts, _StandInExperts) and hasattr(mlp.experts, "shared_down")
        assert not any(hasattr(mlp.shared_experts, name) for name in ("gate_proj", "gate_up_proj", "down_proj"))


class _Called(torch.nn.Module):
    """A layer whose first call is recorded (the thread it ran on, the input's shape), or fails."""

    def __init__(self, calls: list, fails: bool = False):
        super().__init__()
        self.register_buffer("weight", torch.zeros(1))
        self.calls, self.fails = calls, fails

    def forward(self, x):
        self.calls.append((threading.current_thread().name, tuple(x.shape), x.dtype))
        if self.fails:
            raise RuntimeError("nvrtc: no kernel for this GPU")
        return x


def test_each_new_shape_gets_one_first_call_on_a_thread_of_its_own():
    calls: list = []
    with weights.KernelBuilds() as builds:
        builds.add(_Called(calls), (6144, 4096, 4))
        builds.add(_Called(calls), (6144, 4096, 4))  # another layer of the same shape: built already
        builds.add(_Called(calls), (4096, 14336, 4))
    assert sorted(shape for _, shape, _ in calls) == [(1, 4096), (1, 14336)]
    assert all(name.startswith("hymt-humming-build") for name, _, _ in calls)
    assert {dtype for _, _, dtype in calls} == {torch.bfloat16}


def test_a_kernel_that_cannot_be_built_fails_the_load_in_one_line_unless_it_failed_already():
    with pytest.raises(ModelLoadError, match="humming-kernels cannot serve int4 on this GPU: RuntimeError: nvrtc"):
        with weights.KernelBuilds() as builds:
            builds.add(_Called([], fails=True), (4096, 4096, 4))
    with pytest.raises(torch.OutOfMemoryError):  # the error the load met is the one said
        with weights.KernelBuilds() as builds:
            builds.add(_Called([], fails=True), (4096, 4096, 4))
            raise torch.OutOfMemoryError("CUDA out of memory")
