"""`decode_attention`: one query per segment against its range of the arena, the query heads that share a KV head
in one program. An INT8 arena is read as stored, its scales folded into the scores and the probabilities, so it is
never dequantized first (which, a whole layer per step, cost the 8 GB tier a third of its decoding step). At small
batches each range is split across programs and the parts merged by their log-sum-exp, so one segment still fills
the GPU.
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
    def _decode_part(Q, Keys, Values, KScales, VScales, Starts, Lengths, Out, PartOut, PartLse, scale_log2,
                     stride_q, stride_kv, stride_scale, stride_out,
                     HEADS: tl.constexpr, GROUP: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr,
                     BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, QUANT: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        seg = tl.program_id(0)
        kv_head = tl.program_id(1)
        part = tl.program_id(2)
        start = tl.load(Starts + seg).to(tl.int64)
        length = tl.load(Lengths + seg)
        chunk = tl.cdiv(tl.cdiv(length, SPLITS), BLOCK_N) * BLOCK_N
        lo = part * chunk
        hi = tl.minimum(lo + chunk, length)
        g = tl.arange(0, BLOCK_G)
        d = tl.arange(0, D)
        heads = kv_head * GROUP + g
        q = tl.load(Q + seg * stride_q + heads[:, None] * D + d[None, :], mask=(g < GROUP)[:, None], other=0.0)
        m = tl.full([BLOCK_G], float("-inf"), tl.float32)
        total = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, D], tl.float32)
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
        if SPLITS == 1:
            out = acc / total[:, None]
            tl.store(Out + seg * stride_out + heads[:, None] * D + d[None, :], out.to(q.dtype),
                     mask=(g < GROUP)[:, None])
        else:
            # An empty part (its range starts past the segment's length) weighs nothing in the merge.
            nonempty = total > 0
            out = tl.where(nonempty[:, None], acc / tl.where(nonempty, total, 1.0)[:, None], 0.0)
            lse = tl.where(nonempty, m + tl.log2(tl.where(nonempty, total, 1.0)), float("-inf"))
            slot = (seg * HEADS + heads) * SPLITS + part
            tl.store(PartOut + slot[:, None] * D + d[None, :], out, mask=(g < GROUP)[:, None])
            tl.store(PartLse + slot, lse, mask=g < GROUP)

    @triton.jit
    def _decode_merge(PartOut, PartLse, Out, stride_out, HEADS: tl.constexpr, D: tl.constexpr,
                      SPLITS: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        seg = tl.program_id(0)
        head = tl.program_id(1)
        s = tl.arange(0, SPLITS)
        d = tl.arange(0, D)
        slot = (seg * HEADS + head) * SPLITS
        lse = tl.load(PartLse + slot + s)
        weight = tl.exp2(lse - tl.max(lse, axis=0))
        parts = tl.load(PartOut + (slot + s)[:, None] * D + d[None, :])
        out = tl.sum(weight[:, None] * parts, axis=0) / tl.sum(weight, axis=0)
        tl.store(Out + seg * stride_out + head * D + d, out.to(Out.dtype.element_ty))


def splits_for(segments: int, kv_heads: int) -> int:
    """How many parts each segment's range is split into: enough programs for the GPU's multiprocessors at small
    batches (a power of two, at most 16), one part (and no merge) from 16 segments of 8 KV heads up."""
    splits = 1
    while splits < 16 and segments * kv_heads * splits < 128:
        splits *= 2
    return splits


def decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, key_scales: torch.Tensor | None,
                     value_scales: torch.Tensor | None, starts: torch.Tensor, lengths: torch.Tensor,
                     scale: float, splits: int | None = None) -> torch.Tensor:
    """q [n, heads, D] (one query per segment), a layer's arena keys/values [tokens, kv_heads, D] (int8 with
    scales [tokens, kv_heads, 1] where given), each segment's first row and length [n]: the attention [n, heads, D]
    over rows start .. start + length - 1, each range in `splits` parts (a power of two; splits_for's by default)."""
    n, heads, head_dim = q.shape
    kv_heads = keys.shape[1]
    group = heads // kv_heads
    splits = splits or splits_for(n, kv_heads)
    out = torch.empty_like(q)
    quant = key_scales is not None
    if splits > 1:
        part_out = torch.empty((n * heads * splits, head_dim), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((n * heads * splits,), dtype=torch.float32, device=q.device)
    else:
        part_out = part_lse = out
    common.launch(
        _decode_part, (n, kv_heads, splits), q, keys, values, key_scales if quant else keys,
        value_scales if quant else values, starts, lengths, out, part_out, part_lse, scale * 1.4426950408889634,
        q.stride(0), keys.stride(0), key_scales.stride(0) if quant else 0, out.stride(0), HEADS=heads,
        GROUP=group, BLOCK_G=max(16, triton.next_power_of_2(group)), D=head_dim, BLOCK_N=64, SPLITS=splits,
        QUANT=quant, num_warps=4)
    if splits > 1:
        common.launch(_decode_merge, (n, heads), part_out, part_lse, out, out.stride(0), HEADS=heads, D=head_dim,
                      SPLITS=splits)
    return out
