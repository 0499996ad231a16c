"""`decode_attention`: the attention of a decoding step, one query per segment, in one kernel: the new token's
queries and key rotated and normalised (as `rope_norm_store`), its key and value written to the arena, and the
queries attended over the segment's range, the query heads that share a KV head in one program. An INT8 arena is
read as stored, its scales folded into the scores and the probabilities, so it is never dequantized first (which,
a whole layer per step, cost the 8 GB tier a third of its decoding step). At small batches each range is split
across programs and the parts merged by their log-sum-exp, by the last program of a head group to finish, so one
segment still fills the GPU and the merge costs no kernel of its own.
"""

from __future__ import annotations

import torch

from . import common
from .common import AVAILABLE

# Programs a decoding step's attention aims for (splits_for), and so the most (segment, KV head) groups that are
# ever split: the size of the arrival counters the split kernels share.
PROGRAMS = 128

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs
    from .layers import rope_norm, store_kv

    @triton.jit
    def _decode(
        Q,
        K,
        V,
        Cos,
        Sin,
        Positions,
        QWeight,
        KWeight,
        Keys,
        Values,
        KScales,
        VScales,
        Starts,
        Lengths,
        Out,
        PartOut,
        PartLse,
        Arrived,
        eps,
        scale_log2,
        stride_q,
        stride_k,
        stride_v,
        stride_cos,
        stride_kv,
        stride_scale,
        stride_out,
        HEADS: tl.constexpr,
        KV_HEADS: tl.constexpr,
        GROUP: tl.constexpr,
        BLOCK_G: tl.constexpr,
        D: tl.constexpr,
        BLOCK_N: tl.constexpr,
        SPLITS: tl.constexpr,
        QUANT: tl.constexpr,
        NORM_FIRST: tl.constexpr,
        PDL: tl.constexpr,
    ):
        wait_for_inputs(PDL)
        seg = tl.program_id(0)
        kv_head = tl.program_id(1)
        part = tl.program_id(2)
        start = tl.load(Starts + seg).to(tl.int64)
        cached = tl.load(Lengths + seg) - 1  # the rows before the new token's, which is the range's last
        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, D)
        swapped = (d + D // 2) % D
        heads = kv_head * GROUP + g
        in_group = (g < GROUP)[:, None]
        position = tl.load(Positions + seg)
        cos = tl.load(Cos + position * stride_cos + d)
        sin = tl.load(Sin + position * stride_cos + d)
        q_rows = Q + seg * stride_q + heads[:, None] * D
        q = rope_norm(
            tl.load(q_rows + d[None, :], mask=in_group, other=0.0),
            tl.load(q_rows + swapped[None, :], mask=in_group, other=0.0),
            cos,
            sin,
            tl.load(QWeight + d),
            tl.load(QWeight + swapped),
            eps,
            D,
            NORM_FIRST,
        )
        m = tl.full([BLOCK_G], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, D], tl.float32)
        chunk = tl.cdiv(tl.cdiv(cached, SPLITS), BLOCK_N) * BLOCK_N
        lo = part * chunk
        hi = tl.minimum(lo + chunk, cached)
        for first in range(lo, hi, BLOCK_N):
            t = first + tl.arange(0, BLOCK_N)
            valid = t < hi
            rows = start + t
            k = tl.load(Keys + rows[:, None] * stride_kv + kv_head * D + d[None, :], mask=valid[:, None], other=0)
            scores = tl.dot(q, tl.trans(k.to(q.dtype))) * scale_log2
            if QUANT:
                scores = scores * tl.load(KScales + rows * stride_scale + kv_head, mask=valid, other=0.0)[None, :]
            scores = tl.where(valid[None, :], scores, float("-inf"))
            m_new = tl.maximum(m, tl.max(scores, axis=1))
            p = tl.exp2(scores - m_new[:, None])
            alpha = tl.exp2(m - m_new)
            total = total * alpha + tl.sum(p, axis=1)
            v = tl.load(Values + rows[:, None] * stride_kv + kv_head * D + d[None, :], mask=valid[:, None], other=0)
            if QUANT:
                p = p * tl.load(VScales + rows * stride_scale + kv_head, mask=valid, other=0.0)[None, :]
            acc = acc * alpha[:, None] + tl.dot(p.to(q.dtype), v.to(q.dtype))
            m = m_new
        if part == SPLITS - 1:  # the new token: stored at its row, and attended to from here, as the arena holds it
            k_row = K + seg * stride_k + kv_head * D
            key = rope_norm(
                tl.load(k_row + d)[None, :],
                tl.load(k_row + swapped)[None, :],
                cos,
                sin,
                tl.load(KWeight + d),
                tl.load(KWeight + swapped),
                eps,
                D,
                NORM_FIRST,
            )
            value = tl.load(V + seg * stride_v + kv_head * D + d)[None, :]
            key, value, key_scale, value_scale = store_kv(
                Keys, Values, KScales, VScales, start + cached, kv_head, key, value, stride_kv, stride_scale, D, QUANT
            )
            score = tl.sum(q.to(tl.float32) * key.to(tl.float32), axis=1) * scale_log2 * key_scale
            m_new = tl.maximum(m, score)
            p = tl.exp2(score - m_new)
            alpha = tl.exp2(m - m_new)
            total = total * alpha + p
            acc = acc * alpha[:, None] + (p * value_scale).to(q.dtype).to(tl.float32)[:, None] * value.to(tl.float32)
            m = m_new
        if SPLITS == 1:
            tl.store(
                Out + seg * stride_out + heads[:, None] * D + d[None, :],
                (acc / total[:, None]).to(q.dtype),
                mask=in_group,
            )
        else:
            # An empty part (its range starts past the cached rows) weighs nothing in the merge.
            nonempty = total > 0
            out = tl.where(nonempty[:, None], acc / tl.where(nonempty, total, 1.0)[:, None], 0.0)
            lse = tl.where(nonempty, m + tl.log2(tl.where(nonempty, total, 1.0)), float("-inf"))
            slots = (seg * HEADS + heads) * SPLITS
            tl.store(PartOut + (slots + part)[:, None] * D + d[None, :], out, mask=in_group)
            tl.store(PartLse + slots + part, lse, mask=g < GROUP)
            # Every thread's stores before the arrival; the group's last program to arrive merges its parts (read
            # past L1, which may hold none of them) and leaves the counter at zero for the next call.
            tl.debug_barrier()
            counter = Arrived + seg * KV_HEADS + kv_head
            if tl.atomic_add(counter, 1, sem="acq_rel") == SPLITS - 1:
                tl.atomic_xchg(counter, 0)
                top = tl.full([BLOCK_G], float("-inf"), tl.float32)
                for s in tl.static_range(SPLITS):
                    top = tl.maximum(top, tl.load(PartLse + slots + s, mask=g < GROUP, other=0.0, cache_modifier=".cg"))
                weights = tl.zeros([BLOCK_G], tl.float32)
                merged = tl.zeros([BLOCK_G, D], tl.float32)
                for s in tl.static_range(SPLITS):
                    weight = tl.exp2(
                        tl.load(PartLse + slots + s, mask=g < GROUP, other=0.0, cache_modifier=".cg") - top
                    )
                    merged += weight[:, None] * tl.load(
                        PartOut + (slots + s)[:, None] * D + d[None, :], mask=in_group, other=0.0, cache_modifier=".cg"
                    )
                    weights += weight
                tl.store(
                    Out + seg * stride_out + heads[:, None] * D + d[None, :],
                    (merged / weights[:, None]).to(q.dtype),
                    mask=in_group,
                )


