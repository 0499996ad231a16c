"""The element-wise work of a layer, fused:

- `rope_norm_store`: the rotary embedding and the per-head RMSNorm of q and k (in the model's order: the dense
  Hunyuan models rotate first, hy_v3 normalises first), and the keys and values written into the KV arena at their
  rows (quantized to int8 with their per token and head scale on the INT8 tier), in one kernel. In torch that is
  two compiled kernels and two index copies (six more kernels for INT8).
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
    def rope_norm(x, partner, cos, sin, weight, partner_weight, eps, D: tl.constexpr, NORM_FIRST: tl.constexpr):
        """The rotary embedding and the per-head RMSNorm of x [R, D] (a row per head), given `partner`, the same
        rows with their halves swapped, cos/sin/weight [D] and `partner_weight`, the weight's halves swapped.
        NORM_FIRST: normalised, then rotated (hy_v3); else rotated, then normalised (the dense models).
        rotate_half(x) = (-x2, x1) and the rotation in the model's dtype, as transformers computes them; the norm in
        float32. A row and its partner hold the same values, so one sum of squares serves both."""
        sign = tl.where(tl.arange(0, D) < D // 2, -1.0, 1.0).to(x.dtype)
        if NORM_FIRST:
            f = x.to(tl.float32)
            inv = tl.rsqrt(tl.sum(f * f, axis=1) / D + eps)[:, None]
            normed = weight[None, :] * (f * inv).to(x.dtype)
            normed_partner = partner_weight[None, :] * (partner.to(tl.float32) * inv).to(x.dtype)
            return normed * cos[None, :] + (normed_partner * sign[None, :]) * sin[None, :]
        else:
            rotated = (x * cos[None, :] + (partner * sign[None, :]) * sin[None, :]).to(tl.float32)
            inv = tl.rsqrt(tl.sum(rotated * rotated, axis=1) / D + eps)
            return weight[None, :] * (rotated * inv[:, None]).to(x.dtype)

    @triton.jit
    def int8_row(x):
        """x [1, D]'s int8 values and their scale (max |x| / 127, in x's dtype), as kvcache.quantize."""
        f = x.to(tl.float32)
        scale = tl.maximum(tl.max(tl.max(tl.abs(f), axis=1), axis=0) / 127.0, 1e-8)
        return tl.minimum(tl.maximum(tl.floor(f / scale + 0.5), -127.0), 127.0).to(tl.int8), scale.to(x.dtype)

    @triton.jit
    def store_kv(
        Keys,
        Values,
        KScales,
        VScales,
        row,
        kv_head,
        k,
        v,
        stride_kv,
        stride_scale,
        D: tl.constexpr,
        QUANT: tl.constexpr,
    ):
        """One token's key and value [1, D] at its arena row, quantized with their scales on the INT8 tier: the key,
        the value and their scales (float32) as the arena now holds them (16-bit: as given, scales 1)."""
        d = tl.arange(0, D)[None, :]
        target = row * stride_kv + kv_head * D
        if QUANT:
            k8, k_scale = int8_row(k)
            v8, v_scale = int8_row(v)
            tl.store(Keys + target + d, k8)
            tl.store(Values + target + d, v8)
            tl.store(KScales + row * stride_scale + kv_head, k_scale)
            tl.store(VScales + row * stride_scale + kv_head, v_scale)
            return k8.to(k.dtype), v8.to(k.dtype), k_scale.to(tl.float32), v_scale.to(tl.float32)
        else:
            tl.store(Keys + target + d, k)
            tl.store(Values + target + d, v)
            return k, v, 1.0, 1.0

    @triton.jit
    def _rope_norm_store(
        Q,
        K,
        V,
        Cos,
        Sin,
        Positions,
        Rows,
        QWeight,
        KWeight,
        QOut,
        Keys,
        Values,
        KScales,
        VScales,
        eps,
        stride_q,
        stride_k,
        stride_v,
        stride_cos,
        stride_out,
        stride_kv,
        stride_scale,
        HEADS: tl.constexpr,
        D: tl.constexpr,
        QUANT: tl.constexpr,
        NORM_FIRST: tl.constexpr,
        PDL: tl.constexpr,
    ):
        wait_for_inputs(PDL)
        token = tl.program_id(0)
        head = tl.program_id(1)  # query heads first, then the KV heads
        d = tl.arange(0, D)
        swapped = (d + D // 2) % D
        position = tl.load(Positions + token)
        cos = tl.load(Cos + position * stride_cos + d)
        sin = tl.load(Sin + position * stride_cos + d)
        if head < HEADS:
            source = Q + token * stride_q + head * D
            weight = QWeight
        else:
            source = K + token * stride_k + (head - HEADS) * D
            weight = KWeight
        y = rope_norm(
            tl.load(source + d)[None, :],
            tl.load(source + swapped)[None, :],
            cos,
            sin,
            tl.load(weight + d),
            tl.load(weight + swapped),
            eps,
            D,
            NORM_FIRST,
        )
        if head < HEADS:
            tl.store(QOut + token * stride_out + head * D + d[None, :], y)
        else:
            kv_head = head - HEADS
            v = tl.load(V + token * stride_v + kv_head * D + d)[None, :]
            store_kv(
                Keys,
                Values,
                KScales,
                VScales,
                tl.load(Rows + token).to(tl.int64),
                kv_head,
                y,
                v,
                stride_kv,
                stride_scale,
                D,
                QUANT,
            )

    @triton.jit
    def _add_rms_norm(
        Hidden,
        Delta,
        Weight,
        Normed,
        eps,
        stride_hidden,
        stride_delta,
        stride_normed,
        N: tl.constexpr,
        BLOCK: tl.constexpr,
        PDL: tl.constexpr,
    ):
        wait_for_inputs(PDL)
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        inside = cols < N
        delta = tl.load(Delta + row * stride_delta + cols, mask=inside, other=0.0)
        add_norm_row(Hidden + row * stride_hidden, delta, Weight, Normed + row * stride_normed, eps, cols, N)

    @triton.jit
    def add_norm_row(hidden_row, delta, Weight, normed_row, eps, cols, N: tl.constexpr):
        """One row's residual sum hidden + delta (in the model's dtype) stored in place, and its RMSNorm (float32,
        rounded, times the weight) stored at normed_row."""
        inside = cols < N
        hidden = tl.load(hidden_row + cols, mask=inside, other=0.0)
        hidden = hidden + delta.to(hidden.dtype)
        tl.store(hidden_row + cols, hidden, mask=inside)
        x = hidden.to(tl.float32)
        inv = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
        normed = tl.load(Weight + cols, mask=inside, other=0.0) * (x * inv).to(hidden.dtype)
        tl.store(normed_row + cols, normed, mask=inside)


def rope_norm_store(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    rows: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
    keys: torch.Tensor,
    values: torch.Tensor,
    key_scales: torch.Tensor | None,
    value_scales: torch.Tensor | None,
    norm_first: bool = False,
) -> torch.Tensor:
    """q [T, heads * D], k and v [T, kv_heads * D] (row-strided views are fine), cos/sin [positions, D], positions
    and arena rows [T]: the rotated, normalised queries [T, heads, D] (normalised first where norm_first); the keys
    (likewise) and values stored into the layer's arena `keys`/`values` [tokens, kv_heads, D] (int8 with their
    scales where given)."""
    tokens = q.shape[0]
    kv_heads, head_dim = keys.shape[1], keys.shape[2]
    heads = q.shape[1] // head_dim
    out = torch.empty((tokens, heads, head_dim), dtype=q.dtype, device=q.device)
    quant = key_scales is not None
    common.launch(
        _rope_norm_store,
        (tokens, heads + kv_heads),
        q,
        k,
        v,
        cos,
        sin,
        positions,
        rows,
        q_weight,
        k_weight,
        out,
        keys,
        values,
        key_scales if quant else keys,
        value_scales if quant else values,
        eps,
        q.stride(0),
        k.stride(0),
        v.stride(0),
        cos.stride(0),
        out.stride(0),
        keys.stride(0),
        key_scales.stride(0) if key_scales is not None else 0,
        HEADS=heads,
        D=head_dim,
        QUANT=quant,
        NORM_FIRST=norm_first,
    )
    return out


def add_rms_norm(
    hidden: torch.Tensor,
    delta: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """model.add_rms_norm with the sum written into `hidden` [T, hidden_size] in place: (hidden, its RMSNorm)."""
    normed = torch.empty_like(hidden)
    size = hidden.shape[1]
    block = triton.next_power_of_2(size)
    common.launch(
        _add_rms_norm,
        (hidden.shape[0],),
        hidden,
        delta,
        weight,
        normed,
        eps,
        hidden.stride(0),
        delta.stride(0),
        normed.stride(0),
        N=size,
        BLOCK=block,
        num_warps=max(1, min(16, block // 512)),
    )
    return hidden, normed
