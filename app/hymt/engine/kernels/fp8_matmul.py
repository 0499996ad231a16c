"""`fp8_matmul`: the fp8 tiers' matmul for a decoding step's rows (2 to 64), where torch._scaled_mm is slow.

torch._scaled_mm with row-wise scales took 6.4-6.6 ms a 7B step's linear layers at 16 to 128 rows on an H200
(bench/results/kernels.json), against 3.8-4.4 for bf16 with twice the bytes: its tiles are made for large matmuls.
At a few rows the matmul is a read of the weights, once: here every program holds all of the step's rows (one
block of up to 64) against BLOCK_N rows of the weight, so each weight byte is read once; K may be cut into
`splits` parts (a second kernel adds them), which bench/fp8_matmul.py tries and the engine does not take. The
weight tile is the dot's first operand and the rows its second (W @ Q.T), so that the GPU's large matrix
instructions (64 rows of the first operand on Hopper) take the weight and a handful of rows is the narrow side.
On an H100 a 7B step's four linear layers came to 3.5-3.9 ms at 2 to 64 rows against torch._scaled_mm's 4.7-4.8
(1.6-2.5 TB/s of the weights), and the fp8 decoding step at 16 and 64 rows to 5.10 and 5.88 ms from 6.25 and 6.54
(bench/history/checks-20261207T1710Z); from 128 rows torch._scaled_mm is as fast or faster.

The arithmetic is torch._scaled_mm's as the fp8 tiers call it: the input quantized per row to e4m3 (quantize_rows),
e4m3 products summed in float32, then times the weight row's and the row's scales, rounded to the output's dtype.
Hopper's fp8 matrix instructions add in less than float32 precision unless told otherwise; the sums are carried
into float32 every 128 products (`max_num_imprecise_acc`), as torch._scaled_mm's do unless asked for fast
accumulation (without this, the down projection's 14,336 products a sum came 0.01 of the output's largest value
from torch._scaled_mm, the others 0.005; the timings above are without it, this is not yet timed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from . import common
from .common import AVAILABLE
from .matvec import by_shape, graph_time
from .quantize import quantize_rows

log = logging.getLogger("hymt.kernels")

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _fp8_matmul(
        Q,
        RowScale,
        W,
        Scale,
        Y,
        Parts,
        M,
        N,
        K,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        SPLITS: tl.constexpr,
        PDL: tl.constexpr,
    ):
        n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
        k = tl.arange(0, BLOCK_K)
        chunk = K // SPLITS  # a multiple of BLOCK_K (fp8_matmul checks)
        lo = tl.program_id(2) * chunk
        weights = W + n[:, None].to(tl.int64) * K + (lo + k)[None, :]
        inputs = Q + m[None, :].to(tl.int64) * K + (lo + k)[:, None]
        rows, cols = m < M, n < N
        # The first weight tile before the wait: no kernel writes weights, so under PDL this read overlaps the end
        # of the kernel before (the input's quantization).
        w = tl.load(weights, mask=cols[:, None], other=0.0)
        wait_for_inputs(PDL)
        acc = tl.dot(w, tl.load(inputs, mask=rows[None, :], other=0.0), max_num_imprecise_acc=128)
        for first in range(BLOCK_K, chunk, BLOCK_K):
            w = tl.load(weights + first, mask=cols[:, None], other=0.0)
            acc = tl.dot(w, tl.load(inputs + first, mask=rows[None, :], other=0.0), acc, max_num_imprecise_acc=128)
        if SPLITS == 1:
            row_scale = tl.load(RowScale + m, mask=rows, other=0.0)
            scale = tl.load(Scale + n, mask=cols, other=0.0)
            out = acc * scale[:, None] * row_scale[None, :]
            tl.store(
                Y + m[None, :].to(tl.int64) * N + n[:, None],
                out.to(Y.dtype.element_ty),
                mask=cols[:, None] & rows[None, :],
            )
        else:  # each part of K its own [M, N] of float32 sums, added up and scaled by _scaled_sum
            part = Parts + tl.program_id(2).to(tl.int64) * M * N
            tl.store(part + m[None, :].to(tl.int64) * N + n[:, None], acc, mask=cols[:, None] & rows[None, :])

    @triton.jit
    def _scaled_sum(Parts, RowScale, Scale, Y, M, N, SPLITS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        row = tl.program_id(1)
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < N
        total = tl.zeros([BLOCK], tl.float32)
        for part in tl.static_range(SPLITS):
            total += tl.load(Parts + (part * M + row).to(tl.int64) * N + cols, mask=inside, other=0.0)
        out = total * tl.load(Scale + cols, mask=inside, other=0.0) * tl.load(RowScale + row)
        tl.store(Y + row.to(tl.int64) * N + cols, out.to(Y.dtype.element_ty), mask=inside)


def fp8_matmul(
    q: torch.Tensor,
    row_scale: torch.Tensor,
    weight: torch.Tensor,
    scale: torch.Tensor,
    out_dtype: torch.dtype,
    block_n: int = 64,
    block_k: int = 128,
    splits: int = 1,
    num_warps: int = 4,
    num_stages: int = 4,
) -> torch.Tensor:
    """q [M, K] e4m3 with row_scale [M, 1] float32 (quantize_rows) @ (weight [N, K] e4m3 * scale [N, 1 or none]).T
    in out_dtype, as torch._scaled_mm(q, weight.t(), row_scale, scale[None, :]). Rows in blocks of up to 128 (the
    next power of two of M, at least 16: the engine's up to MAX_ROWS take one); K in `splits` parts of whole tiles
    of block_k."""
    m, k = q.shape
    n = weight.shape[0]
    if weight.shape[1] != k or q.dtype != torch.float8_e4m3fn or weight.dtype != torch.float8_e4m3fn:
        raise ValueError(
            f"fp8_matmul: e4m3 [M, K] by e4m3 [N, K], not {q.dtype} {tuple(q.shape)} by {weight.dtype} "
            f"{tuple(weight.shape)}"
        )
    if k % (splits * block_k):
        raise ValueError(f"fp8_matmul: K {k} is not {splits} parts of whole tiles of {block_k}")
    block_m = min(128, max(16, triton.next_power_of_2(m)))
    out = torch.empty((m, n), dtype=out_dtype, device=q.device)
    parts = torch.empty((splits, m, n), dtype=torch.float32, device=q.device) if splits > 1 else out
    common.launch(
        _fp8_matmul,
        (triton.cdiv(n, block_n), triton.cdiv(m, block_m), splits),
        q,
        row_scale,
        weight,
        scale,
        out,
        parts,
        m,
        n,
        k,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        SPLITS=splits,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if splits > 1:
        common.launch(
            _scaled_sum, (triton.cdiv(n, 1024), m), parts, row_scale, scale, out, m, n, SPLITS=splits, BLOCK=1024
        )
    return out


# The most rows the kernel serves: one block of rows, so that each weight byte is read once; a prefill step's
# larger matmuls are torch._scaled_mm's.
MAX_ROWS = 64


def tiling(k: int) -> dict | None:
    """The kernel's tiles for a weight of `k` columns: 64 weight rows a program, K whole in tiles of 256 (on an
    H100, the fastest of 28 tilings for every 7B shape from 2 to 64 rows, or within 6 %: bench/fp8_matmul.py), or
    of 128 where 256 do not divide K; None where neither does."""
    block_k = next((size for size in (256, 128) if k % size == 0), None)
    return {"block_n": 64, "block_k": block_k, "splits": 1} if block_k else None


@torch.inference_mode()
def tune_fp8_rows(
    layers: list[tuple[torch.Tensor, torch.Tensor]],
    matmul: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    dtype: torch.dtype,
) -> dict[tuple[int, ...], tuple[dict, int]]:
    """Per shape of e4m3 weight (each with its float32 scale per row): the kernel's tiling and the most rows it
    serves: 16 where it beat `matmul(x, weight, scale)` (the fp8 tiers' own: the input quantized, then
    torch._scaled_mm) at 16 rows on this GPU, MAX_ROWS where at that many too, timed as the decoding step runs them;
    shapes where it lost at 16 are left out."""
    chosen: dict[tuple[int, ...], tuple[dict, int]] = {}
    for (n, k), group in by_shape(layers, lambda layer: layer[0]).items():
        device = group[0][0].device
        options = tiling(k)
        if options is None:
            continue
        limit = 0
        try:
            for rows in (16, MAX_ROWS):
                x = torch.randn(rows, k, dtype=dtype, device=device)

                def ours(layer, x=x, options=options):
                    q, row_scale = quantize_rows(x)
                    return fp8_matmul(q, row_scale, layer[0], layer[1], x.dtype, **options)

                if graph_time(group, ours) >= graph_time(group, lambda layer, x=x: matmul(x, *layer)):
                    break
                limit = rows
        except torch.OutOfMemoryError:
            raise
        except Exception:  # a speed-up: torch._scaled_mm serves where the kernel cannot be timed
            log.exception("timing the fp8 matmul for a few rows of %s failed; torch._scaled_mm serves it", (n, k))
            continue
        if limit:
            chosen[(n, k)] = (options, limit)
    return chosen
