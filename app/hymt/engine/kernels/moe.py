"""`fused_experts`: the routed experts of a Mixture-of-Experts layer (hy_v3) as two grouped matmuls. Each token's
chosen experts make its slots (token x top-k); the slots are sorted by expert and each expert's run padded to a
multiple of the block height (`align_by_expert`), so that one program's block of rows all use one expert's weights.
The first matmul takes each slot's token through its expert's gate/up projection; the second applies SiLU(gate) * up
as it reads that, takes it through the expert's down projection and weighs it by the slot's routing weight. The
top-k slots of a token are summed in float32 after, in a fixed order (no atomics), as transformers sums them.

Every shape follows from the number of tokens alone, and nothing is read back to the host: a decoding step runs it
inside its CUDA graph; the programs of blocks past the padded total return at once. Prefill runs the same kernels.
The block sizes are a first choice by rule (`block_sizes`), not yet timed on a GPU.
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
    def _expert_gemm(
        A,
        W,
        C,
        Slots,
        BlockExperts,
        Padded,
        RouteWeights,
        num_slots,
        N,
        K,
        stride_a,
        stride_we,
        stride_wn,
        stride_c,
        ROWS_PER_INPUT: tl.constexpr,
        GATED: tl.constexpr,
        WEIGHTED: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        PDL: tl.constexpr,
    ):
        """C[slot] = A[slot // ROWS_PER_INPUT] @ W[expert].T for the BLOCK_M slots of one block (W [E, N, K]);
        GATED: A's rows are gate then up (2K wide) and the input is SiLU(gate) * up, each rounded to A's dtype as
        torch's F.silu(gate) * up is; WEIGHTED: the result rounded to A's dtype, then times the slot's routing
        weight in float32 (transformers' order)."""
        wait_for_inputs(PDL)
        block = tl.program_id(0)
        if block * BLOCK_M >= tl.load(Padded):
            return
        slots = tl.load(Slots + block * BLOCK_M + tl.arange(0, BLOCK_M))
        real = slots < num_slots  # padding slots hold num_slots
        rows = tl.where(real, slots // ROWS_PER_INPUT, 0).to(tl.int64)
        expert = tl.load(BlockExperts + block).to(tl.int64)
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        k = tl.arange(0, BLOCK_K)
        inputs = A + rows[:, None] * stride_a
        weights = W + expert * stride_we + n[None, :].to(tl.int64) * stride_wn
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for first in range(0, K, BLOCK_K):
            cols = first + k
            inside = real[:, None] & (cols < K)[None, :]
            if GATED:
                gate = tl.load(inputs + cols[None, :], mask=inside, other=0.0)
                up = tl.load(inputs + K + cols[None, :], mask=inside, other=0.0)
                g = gate.to(tl.float32)
                a = ((g * tl.sigmoid(g)).to(up.dtype).to(tl.float32) * up.to(tl.float32)).to(up.dtype)
            else:
                a = tl.load(inputs + cols[None, :], mask=inside, other=0.0)
            w = tl.load(weights + cols[:, None], mask=(cols < K)[:, None] & (n < N)[None, :], other=0.0)
            acc = tl.dot(a, w.to(a.dtype), acc)
        if WEIGHTED:
            route = tl.load(RouteWeights + slots, mask=real, other=0.0)
            out = acc.to(A.dtype.element_ty).to(tl.float32) * route[:, None]
        else:
            out = acc
        tl.store(
            C + slots[:, None].to(tl.int64) * stride_c + n[None, :],
            out.to(C.dtype.element_ty),
            mask=real[:, None] & (n < N)[None, :],
        )


def align_by_expert(
    index: torch.Tensor, num_experts: int, block_m: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """index [T, top_k] (each token's experts) -> the slots (token * top_k + j) sorted by expert, each expert's run
    padded with `T * top_k` to a multiple of block_m [capacity]; each block's expert [capacity // block_m] (blocks
    past the total name the last expert, and are skipped); the padded total [1]. The capacity bounds the padded
    total for any routing (each expert used pads at most block_m - 1), so the shapes depend on T alone."""
    flat = index.reshape(-1)
    num_slots = flat.shape[0]
    device = flat.device
    counts = torch.zeros(num_experts, dtype=torch.long, device=device).index_add_(0, flat, torch.ones_like(flat))
    padded_counts = (counts + block_m - 1) // block_m * block_m
    ends = padded_counts.cumsum(0)
    order = torch.argsort(flat, stable=True)  # slots by expert, each expert's in token order
    experts = flat[order]
    rank = torch.arange(num_slots, device=device) - (counts.cumsum(0) - counts)[experts]
    capacity = -(-(num_slots + min(num_slots, num_experts) * (block_m - 1)) // block_m) * block_m
    sorted_slots = torch.full((capacity,), num_slots, dtype=torch.int32, device=device)
    sorted_slots[(ends - padded_counts)[experts] + rank] = order.int()
    starts = torch.arange(0, capacity, block_m, device=device)
    block_experts = torch.searchsorted(ends, starts, right=True).clamp_(max=num_experts - 1).int()
    return sorted_slots, block_experts, ends[-1:]


def block_sizes(num_slots: int, num_experts: int) -> dict:
    """Block height about the slots an expert gets on average (16 for a decoding batch, up to 64 in a prefill);
    wider blocks of N for the larger matmuls."""
    per_expert = num_slots // max(1, num_experts)
    block_m = 16 if per_expert <= 16 else 32 if per_expert <= 32 else 64
    return {"block_m": block_m, "block_n": 64 if block_m == 16 else 128, "block_k": 64, "num_warps": 4}


def fused_experts(
    x: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    index: torch.Tensor,
    weights: torch.Tensor,
    block_m: int | None = None,
    block_n: int = 64,
    block_k: int = 64,
    num_warps: int = 4,
) -> torch.Tensor:
    """x [T, H]; gate_up [E, 2I, H] (gate rows, then up rows) and down [E, H, I], as transformers holds them;
    index [T, top_k] and weights [T, top_k] (float32) from the router -> the routed experts' sum [T, H] in x's
    dtype: sum over j of weights[t, j] * down[e] @ (SiLU(gate[e] @ x[t]) * (up[e] @ x[t])), e = index[t, j]."""
    tokens, top_k = index.shape
    num_experts, two_i, hidden = gate_up.shape
    if down.shape != (num_experts, hidden, two_i // 2) or x.shape != (tokens, hidden):
        raise ValueError(
            f"fused_experts: x {tuple(x.shape)}, gate_up {tuple(gate_up.shape)} and down {tuple(down.shape)} "
            f"do not fit together for {tokens} tokens"
        )
    if block_m is None:
        sizes = block_sizes(tokens * top_k, num_experts)
        block_m, block_n, block_k, num_warps = (sizes[key] for key in ("block_m", "block_n", "block_k", "num_warps"))
    num_slots = tokens * top_k
    slots, block_experts, padded = align_by_expert(index, num_experts, block_m)
    blocks = slots.shape[0] // block_m
    route = weights.reshape(-1).float().contiguous()
    x, gate_up, down = x.contiguous(), gate_up.contiguous(), down.contiguous()
    hidden_up = torch.empty((num_slots, two_i), dtype=x.dtype, device=x.device)
    out = torch.empty((num_slots, hidden), dtype=torch.float32, device=x.device)
    for a, w, c, rows_per_input, gated in ((x, gate_up, hidden_up, top_k, False), (hidden_up, down, out, 1, True)):
        n, k = w.shape[1], w.shape[2]
        common.launch(
            _expert_gemm,
            (blocks, triton.cdiv(n, block_n)),
            a,
            w,
            c,
            slots,
            block_experts,
            padded,
            route,
            num_slots,
            n,
            k,
            a.stride(0),
            w.stride(0),
            w.stride(1),
            c.stride(0),
            ROWS_PER_INPUT=rows_per_input,
            GATED=gated,
            WEIGHTED=gated,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            num_warps=num_warps,
        )
    return out.view(tokens, top_k, hidden).sum(dim=1).to(x.dtype)
