"""Two ways the Mixture of Experts' 4-bit matvec by slot (kernels/moe.py, `_expert_gemv`) might spend fewer
instructions a weight, timed beside it by bench/moe_kernels.py before either goes into the engine.

The engine's kernel makes each 4-bit value a float32 (a conversion), dequantizes it, rounds the weight to the
input's dtype and back (two more: so that it equals the grouped matmul's weights) and adds weight x input into a
per-lane sum. Conversions run at a quarter of the rate of a multiply-add on Hopper, and at about 4 weights a clock
an SM (41.5 us a layer at one row on an H100) the kernel is far from the memory's rate. Variants:
- `float32`: the dequantized weight kept in float32 (no rounding to the input's dtype and back), one conversion a
  weight;
- `words`: the bytes read as int32 words, each 4-bit value made a float32 by setting it into the mantissa of 2^23
  and subtracting 2^23 (integer operations and one subtraction at full rate), the weight in float32, summed per lane
  and reduced once at the end (the variant timed 2026-12-07, d633d3c, reduced every half tile and was a third
  slower).
Both differ from the grouped matmul's rounding by a unit of the input's dtype at most per weight; their outputs are
recorded against the engine's as the largest difference over the largest value.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from hymt.engine.kernels import common
from hymt.engine.kernels.common import wait_for_inputs
from hymt.engine.kernels.matvec import _row_input
from hymt.engine.kernels.moe import Int4Weights, _check_tile, _two_passes

VARIANTS = ("float32", "words")


@triton.jit
def _gemv_variant(
    A,
    W,
    Scales,
    Minimums,
    C,
    RouteWeights,
    N,
    K,
    stride_a,
    stride_we,
    stride_wn,
    stride_se,
    stride_sn,
    stride_c,
    Index,
    ROWS_PER_INPUT: tl.constexpr,
    GATED: tl.constexpr,
    WEIGHTED: tl.constexpr,
    INT4: tl.constexpr,
    GROUP: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    WORDS: tl.constexpr,
    PDL: tl.constexpr,
):
    """_expert_gemv's product (4-bit weights only), the weight kept in float32; WORDS: W is the packed bytes as
    int32 words and BLOCK_K bytes a tile are read as BLOCK_K / 4 words."""
    wait_for_inputs(PDL)
    slot = tl.program_id(0)
    expert = tl.load(Index + slot).to(tl.int64)
    inputs = A + (slot // ROWS_PER_INPUT).to(tl.int64) * stride_a
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = n < N
    weights = W + expert * stride_we + n[:, None].to(tl.int64) * stride_wn
    scales = Scales + expert * stride_se + n.to(tl.int64) * stride_sn
    minimums = Minimums + expert * stride_se + n.to(tl.int64) * stride_sn
    half = K // 2
    if WORDS:
        j = tl.arange(0, BLOCK_K // 4)
        acc = tl.zeros([BLOCK_N, BLOCK_K // 4], tl.float32)
        for first in range(0, half // 4, BLOCK_K // 4):
            words = tl.load(weights + (first + j)[None, :], mask=rows[:, None], other=0)
            for high in tl.static_range(2):
                group = (high * half + 4 * first) // GROUP
                scale = tl.load(scales + group, mask=rows, other=0.0).to(tl.float32)[:, None]
                minimum = tl.load(minimums + group, mask=rows, other=0.0).to(tl.float32)[:, None]
                for b in tl.static_range(4):
                    q = ((words >> (8 * b + 4 * high)) & 15) | 0x4B000000
                    w = (q.to(tl.float32, bitcast=True) - 8388608.0) * scale + minimum
                    acc += w * _row_input(inputs, K, high * half + 4 * (first + j) + b, K, GATED)[None, :]
    else:
        k = tl.arange(0, BLOCK_K)
        acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
        for first in range(0, half, BLOCK_K):
            packed = tl.load(weights + (first + k)[None, :], mask=rows[:, None], other=0)
            for high in tl.static_range(2):
                group = (high * half + first) // GROUP
                scale = tl.load(scales + group, mask=rows, other=0.0).to(tl.float32)[:, None]
                minimum = tl.load(minimums + group, mask=rows, other=0.0).to(tl.float32)[:, None]
                q = (packed >> (4 * high)) & 15
                acc += (q.to(tl.float32) * scale + minimum) * _row_input(inputs, K, high * half + first + k, K, GATED)[
                    None, :
                ]
    total = tl.sum(acc, axis=1)
    if WEIGHTED:
        total = total.to(A.dtype.element_ty).to(tl.float32) * tl.load(RouteWeights + slot)
    tl.store(C + slot.to(tl.int64) * stride_c + n, total.to(C.dtype.element_ty), mask=rows)


def experts_by_slot_variant(
    x: torch.Tensor,
    gate_up: Int4Weights,
    down: Int4Weights,
    index: torch.Tensor,
    weights: torch.Tensor,
    variant: str,
    block_n: int = 32,
    block_k: int = 64,
    num_warps: int = 4,
) -> torch.Tensor:
    """kernels.experts_by_slot with 4-bit experts through one of VARIANTS."""
    experts = index.reshape(-1).contiguous()
    _check_tile(gate_up, block_k)
    words = variant == "words"

    def launch(operands: list, meta: dict, n: int) -> None:
        if words:  # the packed bytes as int32 words, four a load
            matrix = operands[1].view(torch.int32)
            operands = [*operands[:1], matrix, *operands[2:9], matrix.stride(0), matrix.stride(1), *operands[11:]]
        common.launch(
            _gemv_variant,
            (experts.shape[0], triton.cdiv(n, block_n)),
            *operands,
            experts,
            **meta,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            WORDS=words,
            num_warps=num_warps,
            num_stages=3,
        )

    return _two_passes(x, gate_up, down, weights, launch)
