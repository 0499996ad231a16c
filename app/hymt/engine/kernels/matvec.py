"""`matvec`: a 16-bit linear layer at one row (one user decoding), where it beats cuBLAS for the layer's shape on
this GPU (timed at start-up inside a CUDA graph, as decoding runs it: `tune_matvec`). cuBLAS splits the narrow
layers and reduces in a second kernel. For the MLP's down projection the kernel can take the gate/up output as it
comes from its matmul and apply SiLU(gate) * up while it reads it (`gated`): one kernel fewer per layer.

The same kernel reads e4m3 weights with one float32 scale per row (`scale`, the fp8 tiers), applied once to each
row's sum; the input stays in 16 bits, where the fp8 tiers' matmul quantizes it (`tune_fp8_matvec` times it against
that matmul).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

import torch

from . import common
from .common import AVAILABLE

log = logging.getLogger("hymt.kernels")

T = TypeVar("T")

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _row_input(X, K, cols, hi, GATED: tl.constexpr):
        """The input row's values at `cols` in float32; gated: SiLU(gate) * up, each rounded to the input's dtype
        as torch's F.silu(gate) * up is."""
        inside = cols < hi
        if GATED:
            up = tl.load(X + K + cols, mask=inside, other=0.0)
            gate = tl.load(X + cols, mask=inside, other=0.0).to(tl.float32)
            return ((gate * tl.sigmoid(gate)).to(up.dtype) * up).to(tl.float32)
        else:
            return tl.load(X + cols, mask=inside, other=0.0).to(tl.float32)

    @triton.jit
    def _matvec(
        X,
        W,
        Scale,
        Y,
        Parts,
        N,
        K,
        stride_w,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        SPLITS: tl.constexpr,
        GATED: tl.constexpr,
        SCALED: tl.constexpr,
        PDL: tl.constexpr,
    ):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        inside = rows < N
        chunk = tl.cdiv(tl.cdiv(K, SPLITS), BLOCK_K) * BLOCK_K
        lo = tl.program_id(1) * chunk
        hi = tl.minimum(lo + chunk, K)
        weights = W + rows[:, None].to(tl.int64) * stride_w
        # The first tile of weights is read before the wait: no kernel writes weights, so under PDL this read
        # overlaps the end of the kernel before.
        w = tl.load(weights + (lo + cols)[None, :], mask=inside[:, None] & ((lo + cols) < hi)[None, :], other=0.0)
        wait_for_inputs(PDL)
        acc = w.to(tl.float32) * _row_input(X, K, lo + cols, hi, GATED)[None, :]
        for first in range(lo + BLOCK_K, hi, BLOCK_K):
            w = tl.load(
                weights + (first + cols)[None, :], mask=inside[:, None] & ((first + cols) < hi)[None, :], other=0.0
            )
            acc += w.to(tl.float32) * _row_input(X, K, first + cols, hi, GATED)[None, :]
        total = tl.sum(acc, axis=1)
        if SCALED:  # e4m3 weights: the row's scale, once on its sum (or on each part's, which add up the same)
            total *= tl.load(Scale + rows, mask=inside, other=0.0)
        if SPLITS == 1:
            tl.store(Y + rows, total.to(Y.dtype.element_ty), mask=inside)
        else:  # each part of K its own row of partial sums, added up by _sum_parts
            tl.store(Parts + tl.program_id(1) * N + rows, total, mask=inside)

    @triton.jit
    def _sum_parts(Parts, Y, N, SPLITS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < N
        total = tl.zeros([BLOCK], tl.float32)
        for part in tl.static_range(SPLITS):
            total += tl.load(Parts + part * N + cols, mask=inside, other=0.0)
        tl.store(Y + cols, total.to(Y.dtype.element_ty), mask=inside)


def matvec(
    x: torch.Tensor,
    weight: torch.Tensor,
    block_n: int = 8,
    block_k: int = 512,
    num_warps: int = 4,
    num_stages: int = 3,
    splits: int = 1,
    gated: bool = False,
    scale: torch.Tensor | None = None,
) -> torch.Tensor:
    """x [1, K] @ weight [N, K].T in 16 bits (gated: x [1, 2K], gate then up, and SiLU(gate) * up @ weight.T): one
    row, each program a few of the weight's rows read once, over all of K, or over one of `splits` parts of it
    (then a second kernel adds the parts: for narrow layers, whose rows alone give too few programs). With `scale`
    [N] (float32), the weight is e4m3 and row r of it stands for weight[r] * scale[r]."""
    n, k = weight.shape
    if x.shape[-1] != (2 * k if gated else k):
        raise ValueError(f"matvec: an input of {x.shape[-1]} for a weight of {k} columns (gated: {gated})")
    if (scale is not None) != (weight.dtype == torch.float8_e4m3fn) or (
        scale is not None and (scale.shape != (n,) or scale.dtype != torch.float32)
    ):
        raise ValueError(
            f"matvec: an e4m3 weight takes a float32 scale per row, and no other weight a scale; here a {weight.dtype} "
            f"weight of {n} rows and {'no scale' if scale is None else f'a {scale.dtype} scale {tuple(scale.shape)}'}"
        )
    out = torch.empty((1, n), dtype=x.dtype, device=x.device)
    parts = torch.empty((splits, n), dtype=torch.float32, device=x.device) if splits > 1 else out
    common.launch(
        _matvec,
        (triton.cdiv(n, block_n), splits),
        x,
        weight,
        weight if scale is None else scale,  # read only when SCALED
        out,
        parts,
        n,
        k,
        weight.stride(0),
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        SPLITS=splits,
        GATED=gated,
        SCALED=scale is not None,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    if splits > 1:
        common.launch(_sum_parts, (triton.cdiv(n, 1024),), parts, out, n, SPLITS=splits, BLOCK=1024)
    return out


# (block_n, block_k, num_warps, num_stages, splits) tried for each weight shape at start-up (tune_matvec).
MATVEC_CONFIGS = (
    (2, 1024, 4, 3, 1),
    (4, 512, 4, 3, 1),
    (4, 1024, 8, 3, 1),
    (8, 256, 4, 4, 1),
    (8, 512, 4, 3, 1),
    (8, 1024, 8, 3, 1),
    (16, 256, 8, 3, 1),
    (16, 512, 8, 3, 1),
    (8, 512, 4, 3, 2),
    (8, 512, 4, 3, 4),
    (16, 512, 8, 3, 4),
    (4, 512, 4, 3, 8),
)


def by_shape(layers: Iterable[T], weight_of: Callable[[T], torch.Tensor]) -> dict[tuple[int, ...], list[T]]:
    """The layers grouped by their weight's shape (`weight_of` finds it in a layer), in order: what the start-up
    timings time each shape over."""
    groups: dict[tuple[int, ...], list[T]] = {}
    for layer in layers:
        groups.setdefault(tuple(weight_of(layer).shape), []).append(layer)
    return groups


# `call` takes a weight (or a weight and its scale); `...` since mypy cannot match the callers' lambdas (their loop
# variables bound as defaults) to Callable[[torch.Tensor], object].
def graph_time(group: Sequence[object], call: Callable[..., object]) -> float:
    """us a call, timed as the decoding step runs it: the calls over all of `group`'s weights (the model's layers,
    so the cache holds none of them) captured in a CUDA graph and replayed, so that the host's launches (slower for
    Triton's than for cuBLAS's) are not what is measured."""
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


@torch.inference_mode()
def tune_matvec(
    weights: list[torch.Tensor],
    gated: frozenset[tuple[int, ...]] = frozenset(),
    activation: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    keep_all: bool = False,
) -> dict[tuple[int, ...], tuple[dict, float, float]]:
    """Per weight shape: the fastest matvec configuration on this GPU where it beats cuBLAS at one row, with both
    times (us a call). A shape in `gated` is a down projection: the gated matvec against `activation(gate, up)`
    (the model's SiLU kernel) and cuBLAS, its configuration marked `gated`. Shapes where cuBLAS is as fast are
    left out (kept with `keep_all`, for bench/matvec.py). No margin for cuBLAS: in the step the matvec's first
    weight tile is read while the kernel before finishes (PDL), which cuBLAS's kernels do not do, so a near tie
    is a gain there (gate/up at 54.7 us against cuBLAS's 56.2: the bf16 step 0.13 ms shorter)."""
    chosen = {}
    for shape, group in by_shape(weights, lambda weight: weight).items():
        is_gated = shape in gated and activation is not None
        x = torch.randn(1, shape[1] * (2 if is_gated else 1), dtype=group[0].dtype, device=group[0].device)
        options = [
            dict(
                zip(("block_n", "block_k", "num_warps", "num_stages", "splits"), c),
                **({"gated": True} if is_gated else {}),
            )
            for c in MATVEC_CONFIGS
        ]
        try:
            if is_gated and activation is not None:
                cublas = graph_time(group, lambda w, x=x: torch.nn.functional.linear(activation(*x.chunk(2, -1)), w))
            else:
                cublas = graph_time(group, lambda w, x=x: torch.nn.functional.linear(x, w))
            times = [graph_time(group, lambda w, o=o, x=x: matvec(x, w, **o)) for o in options]
        except torch.OutOfMemoryError:
            raise
        except Exception:  # the matvec is a speed-up: cuBLAS serves where it cannot be timed
            log.exception("timing the one-row matvec for %s failed; cuBLAS serves it", shape)
            continue
        fastest = min(range(len(options)), key=times.__getitem__)
        if keep_all or times[fastest] < cublas:
            chosen[shape] = (options[fastest], round(times[fastest], 2), round(cublas, 2))
    return chosen


@torch.inference_mode()
def tune_fp8_matvec(
    layers: list[tuple[torch.Tensor, torch.Tensor]],
    matmul: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    dtype: torch.dtype,
) -> dict[tuple[int, ...], tuple[dict, float, float]]:
    """Per shape of e4m3 weight (each with its float32 scale per row): the fastest matvec configuration on this GPU
    where it beats `matmul(x, weight, scale)` (the fp8 tiers' own: the input quantized, then torch._scaled_mm) at
    one row of `dtype`, with both times (us a call), as tune_matvec does for 16-bit weights."""
    chosen = {}
    for shape, group in by_shape(layers, lambda layer: layer[0]).items():
        x = torch.randn(1, shape[1], dtype=dtype, device=group[0][0].device)
        options = [dict(zip(("block_n", "block_k", "num_warps", "num_stages", "splits"), c)) for c in MATVEC_CONFIGS]
        try:
            scaled_mm = graph_time(group, lambda layer, x=x: matmul(x, *layer))
            times = [
                graph_time(group, lambda layer, o=o, x=x: matvec(x, layer[0], scale=layer[1], **o)) for o in options
            ]
        except torch.OutOfMemoryError:
            raise
        except Exception:  # the matvec is a speed-up: the matmul serves where it cannot be timed
            log.exception("timing the one-row fp8 matvec for %s failed; torch._scaled_mm serves it", shape)
            continue
        fastest = min(range(len(options)), key=times.__getitem__)
        if times[fastest] < scaled_mm:
            chosen[shape] = (options[fastest], round(times[fastest], 2), round(scaled_mm, 2))
    return chosen
