"""The reference a quantized profile is checked against (`bench/run.py check --identity`): transformers' own model of
the checkpoint on the GPU, each weight the engine quantized replaced by its dequantized value, so that the engine's
logits and transformers' differ only by the engine's arithmetic (its kernels, its activations' rounding), not by the
quantization itself.

- int4 (humming-kernels): each fused projection quantized again by humming's own quantizer from the same 16-bit
  weights (deterministic: the values the engine's layer holds before its kernel layout) and dequantized by humming's
  torch code, which shares nothing with the kernel under test; the 8-bit head the same way; a Mixture of Experts'
  4-bit experts (its shared expert among them) through hymt's own dequantization (experts_int4.dequantize, what its
  kernel test checks against).
- fp8: each Fp8Linear's e4m3 weight times its scale; with `activations`, each projection's input quantized per
  token as the engine's is (torch's arithmetic, engine/fp8.quantize_rows, where the engine runs a Triton kernel), so
  that what remains is the engine's arithmetic; without, the distance W8A8 puts between the model and its weights;
  with `jitter`, each quantized input moved by up to one bf16 unit before its rounding, so that the reference against
  its jittered self says how far apart rounding alone puts two correct W8A8 computations on these weights.
"""

from __future__ import annotations

from pathlib import Path

import torch


def _humming_dequantized(layer, weight: torch.Tensor) -> torch.Tensor:
    """`weight` [N, K] quantized as humming quantized it into `layer`, and back."""
    from humming.schema import HummingWeightSchema
    from humming.utils.weight import dequantize_weight

    schema, rows = layer.weight_schema, weight.shape[0]
    padded = torch.cat([weight, weight.new_zeros(-rows % 128, weight.shape[1])])  # as the engine pads its head
    tensors = HummingWeightSchema.quant_tensor(padded.to(torch.bfloat16), schema, torch.bfloat16)
    return dequantize_weight(
        tensors["weight"],
        tensors.get("weight_scale"),
        tensors.get("zero_point"),
        tensors.get("weight_scale_2"),
        schema.b_dtype,
        packed=True,
    )[:rows]


def _dequantized(module, original: torch.Tensor) -> torch.Tensor | None:
    """The weight a quantized engine module computes with, from its 16-bit `original`; None for a 16-bit one."""
    from hymt.engine.fp8 import Fp8Linear

    if isinstance(module, Fp8Linear):
        return module.dequantized()
    if type(module).__name__ == "HummingLayer":
        return _humming_dequantized(module, original)
    return None


def _quantized_input(module, args):
    from hymt.engine.fp8 import quantize_rows

    (x,) = args
    q, scale = quantize_rows(x.reshape(-1, x.shape[-1]))
    return ((q.float() * scale).to(x.dtype).reshape(x.shape),)


def _jittered_quantized_input(module, args):
    """_quantized_input after moving each entry by -1, 0 or +1 unit in the last place of bf16 at random: the
    rounding differences two correct implementations of the layers before (fused kernels, another order of
    operations) put into the activations, which the e4m3 rounding then sometimes takes a whole e4m3 step apart."""
    (x,) = args
    wide = x.float()
    unit = torch.ldexp(torch.ones_like(wide), torch.frexp(wide).exponent - 8)  # bf16 keeps 8 significant bits
    moved = (wide + torch.randint_like(wide, -1, 2) * unit).to(x.dtype)
    return _quantized_input(module, (moved,))


def reference(
    engine_model, model_dir: Path, device: torch.device, activations: bool = True, jitter: bool = False
) -> torch.nn.Module:
    """transformers' model of `model_dir` in bf16 on `device`, with the weights `engine_model` quantized replaced by
    their dequantized values (and, for fp8 with `activations`, the inputs of those projections quantized per token
    as the engine quantizes them; with `jitter`, moved by up to a bf16 unit first: how far rounding alone puts
    two W8A8 computations of the same model apart)."""
    from transformers import AutoModelForCausalLM

    from hymt.engine.experts_int4 import Int4Experts, dequantize
    from hymt.engine.fp8 import Fp8Linear
    from hymt.engine.model import PROJECTIONS, owner_path
    from hymt.engine.moe import is_moe
    from hymt.engine.weights import Int8Head

    # Beside the engine, outside the simulated card's share of the GPU (what `check` measures after it is freed).
    if device.type == "cuda":
        torch.cuda.set_per_process_memory_fraction(1.0, device)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    model = model.to(device).eval()  # type: ignore[arg-type]  # typeshed's functools.wraps (PreTrainedModel.to) binds no self
    base = engine_model.get_base_model() if hasattr(engine_model, "get_base_model") else engine_model
    for ours, theirs in zip(base.model.layers, model.model.layers):
        for owner, fused, names in PROJECTIONS:
            module = ours.get_submodule(owner_path(ours, owner))
            holder = theirs.get_submodule(owner_path(theirs, owner))
            if not hasattr(module, fused) and not hasattr(module, names[0]):
                continue  # a shared expert that the 4-bit experts hold (below)
            engine_module = getattr(module, fused) if hasattr(module, fused) else getattr(module, names[0])
            parts = [getattr(holder, name).weight.data for name in names]
            weight = _dequantized(engine_module, torch.cat(parts))
            if weight is None:
                continue
            for name, rows in zip(names, weight.split([p.shape[0] for p in parts])):
                getattr(holder, name).weight.data.copy_(rows.to(torch.bfloat16))
                if activations and isinstance(engine_module, Fp8Linear):
                    hook = _jittered_quantized_input if jitter else _quantized_input
                    getattr(holder, name).register_forward_pre_hook(hook)
        if is_moe(ours.mlp) and isinstance(ours.mlp.experts, Int4Experts):
            experts, packed = theirs.mlp.experts, ours.mlp.experts
            for e in range(experts.gate_up_proj.shape[0]):
                experts.gate_up_proj.data[e] = dequantize(packed.gate_up, e, torch.bfloat16)
                experts.down_proj.data[e] = dequantize(packed.down, e, torch.bfloat16)
            if packed.shared:  # the shared expert, their last
                shared = theirs.mlp.shared_experts
                gate, up = dequantize(packed.gate_up, packed.routed, torch.bfloat16).chunk(2)
                shared.gate_proj.weight.data.copy_(gate)
                shared.up_proj.weight.data.copy_(up)
                shared.down_proj.weight.data.copy_(dequantize(packed.down, packed.routed, torch.bfloat16))
    if isinstance(base.lm_head, Int8Head):
        head = model.lm_head.weight.data
        head.copy_(_humming_dequantized(base.lm_head.layer, head).to(head.dtype))
    return model
