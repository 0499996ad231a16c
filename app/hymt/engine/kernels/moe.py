"""The routed experts of a Mixture-of-Experts layer (hy_v3) on the GPU: `expert_outputs` (each slot's weighed output;
`fused_experts`, their sum), `route_experts` (the router's choice of them) and `combine_add_rms_norm` (the layer's
end). Each token's chosen experts make its slots (token x top-k).

- A few tokens (`BY_SLOT_TOKENS`, a decoding step of up to 4 rows): a matvec a slot, each reading its own expert's
  weights, with no sorting.
- More: two grouped matmuls. The slots are sorted by expert and each expert's run padded to a multiple of the block
  height (`align_by_expert`), so that one program's block of rows all use one expert's weights; an expert is read
  once per block of slots. The block sizes are a first choice by rule (`block_sizes`).
Either way the first pass takes each slot's token through its expert's gate/up projection; the second applies
SiLU(gate) * up as it reads that, takes it through the expert's down projection and weighs it by the slot's routing
weight. The top-k slots of a token are summed in float32 after, in a fixed order (no atomics), as transformers sums
them: in the decoder by `combine_add_rms_norm`, which also adds the shared expert and the residual and takes the
next layer's norm (torch's five kernels for that took 12.6 us a layer on an H100, the kernel 4.2).

Every shape follows from the number of tokens alone, and nothing is read back to the host: a decoding step runs it
inside its CUDA graph; the programs of blocks past the padded total return at once. Prefill runs the same kernels.
Timed on an H100 with the 30B-A3B's 4-bit experts (bench/moe_kernels.py, bench/history/checks-20261207T1515Z): the
matvec by slot 41.5 us a layer at one row (about 500 GB/s: the dequantization's arithmetic is its limit), grouped
from 206 us at 8 rows to 428 at 64. Reading the bytes as int32 words and making each 4-bit value a float32 through
the mantissa of 2^23 (no conversion instruction), with the scale and minimum taken out of each tile's sum, was
slower on the same GPU (54.8 us at one row; the grouped matmuls 5-10 % slower): bench/history/checks-20261207T1700Z.

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
    from .layers import add_norm_row
    from .matvec import _row_input

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
    def _int4_tile(nibbles, scales, minimums, group, columns):
        """A [BLOCK_K, BLOCK_N] tile of 4-bit weights, all of one group a column (BLOCK_K divides GROUP / 2, so
        each half of a tile lies in one group), dequantized in float32: q * scale + minimum, the column's scale and
        minimum loaded once."""
        scale = tl.load(scales + group, mask=columns, other=0.0).to(tl.float32)
        minimum = tl.load(minimums + group, mask=columns, other=0.0).to(tl.float32)
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
            columns = (n < N)[None, :]
            for first in range(0, half, BLOCK_K):
                cols = first + k
                packed = tl.load(weights + cols[:, None], mask=columns, other=0)
                a = _input_tile(inputs, cols, K, real, GATED)
                w = _int4_tile(packed & 15, scales, minimums, first // GROUP, columns)
                acc = tl.dot(a, w.to(a.dtype), acc)
                a = _input_tile(inputs, half + cols, K, real, GATED)
                w = _int4_tile(packed >> 4, scales, minimums, (half + first) // GROUP, columns)
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
    def _int4_products(q, scales, minimums, group, rows, inputs, K, cols, GATED: tl.constexpr):
        """A tile of 4-bit values q [BLOCK_N, BLOCK_K], all of one group a row (that row's scale and minimum at
        `group`), dequantized, rounded to the input's dtype and times the input at `cols`: the products in float32."""
        scale = tl.load(scales + group, mask=rows, other=0.0).to(tl.float32)[:, None]
        minimum = tl.load(minimums + group, mask=rows, other=0.0).to(tl.float32)[:, None]
        w = (q.to(tl.float32) * scale + minimum).to(inputs.dtype.element_ty).to(tl.float32)
        return w * _row_input(inputs, K, cols, K, GATED)[None, :]

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
        dtype, and result as the grouped matmul's. Products are summed per lane across the loop and reduced once at
        the end, as matvec._matvec does. INT4: BLOCK_K bytes of a row a tile (a divisor of GROUP / 2, so that each
        half of the tile lies in one group and takes one scale and minimum a row)."""
        wait_for_inputs(PDL)
        slot = tl.program_id(0)
        expert = tl.load(Index + slot).to(tl.int64)
        inputs = A + (slot // ROWS_PER_INPUT).to(tl.int64) * stride_a
        n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
        rows = n < N
        k = tl.arange(0, BLOCK_K)
        weights = W + expert * stride_we + n[:, None].to(tl.int64) * stride_wn
        acc = tl.zeros([BLOCK_N, BLOCK_K], tl.float32)
        if INT4:
            half = K // 2
            scales = Scales + expert * stride_se + n.to(tl.int64) * stride_sn
            minimums = Minimums + expert * stride_se + n.to(tl.int64) * stride_sn
            for first in range(0, half, BLOCK_K):
                packed = tl.load(weights + (first + k)[None, :], mask=rows[:, None], other=0)
                acc += _int4_products(packed & 15, scales, minimums, first // GROUP, rows, inputs, K, first + k, GATED)
                high = half + first
                acc += _int4_products(packed >> 4, scales, minimums, high // GROUP, rows, inputs, K, high + k, GATED)
        else:
            for first in range(0, K, BLOCK_K):
                cols = first + k
                w = tl.load(weights + cols[None, :], mask=rows[:, None] & (cols < K)[None, :], other=0.0)
                acc += w.to(tl.float32) * _row_input(inputs, K, cols, K, GATED)[None, :]
        total = tl.sum(acc, axis=1)
        if WEIGHTED:
            total = total.to(A.dtype.element_ty).to(tl.float32) * tl.load(RouteWeights + slot)
        tl.store(C + slot.to(tl.int64) * stride_c + n, total.to(C.dtype.element_ty), mask=rows)

    @triton.jit
    def _route(
        X,
        Router,
        Logits,
        Bias,
        Weights,
        Index,
        Arrived,
        H,
        E,
        stride_x,
        scaling,
        shared,
        TOP_K: tl.constexpr,
        SHARED: tl.constexpr,
        K_PAD: tl.constexpr,
        BLOCK_E: tl.constexpr,
        PART_E: tl.constexpr,
        BLOCK_H: tl.constexpr,
        MATVEC: tl.constexpr,
        PDL: tl.constexpr,
    ):
        """One token's routing. MATVEC: first its router logits (float32 sums of the 16-bit x and weights, as
        F.linear(x.float(), weight.float())) for PART_E experts a program, the last program of the token to arrive
        going on (the others return); else the logits are given. Then: sigmoid scores, the top-k of score + bias
        chosen one at a time (largest first), the chosen scores normalised to sum one and scaled, as moe.route
        does; SHARED: and after them the shared expert (index `shared`) with weight 1."""
        wait_for_inputs(PDL)
        t = tl.program_id(0).to(tl.int64)
        e = tl.arange(0, BLOCK_E)
        inside = e < E
        if MATVEC:
            part = tl.program_id(1) * PART_E + tl.arange(0, PART_E)
            acc = tl.zeros([PART_E], tl.float32)
            for first in range(0, H, BLOCK_H):
                h = first + tl.arange(0, BLOCK_H)
                x = tl.load(X + t * stride_x + h, mask=h < H, other=0.0).to(tl.float32)
                w = tl.load(Router + part[:, None] * H + h[None, :], mask=(part < E)[:, None] & (h < H)[None, :])
                acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)
            tl.store(Logits + t * E + part, acc, mask=part < E)
            # Every program's logits stored before it arrives; the last to arrive reads them past L1 and leaves the
            # counter at zero for the next call.
            tl.debug_barrier()
            if tl.atomic_add(Arrived + t, 1, sem="acq_rel") != tl.num_programs(1) - 1:
                return
            tl.atomic_xchg(Arrived + t, 0)
        scores = tl.sigmoid(tl.load(Logits + t * E + e, mask=inside, other=0.0, cache_modifier=".cg"))
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
        columns = TOP_K + SHARED
        tl.store(Weights + t * columns + j, weights, mask=j < TOP_K)
        tl.store(Index + t * columns + j, picked.to(tl.int64), mask=j < TOP_K)
        if SHARED:
            tl.store(Weights + t * columns + TOP_K, 1.0)
            tl.store(Index + t * columns + TOP_K, shared.to(tl.int64))

    @triton.jit
    def _combine_add_rms_norm(
        Hidden,
        Slots,
        Shared,
        Weight,
        Normed,
        eps,
        stride_hidden,
        stride_shared,
        stride_normed,
        SLOTS: tl.constexpr,
        SHARED: tl.constexpr,
        N: tl.constexpr,
        BLOCK: tl.constexpr,
        PDL: tl.constexpr,
    ):
        """One token: its SLOTS' outputs (float32) summed in order and rounded to the model's dtype, plus (SHARED)
        its shared expert's output, in float32 and rounded (transformers' fp32 combine, which a 16-bit add
        equals), added to the residual in place, and the residual's RMSNorm, as layers._add_rms_norm."""
        wait_for_inputs(PDL)
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        inside = cols < N
        routed = tl.zeros([BLOCK], tl.float32)
        for j in tl.static_range(SLOTS):
            routed += tl.load(Slots + (row * SLOTS + j) * N + cols, mask=inside, other=0.0)
        delta = routed.to(Hidden.dtype.element_ty).to(tl.float32)
        if SHARED:
            delta += tl.load(Shared + row * stride_shared + cols, mask=inside, other=0.0).to(tl.float32)
        add_norm_row(Hidden + row * stride_hidden, delta, Weight, Normed + row * stride_normed, eps, cols, N)


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


