"""`matvec`: a 16-bit linear layer at one row (one user decoding), where it beats cuBLAS for the layer's shape on
this GPU (timed at start-up inside a CUDA graph, as decoding runs it: `tune_matvec`). Two roles save a kernel each:
- `swiglu`: the MLP's fused gate/up projection gives SiLU(gate) * up itself (each program reads the same rows of
  both halves), where cuBLAS's output needs an element-wise kernel of its own before the down projection;
- `parts`: a layer whose output goes straight into the residual add and RMSNorm (o and down) leaves K's split parts
  in float32 for that kernel to add up, where cuBLAS's split-K needs a reduction kernel of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

from . import common
from .common import AVAILABLE

log = logging.getLogger("hymt.kernels")

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _matvec(X, W, Y, N, K, stride_w, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLITS: tl.constexpr,
                SWIGLU: tl.constexpr, PDL: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        inside = rows < N
        chunk = tl.cdiv(tl.cdiv(K, SPLITS), BLOCK_K) * BLOCK_K
        lo = tl.program_id(1) * chunk
        hi = tl.minimum(lo + chunk, K)
        weights = W + rows[:, None].to(tl.int64) * stride_w
        ups = weights + N.to(tl.int64) * stride_w  # swiglu: the up half's rows, N below the gate's
        # The first tile of weights is read before the wait: no kernel writes weights, so under PDL this read
        # overlaps the end of the kernel before.
        mask = inside[:, None] & ((lo + cols) < hi)[None, :]
        w = tl.load(weights + (lo + cols)[None, :], mask=mask, other=0.0)
        if SWIGLU:
            u = tl.load(ups + (lo + cols)[None, :], mask=mask, other=0.0)
        wait_for_inputs(PDL)
        x = tl.load(X + lo + cols, mask=(lo + cols) < hi, other=0.0).to(tl.float32)[None, :]
        acc = w.to(tl.float32) * x
        acc_up = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
        if SWIGLU:
            acc_up += u.to(tl.float32) * x
        for first in range(lo + BLOCK_K, hi, BLOCK_K):
            mask = inside[:, None] & ((first + cols) < hi)[None, :]
            x = tl.load(X + first + cols, mask=(first + cols) < hi, other=0.0).to(tl.float32)[None, :]
            acc += tl.load(weights + (first + cols)[None, :], mask=mask, other=0.0).to(tl.float32) * x
            if SWIGLU:
                acc_up += tl.load(ups + (first + cols)[None, :], mask=mask, other=0.0).to(tl.float32) * x
        if SWIGLU:  # rounded as torch's F.silu(gate) * up on the projection's 16-bit output
            gate = tl.sum(acc, axis=1).to(Y.dtype.element_ty).to(tl.float32)
            up = tl.sum(acc_up, axis=1).to(Y.dtype.element_ty).to(tl.float32)
            silu = (gate * tl.sigmoid(gate)).to(Y.dtype.element_ty).to(tl.float32)
            tl.store(Y + rows, (silu * up).to(Y.dtype.element_ty), mask=inside)
        elif SPLITS == 1:
            tl.store(Y + rows, tl.sum(acc, axis=1).to(Y.dtype.element_ty), mask=inside)
        else:  # each part of K its own float32 row of partial sums, for _sum_parts or the residual norm to add up
            tl.store(Y + tl.program_id(1) * N + rows, tl.sum(acc, axis=1), mask=inside)

    @triton.jit
    def _sum_parts(Parts, Y, N, SPLITS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = cols < N
        total = tl.zeros([BLOCK], tl.float32)
        for part in tl.static_range(SPLITS):
            total += tl.load(Parts + part * N + cols, mask=inside, other=0.0)
        tl.store(Y + cols, total.to(Y.dtype.element_ty), mask=inside)


def matvec(x: torch.Tensor, weight: torch.Tensor, block_n: int = 8, block_k: int = 512, num_warps: int = 4,
           num_stages: int = 3, splits: int = 1, role: str = "plain") -> torch.Tensor:
    """x [1, K] @ weight [N, K].T in 16 bits: one row, each program a few of the weight's rows read once, over all
    of K, or over one of `splits` parts of it (for narrow layers, whose rows alone give too few programs).
    role "plain": [1, N], the parts added by a second kernel; "parts": the parts themselves, float32 [splits, N],
    for kernels.add_rms_norm to add up; "swiglu": weight is gate and up stacked [2I, K], the result SiLU(gate) * up
    [1, I] (K whole)."""
    n, k = weight.shape
    if x.shape[-1] != k or role not in ROLES or (role == "swiglu" and (n % 2 or splits != 1)):
        raise ValueError(f"matvec: an input of {x.shape[-1]} for a weight of {n}x{k} as {role!r} in {splits} parts")
    if role == "swiglu":
        n //= 2
    if role == "parts" or splits > 1:
        out = torch.empty((splits, n), dtype=torch.float32, device=x.device)
    else:
        out = torch.empty((1, n), dtype=x.dtype, device=x.device)
    common.launch(_matvec, (triton.cdiv(n, block_n), splits), x, weight, out, n, k, weight.stride(0),
                  BLOCK_N=block_n, BLOCK_K=block_k, SPLITS=splits, SWIGLU=role == "swiglu", num_warps=num_warps,
                  num_stages=num_stages)
    if splits > 1 and role == "plain":
        parts, out = out, torch.empty((1, n), dtype=x.dtype, device=x.device)
        common.launch(_sum_parts, (triton.cdiv(n, 1024),), parts, out, n, SPLITS=splits, BLOCK=1024)
    return out


ROLES = ("plain", "parts", "swiglu")

# (block_n, block_k, num_warps, num_stages, splits) tried for each weight shape at start-up (tune_matvec).
MATVEC_CONFIGS = ((2, 1024, 4, 3, 1), (4, 512, 4, 3, 1), (4, 1024, 8, 3, 1), (8, 256, 4, 4, 1), (8, 512, 4, 3, 1),
                  (8, 1024, 8, 3, 1), (16, 256, 8, 3, 1), (16, 512, 8, 3, 1), (8, 512, 4, 3, 2), (8, 512, 4, 3, 4),
                  (16, 512, 8, 3, 4), (4, 512, 4, 3, 8))


def _graph_time(group: list[torch.Tensor], call: Callable[[torch.Tensor], object]) -> float:
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
def tune_matvec(weights: list[torch.Tensor], roles: dict[tuple[int, int], str] | None = None,
                activation: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                keep_all: bool = False) -> dict[tuple[int, int], tuple[dict, float, float]]:
    """Per weight shape: the fastest matvec configuration on this GPU (its `role` among its settings) where it
    beats cuBLAS at one row, with both times (us a call). `roles` names the shapes that are not plain: "swiglu",
    a fused gate/up projection, timed against cuBLAS followed by `activation(gate, up)` (the model's SiLU kernel);
    "parts", one whose output goes into the residual norm, its split configurations timed without the addition
    their parts then need no kernel for. Shapes where cuBLAS is as fast are left out (kept with `keep_all`, for
    bench/matvec.py); so is a configuration that cannot run on this GPU (its shared memory, say)."""
    by_shape: dict[tuple[int, int], list[torch.Tensor]] = {}
    for weight in weights:
        by_shape.setdefault(tuple(weight.shape), []).append(weight)
    chosen = {}
    for shape, group in by_shape.items():
        role = (roles or {}).get(shape, "plain")
        if role == "swiglu" and activation is None:
            role = "plain"
        x = torch.randn(1, shape[1], dtype=group[0].dtype, device=group[0].device)
        options = [dict(zip(("block_n", "block_k", "num_warps", "num_stages", "splits"), c), role=role)
                   for c in MATVEC_CONFIGS if role != "swiglu" or c[4] == 1]
        try:
            if role == "swiglu":
                cublas = _graph_time(group, lambda w: activation(*torch.nn.functional.linear(x, w).chunk(2, -1)))
            else:
                cublas = _graph_time(group, lambda w: torch.nn.functional.linear(x, w))
        except torch.OutOfMemoryError:
            raise
        except Exception:  # noqa: BLE001 - the matvec is a speed-up: cuBLAS serves where it cannot be timed
            log.exception("timing cuBLAS for %s failed; it serves the shape untimed", shape)
            continue
        times = []
        for option in options:
            try:
                times.append(_graph_time(group, lambda w, o=option: matvec(x, w, **o)))
            except torch.OutOfMemoryError:
                raise
            except Exception as error:  # noqa: BLE001 - one configuration too large for this GPU, say
                log.info("matvec %s for %s cannot run here: %s", option, shape, error)
                times.append(float("inf"))
        fastest = min(range(len(options)), key=times.__getitem__)
        if times[fastest] < float("inf") and (keep_all or times[fastest] < 0.97 * cublas):
            chosen[shape] = (options[fastest], round(times[fastest], 2), round(cublas, 2))
    return chosen
