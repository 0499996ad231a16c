"""Triton kernels for the GPU's forward pass, where torch's own kernels spend the decoding step in small launches.

- `rope_norm_store`: per layer, the rotary embedding and the per-head RMSNorm of q and k, and the keys and values
  written into the KV arena at their rows (quantized to int8 with their per token and head scale on the INT8
  tier), in one kernel. In torch that is two compiled kernels and two index copies (six more kernels for INT8).
- `add_rms_norm`: the residual sum and the next RMSNorm in one pass over the row (torch.compile's kernel for it,
  compiled for any number of rows, took 2.7 us a call on the H200, 63 calls a step).
- `matvec`: a 16-bit linear layer at one row (one user decoding), where it beats cuBLAS for the layer's shape on
  this GPU (timed at start-up, `tune_matvec`): cuBLAS splits the narrow layers and reduces in a second kernel.
- `decode_attention`: one query per segment against its range of the arena, the query heads that share a KV head
  in one program; an INT8 arena is read as stored, its scales folded into the scores and the probabilities, so it
  is never dequantized first (which, a whole layer per step, cost the 8 GB tier a third of its decoding step). At
  small batches each range is split across programs and the parts merged by their log-sum-exp, so one segment
  still fills the GPU.

Both are captured in the decoding step's CUDA graphs like any other kernel. The CPU keeps torch's path (with
transformers' exact arithmetic), so these run only where Triton and a CUDA device are present.
"""

from __future__ import annotations

import importlib.util
import logging

import torch

log = logging.getLogger("hymt.kernels")

AVAILABLE = importlib.util.find_spec("triton") is not None

