"""`fused_experts`: the routed experts of a Mixture-of-Experts layer (hy_v3) as two grouped matmuls, and
`route_experts`, the router's choice of them after its matmul in one kernel. Each token's chosen experts make its
slots (token x top-k); the slots are sorted by expert and each expert's run padded to a multiple of the block height
(`align_by_expert`), so that one program's block of rows all use one expert's weights.
The first matmul takes each slot's token through its expert's gate/up projection; the second applies SiLU(gate) * up
as it reads that, takes it through the expert's down projection and weighs it by the slot's routing weight. The
top-k slots of a token are summed in float32 after, in a fixed order (no atomics), as transformers sums them.

Every shape follows from the number of tokens alone, and nothing is read back to the host: a decoding step runs it
inside its CUDA graph; the programs of blocks past the padded total return at once. Prefill runs the same kernels.
The block sizes are a first choice by rule (`block_sizes`), not yet timed on a GPU. A step of no more slots than
experts (a decoding step of a few rows) takes a matvec by slot instead, each slot reading its own expert's weights,
with no sorting: a one-row step's experts are 19 MB of 4-bit weights, a few microseconds of reading, beside which the
sorting's dozen small kernels are likely the larger cost (the 30B-A3B's one-row step took 9.65 ms on an H100 with
them; not profiled apart, and this path is not yet timed on a GPU).

The experts' weights come 16-bit (transformers' stacked [E, N, K] tensors) or in 4 bits (`Int4Weights`, made by
engine/experts_int4.py): groups of 128 along K with a bf16 scale and minimum each (w = q * scale + minimum, q in
0..15), two values to a byte, column c in the low half and column c + K/2 in the high half of byte c, so that one
byte load serves two tiles of K and no interleaving is needed; dequantized in the kernel as the tile is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import common
from .common import AVAILABLE

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _input_tile(inputs, cols, K, real, GATED: tl.constexpr):
        """The BLOCK_M rows' inputs at `cols`: as stored, or (GATED) SiLU(gate) * up from rows of gate then up, each
        rounded to the input's dtype as torch's F.silu(gate) * up is."""
        inside = real[:, None] & (cols < K)[None, :]
        if GATED:
            up = tl.load(inputs + K + cols[None, :], mask=inside, other=0.0)
            g = tl.load(inputs + cols[None, :], mask=inside, other=0.0).to(tl.float32)
            return ((g * tl.sigmoid(g)).to(up.dtype).to(tl.float32) * up.to(tl.float32)).to(up.dtype)
        else:
            return tl.load(inputs + cols[None, :], mask=inside, other=0.0)

    @triton.jit
    def _int4_tile(nibbles, scales, minimums, groups, inside):
        """A [BLOCK_K, BLOCK_N] tile of 4-bit weights dequantized in float32: q * scale + minimum of each value's
        group."""
        scale = tl.load(scales + groups, mask=inside, other=0.0).to(tl.float32)
        minimum = tl.load(minimums + groups, mask=inside, other=0.0).to(tl.float32)
        return nibbles.to(tl.float32) * scale + minimum

    @triton.jit
    def _expert_gemm(
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
        Slots,
        BlockExperts,
        Padded,
        num_slots,
        ROWS_PER_INPUT: tl.constexpr,
        GATED: tl.constexpr,
        WEIGHTED: tl.constexpr,
        INT4: tl.constexpr,
        GROUP: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        PDL: tl.constexpr,
    ):
        """C[slot] = A[slot // ROWS_PER_INPUT] @ W[expert].T for the BLOCK_M slots of one block (W [E, N, K], or
        INT4: bytes [E, N, K / 2] with Scales and Minimums [E, N, K / GROUP]); GATED: A's rows are gate then up
        (2K wide) and the input is SiLU(gate) * up; WEIGHTED: the result rounded to A's dtype, then times the
        slot's routing weight in float32 (transformers' order)."""
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
        if INT4:
            half = K // 2
            scales = Scales + expert * stride_se + n[None, :].to(tl.int64) * stride_sn
            minimums = Minimums + expert * stride_se + n[None, :].to(tl.int64) * stride_sn
            for first in range(0, half, BLOCK_K):
                cols = first + k
                inside = (cols < half)[:, None] & (n < N)[None, :]
                packed = tl.load(weights + cols[:, None], mask=inside, other=0)
                a = _input_tile(inputs, cols, K, real, GATED)
                w = _int4_tile(packed & 15, scales, minimums, (cols // GROUP)[:, None], inside)
                acc = tl.dot(a, w.to(a.dtype), acc)
                a = _input_tile(inputs, half + cols, K, real, GATED)
                w = _int4_tile(packed >> 4, scales, minimums, ((half + cols) // GROUP)[:, None], inside)
                acc = tl.dot(a, w.to(a.dtype), acc)
        else:
            for first in range(0, K, BLOCK_K):
                cols = first + k
                a = _input_tile(inputs, cols, K, real, GATED)
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

    @triton.jit
    def _expert_gemv(
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
        PDL: tl.constexpr,
    ):
        """_expert_gemm's product for one slot a program (its expert read from Index, no sorting), as a matvec: the
        BLOCK_N outputs of the slot's row against its expert's weights, the same inputs, weights rounded to A's
        dtype, and result as the grouped matmul's."""
        wait_for_inputs(PDL)
        slot = tl.program_id(0)
        row = (slot // ROWS_PER_INPUT).to(tl.int64)
        expert = tl.load(Index + slot).to(tl.int64)
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        k = tl.arange(0, BLOCK_K)
        real = tl.full([1], 1, tl.int1)
        inputs = A + row * stride_a
        weights = W + expert * stride_we + n[:, None].to(tl.int64) * stride_wn
        acc = tl.zeros([BLOCK_N], tl.float32)
        if INT4:
            half = K // 2
            scales = Scales + expert * stride_se + n[:, None].to(tl.int64) * stride_sn
            minimums = Minimums + expert * stride_se + n[:, None].to(tl.int64) * stride_sn
            for first in range(0, half, BLOCK_K):
                cols = first + k
                inside = (n < N)[:, None] & (cols < half)[None, :]
                packed = tl.load(weights + cols[None, :], mask=inside, other=0)
                a = _input_tile(inputs, cols, K, real, GATED).to(tl.float32)
                w = _int4_tile(packed & 15, scales, minimums, (cols // GROUP)[None, :], inside)
                acc += tl.sum(w.to(A.dtype.element_ty).to(tl.float32) * a, axis=1)
                a = _input_tile(inputs, half + cols, K, real, GATED).to(tl.float32)
                w = _int4_tile(packed >> 4, scales, minimums, ((half + cols) // GROUP)[None, :], inside)
                acc += tl.sum(w.to(A.dtype.element_ty).to(tl.float32) * a, axis=1)
        else:
            for first in range(0, K, BLOCK_K):
                cols = first + k
                a = _input_tile(inputs, cols, K, real, GATED).to(tl.float32)
                w = tl.load(weights + cols[None, :], mask=(n < N)[:, None] & (cols < K)[None, :], other=0.0)
                acc += tl.sum(w.to(A.dtype.element_ty).to(tl.float32) * a, axis=1)
        if WEIGHTED:
            out = acc.to(A.dtype.element_ty).to(tl.float32) * tl.load(RouteWeights + slot)
        else:
            out = acc
        tl.store(C + slot.to(tl.int64) * stride_c + n, out.to(C.dtype.element_ty), mask=n < N)

    @triton.jit
    def _route_select(
        Logits,
        Bias,
        Weights,
        Index,
        E,
        scaling,
        TOP_K: tl.constexpr,
        K_PAD: tl.constexpr,
        BLOCK_E: tl.constexpr,
        PDL: tl.constexpr,
    ):
        """One token's routing from its router logits (float32): sigmoid scores, the top-k of score + bias chosen
        one at a time (largest first), the chosen scores normalised to sum one and scaled, as moe.route does."""
        wait_for_inputs(PDL)
        t = tl.program_id(0).to(tl.int64)
        e = tl.arange(0, BLOCK_E)
        inside = e < E
        scores = tl.sigmoid(tl.load(Logits + t * E + e, mask=inside, other=0.0))
        bias = tl.load(Bias + e, mask=inside, other=0.0).to(tl.float32)
        choice = tl.where(inside, scores + bias, float("-inf"))
        j = tl.arange(0, K_PAD)
        picked = tl.zeros([K_PAD], tl.int32)
        weights = tl.zeros([K_PAD], tl.float32)
        for i in tl.static_range(TOP_K):
            best = tl.argmax(choice, 0)
            picked = tl.where(j == i, best, picked)
            weights = tl.where(j == i, tl.sum(tl.where(e == best, scores, 0.0), 0), weights)
            choice = tl.where(e == best, float("-inf"), choice)
        weights = weights / (tl.sum(weights, 0) + 1e-20) * scaling
        tl.store(Weights + t * TOP_K + j, weights, mask=j < TOP_K)
        tl.store(Index + t * TOP_K + j, picked.to(tl.int64), mask=j < TOP_K)


@dataclass(frozen=True)
class Int4Weights:
    """Experts' weights [E, N, K] in 4 bits: `packed` uint8 [E, N, K / 2] (column c low, c + K / 2 high), `scales`
    and `minimums` [E, N, K / group] (bf16)."""

    packed: torch.Tensor
    scales: torch.Tensor
    minimums: torch.Tensor
    group: int

    @property
    def shape(self) -> tuple[int, int, int]:
        experts, n, half = self.packed.shape
        return experts, n, 2 * half


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
    gate_up: torch.Tensor | Int4Weights,
    down: torch.Tensor | Int4Weights,
    index: torch.Tensor,
    weights: torch.Tensor,
    block_m: int | None = None,
    block_n: int = 64,
    block_k: int = 64,
    num_warps: int = 4,
) -> torch.Tensor:
    """x [T, H]; gate_up [E, 2I, H] (gate rows, then up rows) and down [E, H, I], as transformers holds them, or
    both in 4 bits; index [T, top_k] and weights [T, top_k] (float32) from the router -> the routed experts' sum
    [T, H] in x's dtype: sum over j of weights[t, j] * down[e] @ (SiLU(gate[e] @ x[t]) * (up[e] @ x[t])),
    e = index[t, j]."""
    tokens, top_k = index.shape
    num_experts, two_i, hidden = gate_up.shape
    if tuple(down.shape) != (num_experts, hidden, two_i // 2) or x.shape != (tokens, hidden):
        raise ValueError(
            f"fused_experts: x {tuple(x.shape)}, gate_up {tuple(gate_up.shape)} and down {tuple(down.shape)} "
            f"do not fit together for {tokens} tokens"
        )
    num_slots = tokens * top_k
    if block_m is None:
        if num_slots <= num_experts:
            return _experts_by_slot(x, gate_up, down, index, weights)
        sizes = block_sizes(num_slots, num_experts)
        block_m, block_n, block_k, num_warps = (sizes[key] for key in ("block_m", "block_n", "block_k", "num_warps"))
    slots, block_experts, padded = align_by_expert(index, num_experts, block_m)
    blocks = slots.shape[0] // block_m

    def grouped(operands: list, meta: dict, n: int) -> None:
        common.launch(
            _expert_gemm,
            (blocks, triton.cdiv(n, block_n)),
            *operands,
            slots,
            block_experts,
            padded,
            num_slots,
            **meta,
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            num_warps=num_warps,
        )

    return _two_passes(x, gate_up, down, weights, grouped)


def _two_passes(
    x: torch.Tensor,
    gate_up: torch.Tensor | Int4Weights,
    down: torch.Tensor | Int4Weights,
    weights: torch.Tensor,
    launch: Callable[[list, dict, int], None],
) -> torch.Tensor:
    """The routed experts' two matmuls, whichever kernel `launch` runs (given its shared operands, its constants and
    the pass's N): every slot's gate/up, then its SiLU(gate) * up through down, weighed; the top-k slots of each
    token summed in float32 after, in a fixed order."""
    tokens, top_k = weights.shape
    num_slots, two_i, hidden = tokens * top_k, gate_up.shape[1], x.shape[1]
    route = weights.reshape(-1).float().contiguous()
    x = x.contiguous()
    hidden_up = torch.empty((num_slots, two_i), dtype=x.dtype, device=x.device)
    out = torch.empty((num_slots, hidden), dtype=torch.float32, device=x.device)
    for a, w, c, rows_per_input, gated in ((x, gate_up, hidden_up, top_k, False), (hidden_up, down, out, 1, True)):
        _, n, k = w.shape
        if isinstance(w, Int4Weights):
            matrix, scales, minimums, group = w.packed, w.scales, w.minimums, w.group
        else:  # no scales: the matrix stands in for the pointers the kernels do not read
            matrix, group = w.contiguous(), 1
            scales = minimums = matrix
        operands = [a, matrix, scales, minimums, c, route, n, k, a.stride(0), matrix.stride(0), matrix.stride(1)]
        operands += [scales.stride(0), scales.stride(1), c.stride(0)]
        int4 = isinstance(w, Int4Weights)
        launch(operands, dict(ROWS_PER_INPUT=rows_per_input, GATED=gated, WEIGHTED=gated, INT4=int4, GROUP=group), n)
    return out.view(tokens, top_k, hidden).sum(dim=1).to(x.dtype)


def _experts_by_slot(
    x: torch.Tensor,
    gate_up: torch.Tensor | Int4Weights,
    down: torch.Tensor | Int4Weights,
    index: torch.Tensor,
    weights: torch.Tensor,
    block_n: int = 32,
    block_k: int = 128,
) -> torch.Tensor:
    """fused_experts for a decoding step's few slots (no more than the experts, so most experts take one slot or
    none): each slot a matvec against its own expert's weights, with no sorting by expert and the dozen small
    kernels it takes (align_by_expert), whose fixed cost is likely most of a one-row step's experts (not yet
    measured apart)."""
    experts = index.reshape(-1).contiguous()

    def by_slot(operands: list, meta: dict, n: int) -> None:
        common.launch(
            _expert_gemv,
            (experts.shape[0], triton.cdiv(n, block_n)),
            *operands,
            experts,
            **meta,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            num_warps=4,
        )

    return _two_passes(x, gate_up, down, weights, by_slot)


def route_experts(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, top_k: int, scaling: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """engine/moe.route's routing (the same arguments and results; the experts largest first rather than in topk's
    unsorted order) as the router's matmul and one kernel, where torch takes a dozen small ones (sigmoid, top-k,
    gather, sum, ...)."""
    logits = torch.nn.functional.linear(x.float(), weight.float()).contiguous()
    tokens, experts = logits.shape
    weights = torch.empty((tokens, top_k), dtype=torch.float32, device=x.device)
    index = torch.empty((tokens, top_k), dtype=torch.int64, device=x.device)
    common.launch(
        _route_select,
        (tokens,),
        logits,
        bias.contiguous(),
        weights,
        index,
        experts,
        float(scaling),
        TOP_K=top_k,
        K_PAD=triton.next_power_of_2(top_k),
        BLOCK_E=triton.next_power_of_2(experts),
    )
    return weights, index
