"""`quantize_rows`: the fp8 tiers' activations, each row (token) quantized to e4m3 with its own float32 scale for
torch._scaled_mm, in one kernel where torch's arithmetic takes about nine (abs, amax, casts, divide, clamp) before
each FP8 matmul. The arithmetic is engine/fp8.py's `quantize_rows`: scale = max(amax, MIN_AMAX) / 448, the row
divided by it (rounded as IEEE division is), clamped to +-448 and rounded to the nearest e4m3.
"""

from __future__ import annotations

import torch

from . import common
from .common import AVAILABLE

E4M3_MAX = 448.0
MIN_AMAX = 1e-12  # a row of zeros keeps a finite scale (and quantizes to zeros)

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _quantize_rows(
        X, Q, Scale, K, stride_x, MAX: tl.constexpr, FLOOR: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr
    ):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        wait_for_inputs(PDL)  # the input is the kernel before's output
        amax = tl.zeros([BLOCK], tl.float32)
        for first in range(0, K, BLOCK):
            x = tl.load(X + row * stride_x + first + cols, mask=first + cols < K, other=0.0).to(tl.float32)
            amax = tl.maximum(amax, tl.abs(x))
        scale = tl.maximum(tl.max(amax, axis=0), FLOOR) / MAX
        for first in range(0, K, BLOCK):  # the row again, from the cache
            inside = first + cols < K
            x = tl.load(X + row * stride_x + first + cols, mask=inside, other=0.0).to(tl.float32)
            q = tl.clamp(tl.math.div_rn(x, scale), -MAX, MAX)
            tl.store(Q + row * K + first + cols, q.to(Q.dtype.element_ty), mask=inside)
        tl.store(Scale + row, scale)


def quantize_rows(x: torch.Tensor, block: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] (16 or 32 bits, rows may be strided): its e4m3 values [M, K] and float32 scales [M, 1], as
    torch._scaled_mm takes them."""
    m, k = x.shape
    if x.stride(1) != 1:
        raise ValueError("quantize_rows: each row's values must be contiguous")
    q = torch.empty((m, k), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    common.launch(
        _quantize_rows,
        (m,),
        x,
        q,
        scale,
        k,
        x.stride(0),
        MAX=E4M3_MAX,
        FLOOR=MIN_AMAX,
        BLOCK=min(block, triton.next_power_of_2(k)),
    )
    return q, scale
