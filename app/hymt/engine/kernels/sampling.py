"""`penalize`: the sampler's pass over the vocabulary in one kernel: the logits in float32, the repetition penalty on
the tokens each row has seen, the stop tokens suppressed before a row's `min_new_tokens`, the scores written for
the draw, and each block's largest score with its first index; a second kernel picks each row's greedy token from
the blocks (the first index of the largest, as torch's argmax). In torch that was a cast, a gather of the seen
bits, four element-wise kernels and an argmax over 128k entries in one block of threads (about 50 us a step).
"""

from __future__ import annotations

import torch

from . import common
from .common import AVAILABLE

BLOCK = 4096  # vocabulary entries per program

if AVAILABLE:
    import triton
    import triton.language as tl

    from .common import wait_for_inputs

    @triton.jit
    def _penalize(
        Logits,
        Index,
        Seen,
        Penalty,
        MinNew,
        Generated,
        StopMask,
        Scores,
        PartMax,
        PartFirst,
        V,
        stride_logits,
        stride_seen,
        stride_scores,
        PARTS: tl.constexpr,
        BLOCK: tl.constexpr,
        PDL: tl.constexpr,
    ):
        wait_for_inputs(PDL)
        i = tl.program_id(0)
        part = tl.program_id(1)
        row = tl.load(Index + i)
        cols = part * BLOCK + tl.arange(0, BLOCK)
        inside = cols < V
        scores = tl.load(Logits + i * stride_logits + cols, mask=inside, other=0.0).to(tl.float32)
        seen = tl.load(Seen + row * stride_seen + cols, mask=inside, other=0) != 0
        penalty = tl.load(Penalty + row)
        scores = tl.where(seen, tl.where(scores < 0, scores * penalty, tl.math.div_rn(scores, penalty)), scores)
        suppress = tl.load(Generated + row) < tl.load(MinNew + row)
        stop = tl.load(StopMask + cols, mask=inside, other=0) != 0
        scores = tl.where(stop & suppress, float("-inf"), scores)
        tl.store(Scores + i * stride_scores + cols, scores, mask=inside)
        scores = tl.where(inside, scores, float("-inf"))
        best = tl.max(scores, axis=0)
        tl.store(PartMax + i * PARTS + part, best)
        tl.store(PartFirst + i * PARTS + part, tl.min(tl.where(scores == best, cols, V), axis=0))

    @triton.jit
    def _argmax_parts(PartMax, PartFirst, Out, PARTS: tl.constexpr, BLOCK_P: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        i = tl.program_id(0)
        p = tl.arange(0, BLOCK_P)
        best = tl.load(PartMax + i * PARTS + p, mask=p < PARTS, other=float("-inf"))
        part = tl.min(tl.where((best == tl.max(best, axis=0)) & (p < PARTS), p, PARTS), axis=0)
        tl.store(Out + i, tl.load(PartFirst + i * PARTS + part).to(tl.int64))


def penalize(
    logits: torch.Tensor,
    index: torch.Tensor,
    seen: torch.Tensor,
    penalty: torch.Tensor,
    min_new: torch.Tensor,
    generated: torch.Tensor,
    stop_mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """logits [n, V] for the sampler's rows `index` [n]; per sampler row: seen [rows, V] (bool), penalty, min_new and
    generated [rows]; stop_mask [V] (bool). (scores [n, V] float32 as Sampler.sample computes them, each row's
    greedy token [n])."""
    n, vocab = logits.shape
    parts = triton.cdiv(vocab, BLOCK)
    scores = torch.empty((n, vocab), dtype=torch.float32, device=logits.device)
    part_max = torch.empty((n, parts), dtype=torch.float32, device=logits.device)
    part_first = torch.empty((n, parts), dtype=torch.int32, device=logits.device)
    tokens = torch.empty(n, dtype=torch.long, device=logits.device)
    common.launch(
        _penalize,
        (n, parts),
        logits,
        index,
        seen.view(torch.uint8),
        penalty,
        min_new,
        generated,
        stop_mask.view(torch.uint8),
        scores,
        part_max,
        part_first,
        vocab,
        logits.stride(0),
        seen.stride(0),
        scores.stride(0),
        PARTS=parts,
        BLOCK=BLOCK,
        num_warps=8,
    )
    common.launch(
        _argmax_parts,
        (n,),
        part_max,
        part_first,
        tokens,
        PARTS=parts,
        BLOCK_P=triton.next_power_of_2(parts),
        num_warps=1,
    )
    return scores, tokens