# The most tokens whose experts take the matvec by slot: it reads an expert once per slot, the grouped matmuls once
# per block of slots. On an H100 with the 30B-A3B's experts in 4 bits (bench/moe_kernels.py), a layer's two passes
# by slot took 41, 69 and 126 us for 1, 2 and 4 tokens against 80, 101 and 145 grouped; 234 against 206 for 8.
BY_SLOT_TOKENS = 4


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
    **sizes,
) -> torch.Tensor:
    """x [T, H]; gate_up [E, 2I, H] (gate rows, then up rows) and down [E, H, I], as transformers holds them, or
    both in 4 bits; index [T, top_k] and weights [T, top_k] (float32) from the router -> the routed experts' sum
    [T, H] in x's dtype: sum over j of weights[t, j] * down[e] @ (SiLU(gate[e] @ x[t]) * (up[e] @ x[t])),
    e = index[t, j], the top-k summed in float32 in a fixed order, as transformers sums them."""
    return expert_outputs(x, gate_up, down, index, weights, **sizes).sum(dim=1).to(x.dtype)


def expert_outputs(
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
    """fused_experts' terms before their sum: each slot's weighed output [T, top_k, H] in float32 (what
    combine_add_rms_norm sums)."""
    tokens, top_k = index.shape
    num_experts, two_i, hidden = gate_up.shape
    if tuple(down.shape) != (num_experts, hidden, two_i // 2) or x.shape != (tokens, hidden):
        raise ValueError(
            f"fused_experts: x {tuple(x.shape)}, gate_up {tuple(gate_up.shape)} and down {tuple(down.shape)} "
            f"do not fit together for {tokens} tokens"
        )
    num_slots = tokens * top_k
    if block_m is None:
        if tokens <= BY_SLOT_TOKENS and num_slots <= num_experts:
            return experts_by_slot(x, gate_up, down, index, weights)
        sizes = block_sizes(num_slots, num_experts)
        block_m, block_n, block_k, num_warps = (sizes[key] for key in ("block_m", "block_n", "block_k", "num_warps"))
    _check_tile(gate_up, block_k)
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


def _check_tile(weights: torch.Tensor | Int4Weights, block_k: int) -> None:
    """The 4-bit kernels take one scale and minimum a row for each half of a tile of block_k bytes: block_k must
    divide half a group (K is a multiple of the group, so the tiles' halves then never straddle two)."""
    if isinstance(weights, Int4Weights) and (weights.group // 2) % block_k:
        raise ValueError(f"4-bit experts: a tile of {block_k} bytes spans two groups of {weights.group}")


def _two_passes(
    x: torch.Tensor,
    gate_up: torch.Tensor | Int4Weights,
    down: torch.Tensor | Int4Weights,
    weights: torch.Tensor,
    launch: Callable[[list, dict, int], None],
) -> torch.Tensor:
    """The routed experts' two matmuls, whichever kernel `launch` runs (given its shared operands, its constants and
    the pass's N): every slot's gate/up, then its SiLU(gate) * up through down, weighed -> [T, top_k, H] float32."""
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
    return out.view(tokens, top_k, hidden)


def experts_by_slot(
    x: torch.Tensor,
    gate_up: torch.Tensor | Int4Weights,
    down: torch.Tensor | Int4Weights,
    index: torch.Tensor,
    weights: torch.Tensor,
    block_n: int = 16,
    block_k: int | None = None,
    num_warps: int = 4,
    num_stages: int = 3,
) -> torch.Tensor:
    """expert_outputs for a decoding step's few slots (no more than the experts, so most experts take one slot or
    none): each slot a matvec against its own expert's weights, with no sorting by expert (align_by_expert's dozen
    small kernels). block_k: 64 bytes of a 4-bit row a tile, 128 values of a 16-bit one, by default."""
    experts = index.reshape(-1).contiguous()
    block_k = block_k or (64 if isinstance(gate_up, Int4Weights) else 128)
    _check_tile(gate_up, block_k)

    def by_slot(operands: list, meta: dict, n: int) -> None:
        common.launch(
            _expert_gemv,
            (experts.shape[0], triton.cdiv(n, block_n)),
            *operands,
            experts,
            **meta,
            BLOCK_N=block_n,
            BLOCK_K=block_k,
            num_warps=num_warps,
            num_stages=num_stages,
        )

    return _two_passes(x, gate_up, down, weights, by_slot)


def route_experts(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    top_k: int,
    scaling: float,
    arrived: torch.Tensor | None = None,
    part_experts: int = 4,
    shared: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """engine/moe.route's routing (the same arguments and results; the experts largest first rather than in topk's
    unsorted order), where torch takes a dozen small kernels (casts, sigmoid, top-k, gather, sum, ...): with
    `arrived` (int32 zeros, at least one per token, left as zeros) one kernel, the router's matvec in parts of
    `part_experts` experts side by side and the choice after; without (or for more tokens than counters: a prefill,
    where the weight read once by a matmul beats once per token) the router's matmul, then one kernel. On an H100
    at one token parts of 4 took 9.0 us, of 16 13.9, the matmul and kernel 12.95 (bench/moe_kernels.py). `shared`
    (the shared expert's index): each token's last column is that expert with weight 1 (moe.with_shared)."""
    tokens, experts = x.shape[0], weight.shape[0]
    matvec = arrived is not None and tokens <= arrived.numel()
    if matvec:
        logits = torch.empty((tokens, experts), dtype=torch.float32, device=x.device)
        part = min(part_experts, triton.next_power_of_2(experts))
        grid: tuple[int, ...] = (tokens, triton.cdiv(experts, part))
    else:
        logits = torch.nn.functional.linear(x.float(), weight.float()).contiguous()
        part, grid = 1, (tokens,)
    columns = top_k + (shared is not None)
    weights = torch.empty((tokens, columns), dtype=torch.float32, device=x.device)
    index = torch.empty((tokens, columns), dtype=torch.int64, device=x.device)
    common.launch(
        _route,
        grid,
        x,
        weight.contiguous(),
        logits,
        bias.contiguous(),
        weights,
        index,
        arrived if matvec else logits,
        x.shape[1],
        experts,
        x.stride(0),
        float(scaling),
        0 if shared is None else shared,
        TOP_K=top_k,
        SHARED=shared is not None,
        K_PAD=triton.next_power_of_2(top_k),
        BLOCK_E=triton.next_power_of_2(experts),
        PART_E=part,
        BLOCK_H=256,
        MATVEC=matvec,
    )
    return weights, index


def combine_add_rms_norm(
    hidden: torch.Tensor,
    slots: torch.Tensor,
    shared: torch.Tensor | None,
    weight: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A MoE layer's end in one kernel: its slots' outputs [T, top_k, H] (float32, expert_outputs') summed and
    rounded, its shared expert's output [T, H] added in float32 and rounded, the result added to the residual
    `hidden` [T, H] in place, and the residual's RMSNorm: (hidden, its norm), as layers.add_rms_norm(hidden,
    moe's output, ...)."""
    tokens, top_k, size = slots.shape
    normed = torch.empty_like(hidden)
    block = triton.next_power_of_2(size)
    common.launch(
        _combine_add_rms_norm,
        (tokens,),
        hidden,
        slots.contiguous(),
        hidden if shared is None else shared,
        weight,
        normed,
        eps,
        hidden.stride(0),
        hidden.stride(0) if shared is None else shared.stride(0),
        normed.stride(0),
        SLOTS=top_k,
        SHARED=shared is not None,
        N=size,
        BLOCK=block,
        num_warps=max(1, min(16, block // 512)),
    )
    return hidden, normed
