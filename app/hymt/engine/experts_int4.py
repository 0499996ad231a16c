"""A Mixture of Experts' routed experts in 4 bits, for the int4 profiles: each expert's matrices quantized in groups
of 128 along the input dimension, as the dense layers' INT4 is (weights.py), with a bf16 scale and minimum per group
(0.53 bytes a weight: Hy-MT2-30B-A3B's 28.4 B expert weights in 14 GiB instead of 53), packed as
kernels/moe.py's grouped matmul reads them.

`Int4Experts` stands where transformers' experts module stood: on a GPU with the kernels the decoder hands its
weights to the grouped matmul; elsewhere (the eager fallback when graph capture failed) its forward dequantizes each
chosen expert in turn.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .kernels.moe import Int4Weights

GROUP_SIZE = 128
_LEVELS = 15  # 4 bits: 0..15
# Experts quantized together: their float32 scratch (about 200 MB for four of Hy-MT2-30B-A3B's) is what loading
# needs beside the weights, well inside the prefill scratch the plan keeps, which is not in use yet.
_CHUNK = 4


def quantize(
    weight: torch.Tensor,
    device: torch.device | None = None,
    group: int = GROUP_SIZE,
    last: torch.Tensor | None = None,
) -> Int4Weights:
    """weight [E, N, K] (anywhere) -> 4 bits on `device` (the weight's own by default), min-max in each group of
    `group` (even) along K (a multiple of it); a few experts at a time, so that no 16-bit or float32 copy of the
    whole is ever made on the device. `last` [N, K]: one more expert after them (a shared expert)."""
    experts, n, k = weight.shape
    if k % group or group % 2:
        raise ValueError(f"4-bit experts need an input dimension divisible by {group}, not {k}")
    chunks = [*weight.split(_CHUNK), *([] if last is None else [last[None]])]
    parts = [_quantized(chunk.to(device or weight.device), group) for chunk in chunks]
    packed, scales, minimums = (torch.cat(tensors) for tensors in zip(*parts))
    return Int4Weights(packed, scales, minimums, group)


def _quantized(weight: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    experts, n, k = weight.shape
    groups = weight.float().view(experts, n, k // group, group)
    minimum = groups.amin(dim=-1).to(torch.bfloat16)
    scale = ((groups.amax(dim=-1) - minimum.float()) / _LEVELS).clamp(min=1e-8).to(torch.bfloat16)
    q = ((groups - minimum.float()[..., None]) / scale.float()[..., None]).round().clamp(0, _LEVELS)
    q = q.to(torch.uint8).view(experts, n, k)
    return (q[..., : k // 2] | (q[..., k // 2 :] << 4)).contiguous(), scale, minimum


def dequantize(weights: Int4Weights, expert: int, dtype: torch.dtype) -> torch.Tensor:
    """One expert's matrix [N, K] back in `dtype`, as the kernel computes it (q * scale + minimum in float32)."""
    packed = weights.packed[expert]
    q = torch.cat([packed & 15, packed >> 4], dim=-1).float()
    n, k = q.shape
    scale = weights.scales[expert].float().repeat_interleave(weights.group, dim=-1)
    minimum = weights.minimums[expert].float().repeat_interleave(weights.group, dim=-1)
    return (q * scale + minimum).view(n, k).to(dtype)


class Int4Experts(torch.nn.Module):
    """A MoE layer's routed experts in 4 bits: gate/up [E, 2I, H] and down [E, H, I]; with `shared` (its gate/up
    [2I, H] and down [H, I]) the layer's shared expert too, as expert E after them, which every token takes with
    weight 1 (engine/moe.py): one more slot of the experts' kernels, where it took three kernels of its own. The 4-bit
    tensors are buffers, so moving the model moves them."""

    gate_up_packed: torch.Tensor
    gate_up_scales: torch.Tensor
    gate_up_minimums: torch.Tensor
    down_packed: torch.Tensor
    down_scales: torch.Tensor
    down_minimums: torch.Tensor

    def __init__(
        self,
        gate_up: torch.Tensor,
        down: torch.Tensor,
        device: torch.device | None = None,
        shared: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        super().__init__()
        self.routed = gate_up.shape[0]  # the shared expert's index, where there is one
        self.shared = shared is not None
        for name, weight, last in (("gate_up", gate_up, shared and shared[0]), ("down", down, shared and shared[1])):
            quantized = quantize(weight, device, last=last)
            for part in ("packed", "scales", "minimums"):
                self.register_buffer(f"{name}_{part}", getattr(quantized, part), persistent=False)

    @property
    def gate_up(self) -> Int4Weights:
        return Int4Weights(self.gate_up_packed, self.gate_up_scales, self.gate_up_minimums, GROUP_SIZE)

    @property
    def down(self) -> Int4Weights:
        return Int4Weights(self.down_packed, self.down_scales, self.down_minimums, GROUP_SIZE)

    def forward(self, x: torch.Tensor, index: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """transformers' eager experts' arithmetic over the dequantized weights: each slot's output weighed in float32
        and the token's slots summed."""
        out = torch.zeros(x.shape[0], x.shape[1], dtype=torch.float32, device=x.device)
        gate_up, down = self.gate_up, self.down
        for expert in index.unique().tolist():
            tokens, slot = torch.where(index == expert)
            gate, up = F.linear(x[tokens], dequantize(gate_up, expert, x.dtype)).chunk(2, dim=-1)
            hidden = F.linear(F.silu(gate) * up, dequantize(down, expert, x.dtype))
            out.index_add_(0, tokens, hidden.float() * weights[tokens, slot, None])
        return out.to(x.dtype)