if AVAILABLE:
    import triton
    import triton.language as tl

    @triton.jit
    def _rope_norm_store(Q, K, V, Cos, Sin, Positions, Rows, QWeight, KWeight, QOut, Keys, Values, KScales, VScales,
                         eps, stride_q, stride_k, stride_v, stride_cos, stride_out, stride_kv, stride_scale,
                         HEADS: tl.constexpr, D: tl.constexpr, QUANT: tl.constexpr):
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
                      N: tl.constexpr, BLOCK: tl.constexpr):
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

    @triton.jit
    def _matvec(X, W, Y, Parts, N, K, stride_w, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                SPLITS: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        inside = rows < N
        chunk = tl.cdiv(tl.cdiv(K, SPLITS), BLOCK_K) * BLOCK_K
        lo = tl.program_id(1) * chunk
        hi = tl.minimum(lo + chunk, K)
        acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
        for first in range(lo, hi, BLOCK_K):
            w = tl.load(W + rows[:, None].to(tl.int64) * stride_w + (first + cols)[None, :],
                        mask=inside[:, None] & ((first + cols) < hi)[None, :], other=0.0)
            x = tl.load(X + first + cols, mask=(first + cols) < hi, other=0.0)
            acc += w.to(tl.float32) * x.to(tl.float32)[None, :]
        if SPLITS == 1:
            tl.store(Y + rows, tl.sum(acc, axis=1).to(Y.dtype.element_ty), mask=inside)
        else:  # each part of K its own row of partial sums, added up by _sum_parts
            tl.store(Parts + tl.program_id(1) * N + rows, tl.sum(acc, axis=1), mask=inside)

    @triton.jit
    def _sum_parts(Parts, Y, N, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < N
        total = tl.zeros([BLOCK], tl.float32)
        for part in tl.static_range(SPLITS):
            total += tl.load(Parts + part * N + cols, mask=inside, other=0.0)
        tl.store(Y + cols, total.to(Y.dtype.element_ty), mask=inside)

    @triton.jit
    def _decode_part(Q, Keys, Values, KScales, VScales, Starts, Lengths, Out, PartOut, PartLse, scale_log2,
                     stride_q, stride_kv, stride_scale, stride_out,
                     HEADS: tl.constexpr, GROUP: tl.constexpr, BLOCK_G: tl.constexpr, D: tl.constexpr,
                     BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, QUANT: tl.constexpr):
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
                      SPLITS: tl.constexpr):
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
    _rope_norm_store[(tokens, heads + kv_heads)](
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
    _add_rms_norm[(hidden.shape[0],)](hidden, delta, weight, normed, eps, hidden.stride(0), delta.stride(0),
                                      normed.stride(0), N=size, BLOCK=triton.next_power_of_2(size),
                                      num_warps=max(1, min(16, triton.next_power_of_2(size) // 512)))
    return hidden, normed


def matvec(x: torch.Tensor, weight: torch.Tensor, block_n: int = 8, block_k: int = 512, num_warps: int = 4,
           num_stages: int = 3, splits: int = 1) -> torch.Tensor:
    """x [1, K] @ weight [N, K].T in 16 bits: one row, each program a few of the weight's rows read once, over all
    of K, or over one of `splits` parts of it (then a second kernel adds the parts: for narrow layers, whose rows
    alone give too few programs)."""
    n, k = weight.shape
    out = torch.empty((1, n), dtype=x.dtype, device=x.device)
    parts = torch.empty((splits, n), dtype=torch.float32, device=x.device) if splits > 1 else out
    _matvec[(triton.cdiv(n, block_n), splits)](x, weight, out, parts, n, k, weight.stride(0), BLOCK_N=block_n,
                                                BLOCK_K=block_k, SPLITS=splits, num_warps=num_warps,
                                                num_stages=num_stages)
    if splits > 1:
        _sum_parts[(triton.cdiv(n, 1024),)](parts, out, n, SPLITS=splits, BLOCK=1024)
    return out


# (block_n, block_k, num_warps, num_stages, splits) tried for each weight shape at start-up (tune_matvec).
MATVEC_CONFIGS = ((2, 1024, 4, 3, 1), (4, 512, 4, 3, 1), (4, 1024, 8, 3, 1), (8, 256, 4, 4, 1), (8, 512, 4, 3, 1),
                  (8, 1024, 8, 3, 1), (16, 256, 8, 3, 1), (16, 512, 8, 3, 1), (8, 512, 4, 3, 2), (8, 512, 4, 3, 4),
                  (16, 512, 8, 3, 4), (4, 512, 4, 3, 8))


@torch.inference_mode()
def tune_matvec(weights: list[torch.Tensor], keep_all: bool = False,
                ) -> dict[tuple[int, int], tuple[dict, float, float]]:
    """Per weight shape: the fastest matvec configuration on this GPU, timed over all the weights of that shape (the
    model's layers, so the cache holds none of them), where it beats cuBLAS at one row; with both times (us a
    call). Shapes where cuBLAS is as fast are left out (kept with `keep_all`, for bench/matvec.py)."""
    by_shape: dict[tuple[int, int], list[torch.Tensor]] = {}
    for weight in weights:
        by_shape.setdefault(tuple(weight.shape), []).append(weight)
    chosen = {}
    for shape, group in by_shape.items():
        x = torch.randn(1, shape[1], dtype=group[0].dtype, device=group[0].device)

        def timed(call) -> float:
            """us a call, timed as the decoding step runs it: the calls captured in a CUDA graph and replayed, so
            that the host's launches (slower for Triton's than for cuBLAS's) are not what is measured."""
            for weight in group:  # compiles, and warms the clocks
                call(weight)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for weight in group:
                    call(weight)
            graph.replay()
            best = float("inf")
            for _ in range(3):
                begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                begin.record()
                graph.replay()
                end.record()
                end.synchronize()
                best = min(best, begin.elapsed_time(end) * 1000 / len(group))
            del graph
            return best

        options = [dict(zip(("block_n", "block_k", "num_warps", "num_stages", "splits"), c)) for c in MATVEC_CONFIGS]
        try:
            cublas = timed(lambda w: torch.nn.functional.linear(x, w))
            times = [timed(lambda w, o=o: matvec(x, w, **o)) for o in options]
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - the matvec is a speed-up: cuBLAS serves where it cannot be timed
            log.exception("timing the one-row matvec for %s failed; cuBLAS serves it", shape)
            continue
        fastest = min(range(len(options)), key=times.__getitem__)
        if keep_all or times[fastest] < 0.97 * cublas:
            chosen[shape] = (options[fastest], round(times[fastest], 2), round(cublas, 2))
    return chosen


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
    _decode_part[(n, kv_heads, splits)](
        q, keys, values, key_scales if quant else keys, value_scales if quant else values, starts, lengths, out,
        part_out, part_lse, scale * 1.4426950408889634, q.stride(0), keys.stride(0),
        key_scales.stride(0) if quant else 0, out.stride(0), HEADS=heads, GROUP=group,
        BLOCK_G=max(16, triton.next_power_of_2(group)), D=head_dim, BLOCK_N=64, SPLITS=splits, QUANT=quant,
        num_warps=4)
    if splits > 1:
        _decode_merge[(n, heads)](part_out, part_lse, out, out.stride(0), HEADS=heads, D=head_dim, SPLITS=splits)
    return out
