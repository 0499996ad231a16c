"""`penalize`: the sampler's pass over the vocabulary in one kernel: the logits in float32, the repetition penalty on
the tokens each row has seen, the stop tokens suppressed before a row's `min_new_tokens`, the scores written for
the draw, and each block's largest score with its first index; a second kernel picks each row's greedy token from
the blocks (the first index of the largest, as torch's argmax). In torch that was a cast, a gather of the seen
bits, four element-wise kernels and an argmax over 128k entries in one block of threads (about 50 us a step).

`sample`: the same pass, each block keeping its TOP best entries instead (sorted), then one kernel per row that
merges those lists into the TOP best (the row's top-k) and does the rest of the draw: temperature, top-k, top-p and
the exponential race. A greedy row's blocks keep their best entry alone, and its token is the best of those: no
sort at all (0.07 ms of the bf16 step). torch's top-k over 128k entries and the dozen small kernels after it took
0.15 ms of the 7B's 4.2 ms bf16 decoding step at one row. An entry travels as one int64, its score's bits ordered
as the float and its index below (the smaller first in a tie, as torch's argmax), so Triton's top-k sorts both at
once.
"""

from __future__ import annotations

import torch

from . import common
from .common import AVAILABLE

BLOCK = 4096  # vocabulary entries per program
TOP = 128  # the widest top-k `sample` takes (the sampler's CAPTURED_TOP_K)
NO_CANDIDATE = -2139095041 << 32  # -inf packed as _pack packs it: the padding of a row's candidates

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
        Greedy,
        MinNew,
        Generated,
        StopMask,
        Scores,
        PartMax,
        PartFirst,
        Candidates,
        V,
        stride_logits,
        stride_seen,
        stride_scores,
        stride_candidates,
        PARTS: tl.constexpr,
        BLOCK: tl.constexpr,
        TOP: tl.constexpr,
        CANDIDATES: tl.constexpr,
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
        scores = tl.where(inside, scores, float("-inf"))
        if CANDIDATES:
            # A greedy row needs each block's best entry alone (the head of its list, which is all _draw reads of
            # it): a max, where the top-k is a sort.
            if tl.load(Greedy + row) > 0:
                tl.store(Candidates + i * stride_candidates + part * TOP, tl.max(_pack(scores, cols), axis=0))
            else:
                keys = tl.topk(_pack(scores, cols), TOP)
                tl.store(Candidates + i * stride_candidates + part * TOP + tl.arange(0, TOP), keys)
        else:
            tl.store(Scores + i * stride_scores + cols, scores, mask=inside)
            best = tl.max(scores, axis=0)
            tl.store(PartMax + i * PARTS + part, best)
            tl.store(PartFirst + i * PARTS + part, tl.min(tl.where(scores == best, cols, V), axis=0))

    @triton.jit
    def _pack(scores, cols):
        """float32 scores and their indices as int64 keys in the scores' order, the smaller index first in a tie:
        a float's bits read as int32 order as the float does once the negatives' other bits are flipped."""
        bits = scores.to(tl.int32, bitcast=True)
        ordered = tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(tl.int64)
        return (ordered << 32) | (0x7FFFFFFF - cols).to(tl.int64)

    @triton.jit
    def _sorted_bitonic(x, ROWS: tl.constexpr, K: tl.constexpr, LOG_K: tl.constexpr):
        """Each row of x [ROWS, K], a bitonic sequence, sorted largest first: each pass compares the entries half a
        run apart and puts the larger first (a bitonic merge)."""
        for step in tl.static_range(LOG_K):
            # [runs, 2, half run]: a constexpr cannot be reassigned, so the shapes are written out each pass
            first, second = tl.split(tl.permute(tl.reshape(x, [ROWS << step, 2, K >> (step + 1)]), [0, 2, 1]))
            merged = tl.join(tl.maximum(first, second), tl.minimum(first, second))
            x = tl.reshape(tl.permute(merged, [0, 2, 1]), [ROWS, K])
        return x

    @triton.jit
    def _draw(
        Candidates,
        Index,
        Floats,
        TopK,
        Seed,
        Tokens,
        stride_candidates,
        stride_floats,
        PARTS: tl.constexpr,
        LISTS: tl.constexpr,
        LOG_LISTS: tl.constexpr,
        TOP: tl.constexpr,
        LOG_TOP: tl.constexpr,
        NO_CANDIDATE: tl.constexpr,
        PDL: tl.constexpr,
    ):
        wait_for_inputs(PDL)
        i = tl.program_id(0)
        row = tl.load(Index + i)
        if tl.load(Floats + 3 * stride_floats + row) > 0:  # greedy: the best of the blocks' best
            heads = tl.arange(0, LISTS) * TOP
            best = tl.max(
                tl.load(Candidates + i * stride_candidates + heads, mask=heads < PARTS * TOP, other=NO_CANDIDATE),
                axis=0,
            )
            tl.store(Tokens + i, (0x7FFFFFFF - (best & 0x7FFFFFFF)).to(tl.int64))
        else:
            # The blocks' lists, each sorted largest first (padded to a power of two with empty lists), merged in
            # pairs: the best TOP of two sorted lists are the larger of each entry and its partner in the other list
            # reversed, a bitonic sequence that log2(TOP) compare-exchange passes sort. Sorting all PARTS x TOP
            # candidates again (a top-k over them) took most of this kernel's time.
            lists = tl.arange(0, LISTS)[:, None]
            c = lists * TOP + tl.arange(0, TOP)[None, :]
            keys = tl.load(Candidates + i * stride_candidates + c, mask=lists < PARTS, other=NO_CANDIDATE)
            for level in tl.static_range(LOG_LISTS):
                pairs = tl.split(tl.permute(tl.reshape(keys, [LISTS >> (level + 1), 2, TOP]), [0, 2, 1]))
                keys = _sorted_bitonic(tl.maximum(pairs[0], tl.flip(pairs[1], 1)), LISTS >> (level + 1), TOP, LOG_TOP)
            keys = tl.reshape(keys, [TOP])  # largest first
            ordered = (keys >> 32).to(tl.int32)
            values = tl.where(ordered < 0, ordered ^ 0x7FFFFFFF, ordered).to(tl.float32, bitcast=True)
            tokens = 0x7FFFFFFF - (keys & 0x7FFFFFFF).to(tl.int32)
            rank = tl.arange(0, TOP)
            temperature = tl.load(Floats + row)
            top_p = tl.load(Floats + stride_floats + row)
            # Sampler._draw's arithmetic: temperature, the row's top-k, top-p over the softmax (the first kept), the
            # softmax again over what is left, and the exponential race argmax(p / E), E ~ Exp(1).
            values = tl.where(rank < tl.load(TopK + row), values / temperature, float("-inf"))
            probs = tl.exp(values - tl.max(values, axis=0))
            probs = probs / tl.sum(probs, axis=0)
            beyond_p = ((tl.cumsum(probs, axis=0) - probs) >= top_p) & (rank > 0)
            values = tl.where(beyond_p, float("-inf"), values)
            probs = tl.exp(values - tl.max(values, axis=0))
            probs = probs / tl.sum(probs, axis=0)
            exponential = -tl.log(1.0 - tl.rand(tl.load(Seed), i * TOP + rank))
            race = tl.where(probs > 0, probs / exponential, -1.0)
            choice = tl.min(tl.where(race == tl.max(race, axis=0), rank, TOP), axis=0)
            tl.store(Tokens + i, tl.sum(tl.where(rank == choice, tokens, 0), axis=0).to(tl.int64))

    @triton.jit
    def _argmax_parts(PartMax, PartFirst, Out, PARTS: tl.constexpr, BLOCK_P: tl.constexpr, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        i = tl.program_id(0)
        p = tl.arange(0, BLOCK_P)
        best = tl.load(PartMax + i * PARTS + p, mask=p < PARTS, other=float("-inf"))
        part = tl.min(tl.where((best == tl.max(best, axis=0)) & (p < PARTS), p, PARTS), axis=0)
        tl.store(Out + i, tl.load(PartFirst + i * PARTS + part).to(tl.int64))


def _vocabulary_pass(
    logits: torch.Tensor,
    index: torch.Tensor,
    seen: torch.Tensor,
    penalty: torch.Tensor,
    min_new: torch.Tensor,
    generated: torch.Tensor,
    stop_mask: torch.Tensor,
    outputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor],
    block: int,
    top: int,
) -> None:
    """_penalize over every block of the vocabulary, writing (scores, part_max, part_first) or, given (candidates,
    greedy: each row's greedy flag), each block's `top` best entries (a greedy row's best alone) into candidates."""
    n, vocab = logits.shape
    if len(outputs) == 2:  # the candidates stand in for the outputs the kernel does not write
        (scores, greedy), candidates = outputs, True
        part_max = part_first = scores
    else:  # the penalty stands in for the greedy flags, which only the candidates' pass reads
        (scores, part_max, part_first), greedy, candidates = outputs, penalty, False
    common.launch(
        _penalize,
        (n, triton.cdiv(vocab, block)),
        logits,
        index,
        seen.view(torch.uint8),
        penalty,
        greedy,
        min_new,
        generated,
        stop_mask.view(torch.uint8),
        scores,
        part_max,
        part_first,
        scores,
        vocab,
        logits.stride(0),
        seen.stride(0),
        0 if candidates else scores.stride(0),
        scores.stride(0) if candidates else 0,
        PARTS=triton.cdiv(vocab, block),
        BLOCK=block,
        TOP=top,
        CANDIDATES=candidates,
        num_warps=8,
    )


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
    _vocabulary_pass(
        logits, index, seen, penalty, min_new, generated, stop_mask, (scores, part_max, part_first), BLOCK, TOP
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


def sample(
    logits: torch.Tensor,
    index: torch.Tensor,
    seen: torch.Tensor,
    floats: torch.Tensor,
    ints: torch.Tensor,
    stop_mask: torch.Tensor,
    seed: torch.Tensor,
    block: int = BLOCK,
    top: int = TOP,
) -> torch.Tensor:
    """Each row's next token [n] from logits [n, V] for the sampler's rows `index` [n], with the sampler's state
    (Sampler.floats: temperature, top-p, repetition penalty, greedy; Sampler.ints: top-k, min_new_tokens,
    generated; per row) where every row's top-k is at most TOP; `seed` (int64 [1]) picks the draw's random
    numbers, to be advanced by the caller for the next step. `block` and `top` (powers of two) smaller than the
    defaults are for tests (Triton's interpreter takes seconds for one top-128 of 4096)."""
    n, vocab = logits.shape
    parts = triton.cdiv(vocab, block)
    candidates = torch.empty((n, parts * top), dtype=torch.int64, device=logits.device)
    tokens = torch.empty(n, dtype=torch.long, device=logits.device)
    _vocabulary_pass(logits, index, seen, floats[2], ints[1], ints[2], stop_mask, (candidates, floats[3]), block, top)
    common.launch(
        _draw,
        (n,),
        candidates,
        index,
        floats,
        ints[0],
        seed,
        tokens,
        candidates.stride(0),
        floats.stride(0),
        PARTS=parts,
        LISTS=triton.next_power_of_2(parts),
        LOG_LISTS=triton.next_power_of_2(parts).bit_length() - 1,
        TOP=top,
        LOG_TOP=top.bit_length() - 1,
        NO_CANDIDATE=NO_CANDIDATE,
        num_warps=8,
    )
    return tokens
