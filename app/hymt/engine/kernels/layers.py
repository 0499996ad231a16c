"""The element-wise work of a layer, fused:

- `rope_norm_store`: the rotary embedding and the per-head RMSNorm of q and k, and the keys and values written into
  the KV arena at their rows (quantized to int8 with their per token and head scale on the INT8 tier), in one
  kernel. In torch that is two compiled kernels and two index copies (six more kernels for INT8).
- `add_rms_norm`: the residual sum and the next RMSNorm in one pass over the row (torch.compile's kernel for it,
  compiled for any number of rows, took 2.7 us a call on the H200, 63 calls a step).
"""

from __future__ import annotations

import torch

from . import common
from .common import AVAILABLE

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _rope_norm_store(Q, K, V, Cos, Sin, Positions, Rows, QWeight, KWeight, QOut, Keys, Values, KScales, VScales,
                         eps, stride_q, stride_k, stride_v, stride_cos, stride_out, stride_kv, stride_scale,
                         HEADS: tl.constexpr, D: tl.constexpr, QUANT: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        token = tl.program_id(0)
        head = tl.program_id(1)  # query heads first, then the KV heads
        half = tl.arange(0, D // 2)
        position = tl.load(Positions + token)
        cos1 = tl.load(Cos + position * stride_cos + half)
        cos2 = tl.load(Cos + position * stride_cos + D // 2 + half)
        sin1 = tl.load(Sin + position * stride_cos + half)
        sin2 = tl.load(Sin + position * stride_cos + D // 2 + half)
        if head < HEADS:
            source = Q + token * stride_q + head * D
            weight = QWeight
        else:
            source = K + token * stride_k + (head - HEADS) * D
            weight = KWeight
        x1 = tl.load(source + half)
        x2 = tl.load(source + D // 2 + half)
        # rotate_half(x) = (-x2, x1), in the model's dtype as transformers computes it; then RMSNorm in float32.
        r1 = (x1 * cos1 - x2 * sin1).to(tl.float32)
        r2 = (x2 * cos2 + x1 * sin2).to(tl.float32)
        inv = tl.rsqrt((tl.sum(r1 * r1, axis=0) + tl.sum(r2 * r2, axis=0)) / D + eps)
        y1 = tl.load(weight + half) * (r1 * inv).to(x1.dtype)
        y2 = tl.load(weight + D // 2 + half) * (r2 * inv).to(x1.dtype)
        if head < HEADS:
            tl.store(QOut + token * stride_out + head * D + half, y1)
            tl.store(QOut + token * stride_out + head * D + D // 2 + half, y2)
        else:
            kv_head = head - HEADS
            row = tl.load(Rows + token).to(tl.int64)
            target = row * stride_kv + kv_head * D
            v1 = tl.load(V + token * stride_v + kv_head * D + half)
            v2 = tl.load(V + token * stride_v + kv_head * D + D // 2 + half)
            if QUANT:
                _store_int8(Keys + target, KScales + row * stride_scale + kv_head, y1, y2, half, D)
                _store_int8(Values + target, VScales + row * stride_scale + kv_head, v1, v2, half, D)
            else:
                tl.store(Keys + target + half, y1)
                tl.store(Keys + target + D // 2 + half, y2)
                tl.store(Values + target + half, v1)
                tl.store(Values + target + D // 2 + half, v2)

    @triton.jit
    def _store_int8(Out, Scale, x1, x2, half, D: tl.constexpr):
        """int8 values and their scale (max |x| / 127, in x's dtype) of one head's vector, as kvcache.quantize."""
        f1, f2 = x1.to(tl.float32), x2.to(tl.float32)
        scale = tl.maximum(tl.maximum(tl.max(tl.abs(f1), axis=0), tl.max(tl.abs(f2), axis=0)) / 127.0, 1e-8)
        q1 = tl.minimum(tl.maximum(tl.floor(f1 / scale + 0.5), -127.0), 127.0)
        q2 = tl.minimum(tl.maximum(tl.floor(f2 / scale + 0.5), -127.0), 127.0)
        tl.store(Out + half, q1.to(tl.int8))
        tl.store(Out + D // 2 + half, q2.to(tl.int8))
        tl.store(Scale, scale.to(x1.dtype))

    @triton.jit
    def _add_rms_norm(Hidden, Delta, Weight, Normed, eps, stride_hidden, stride_delta, stride_normed,
                      N: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        inside = cols < N
        hidden = tl.load(Hidden + row * stride_hidden + cols, mask=inside, other=0.0)
        hidden = hidden + tl.load(Delta + row * stride_delta + cols, mask=inside, other=0.0)
        tl.store(Hidden + row * stride_hidden + cols, hidden, mask=inside)
        x = hidden.to(tl.float32)
        inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        normed = tl.load(Weight + cols, mask=inside, other=0.0) * (x * inv).to(hidden.dtype)
        tl.store(Normed + row * stride_normed + cols, normed, mask=inside)


def rope_norm_store(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                    positions: torch.Tensor, rows: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor,
                    eps: float, keys: torch.Tensor, values: torch.Tensor, key_scales: torch.Tensor | None,
                    value_scales: torch.Tensor | None) -> torch.Tensor:
    """q [T, heads * D], k and v [T, kv_heads * D] (row-strided views are fine), cos/sin [positions, D], positions
    and arena rows [T]: the rotated, normalised queries [T, heads, D]; the keys (rotated, normalised) and values
    stored into the layer's arena `keys`/`values` [tokens, kv_heads, D] (int8 with their scales where given)."""
    tokens = q.shape[0]
    kv_heads, head_dim = keys.shape[1], keys.shape[2]
    heads = q.shape[1] // head_dim
    out = torch.empty((tokens, heads, head_dim), dtype=q.dtype, device=q.device)
    quant = key_scales is not None
    common.launch(_rope_norm_store, (tokens, heads + kv_heads),
                  q, k, v, cos, sin, positions, rows, q_weight, k_weight, out, keys, values,
                  key_scales if quant else keys, value_scales if quant else values, eps,
                  q.stride(0), k.stride(0), v.stride(0), cos.stride(0), out.stride(0), keys.stride(0),
                  key_scales.stride(0) if quant else 0, HEADS=heads, D=head_dim, QUANT=quant)
    return out


def add_rms_norm(hidden: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float,
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """model.add_rms_norm with the sum written into `hidden` [T, hidden_size] in place: (hidden, its RMSNorm)."""
    normed = torch.empty_like(hidden)
    size = hidden.shape[1]
    block = triton.next_power_of_2(size)
    common.launch(_add_rms_norm, (hidden.shape[0],), hidden, delta, weight, normed, eps, hidden.stride(0),
                  delta.stride(0), normed.stride(0), N=size, BLOCK=block, num_warps=max(1, min(16, block // 512)))
    return hidden, normed