def splits_for(segments: int, kv_heads: int) -> int:
    """How many parts each segment's range is split into: more programs for the GPU's multiprocessors at small
    batches (a power of two, at most 4: one segment's bf16 step was 0.03 ms shorter than with up to 16, whose
    parts of a short range are mostly merging), one part (and no merge) from 16 segments of 8 KV heads up."""
    splits = 1
    while splits < 4 and segments * kv_heads * splits < PROGRAMS:
        splits *= 2
    return splits


def decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    positions: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
    keys: torch.Tensor,
    values: torch.Tensor,
    key_scales: torch.Tensor | None,
    value_scales: torch.Tensor | None,
    starts: torch.Tensor,
    lengths: torch.Tensor,
    scale: float,
    arrived: torch.Tensor,
    splits: int | None = None,
    norm_first: bool = False,
) -> torch.Tensor:
    """A decoding step's attention for n segments: their new token's q [n, heads * D], k and v [n, kv_heads * D]
    (row-strided views are fine) at `positions` [n], rotated and normalised with cos/sin [positions, D] and the
    norm weights; its key and value stored at row start + length - 1 of the layer's arena `keys`/`values`
    [tokens, kv_heads, D] (int8 with scales [tokens, kv_heads, 1] where given); the attention [n, heads, D] over
    rows start .. start + length - 1, each range in `splits` parts (a power of two; splits_for's by default);
    `arrived`: int32 zeros, one per segment and KV head where split (at least PROGRAMS), left as zeros;
    norm_first: q and k normalised before the rotation (hy_v3), else after."""
    n = q.shape[0]
    kv_heads, head_dim = keys.shape[1], keys.shape[2]
    heads = q.shape[1] // head_dim
    group = heads // kv_heads
    splits = splits or splits_for(n, kv_heads)
    if splits > 1 and arrived.numel() < n * kv_heads:
        raise ValueError(f"decode_attention: {arrived.numel()} arrival counters for {n} x {kv_heads} split groups")
    out = torch.empty((n, heads, head_dim), dtype=q.dtype, device=q.device)
    quant = key_scales is not None
    if splits > 1:
        part_out = torch.empty((n * heads * splits, head_dim), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((n * heads * splits,), dtype=torch.float32, device=q.device)
    else:
        part_out = part_lse = out
    common.launch(
        _decode,
        (n, kv_heads, splits),
        q,
        k,
        v,
        cos,
        sin,
        positions,
        q_weight,
        k_weight,
        keys,
        values,
        key_scales if quant else keys,
        value_scales if quant else values,
        starts,
        lengths,
        out,
        part_out,
        part_lse,
        arrived,
        eps,
        scale * 1.4426950408889634,
        q.stride(0),
        k.stride(0),
        v.stride(0),
        cos.stride(0),
        keys.stride(0),
        key_scales.stride(0) if key_scales is not None else 0,
        out.stride(0),
        HEADS=heads,
        KV_HEADS=kv_heads,
        GROUP=group,
        BLOCK_G=max(16, triton.next_power_of_2(group)),
        D=head_dim,
        BLOCK_N=64,
        SPLITS=splits,
        QUANT=quant,
        NORM_FIRST=norm_first,
        num_warps=4,
    )
    return out
