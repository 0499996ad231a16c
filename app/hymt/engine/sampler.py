"""Per-row decoding settings in one batch: greedy rows and sampled rows side by side, each with its own temperature,
top-k, top-p and repetition penalty, in the order and with the arithmetic of transformers' processors (repetition
penalty, end-of-sequence suppression before `min_new_tokens`, temperature, top-k, top-p), so that greedy rows pick
exactly the token `generate` picks.

Every setting lives on the device, one column per runner row, written when a segment is admitted; so does what
the repetition penalty needs (one bit per vocabulary entry per row, set for the prompt at admission and for each
token as it is sampled) and how many tokens each row has generated (for `min_new_tokens`). Sampling reads them by
row index alone, with no host value in the way, which is what lets a decoding step capture it in its CUDA graph.
The draw itself is the exponential race (argmax of p / E with E ~ Exp(1), which picks token i with probability
p_i): one kernel, no host synchronisation, unlike `torch.multinomial`. On a GPU with Triton the whole of it is two
kernels where every row's top-k is at most CAPTURED_TOP_K (kernels/sampling.py), their random numbers from a seed
on the device that each step advances; the pass over the vocabulary up to the greedy token otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import kernels
from .sampling_params import Sampling

# Top-k beyond this (or none) cannot be captured with a fixed shape; such rows sample in an uncaptured step.
CAPTURED_TOP_K = kernels.TOP


@dataclass(frozen=True)
class Newcomer:
    """A segment taking a row: its settings, and the tokens it has seen (prompt and what it generated)."""

    row: int
    sampling: Sampling
    min_new_tokens: int
    generated: int
    token_ids: list[int]


class Sampler:
    def __init__(self, num_rows: int, vocab_size: int, stop_ids: list[int], device: torch.device):
        self.device = device
        self.vocab_size = vocab_size
        self.seen = torch.zeros(num_rows, vocab_size, dtype=torch.bool, device=device)
        # The vocabulary entries that end a segment, as a mask: built once, not at every step that suppresses them.
        self.stop_mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        self.stop_mask[stop_ids] = True
        # Per row: temperature, top-p, repetition penalty, greedy (0/1); top-k, min_new_tokens, tokens generated.
        self.floats = torch.ones(4, num_rows, dtype=torch.float32, device=device)
        self.ints = torch.zeros(3, num_rows, dtype=torch.long, device=device)
        self.top_k = [0] * num_rows  # the host's copy, to tell whether a batch can be captured
        self._true = torch.ones((), dtype=torch.bool, device=device)  # a device value: capture copies no host one
        self._ones = torch.ones(num_rows, dtype=torch.long, device=device)
        self.kernels = kernels.AVAILABLE and device.type == "cuda"
        # The kernels' draw: from torch's generator once, so that torch.manual_seed makes it repeat.
        self.seed = torch.randint(2**62, (1,)).to(device)

    def admit(self, newcomers: list[Newcomer]) -> None:
        """Segments take their rows: their settings, and the tokens each has seen (prompt and what it generated).
        One copy to the device for each kind of value, whatever the number of newcomers (a prefill step gathers
        several), where each newcomer's own copies were a dozen small transfers and launches."""
        if not newcomers:
            return
        floats, ints = [], []
        seen_rows: list[int] = []
        seen_ids: list[int] = []
        for n in newcomers:
            top_k = min(n.sampling.top_k, self.vocab_size) if n.sampling.top_k > 0 else self.vocab_size
            self.top_k[n.row] = top_k
            temperature = n.sampling.temperature if n.sampling.temperature > 0 else 1.0
            floats.append([temperature, n.sampling.top_p, n.sampling.repetition_penalty, float(n.sampling.greedy)])
            ints.append([top_k, n.min_new_tokens, n.generated])
            seen_rows += [n.row] * len(n.token_ids)
            seen_ids += n.token_ids
        rows = torch.tensor([n.row for n in newcomers], device=self.device)
        self.floats[:, rows] = torch.tensor(floats, dtype=torch.float32).to(self.device).T
        self.ints[:, rows] = torch.tensor(ints, dtype=torch.long).to(self.device).T
        self.seen.index_fill_(0, rows, False)
        seen = torch.tensor([seen_rows, seen_ids], dtype=torch.long).to(self.device)
        self.seen[seen[0], seen[1]] = True

    def capturable(self, rows: list[int]) -> bool:
        return all(self.top_k[r] <= CAPTURED_TOP_K for r in rows)

    def top_k_bound(self, rows: list[int]) -> int:
        """The top-k width a batch needs: fixed when captured, the largest of its rows otherwise."""
        return CAPTURED_TOP_K if self.capturable(rows) else max(self.top_k[r] for r in rows)

    def sample(self, logits: torch.Tensor, index: torch.Tensor, top_k_bound: int) -> torch.Tensor:
        """logits [n, vocab] (any float dtype), index [n] (the rows) -> next token per row [n], marked as seen for
        its row and counted as generated. No host synchronisation: capturable."""
        if self.kernels and top_k_bound <= CAPTURED_TOP_K:
            tokens = kernels.sample(logits, index, self.seen, self.floats, self.ints, self.stop_mask, self.seed)
            self.seed.add_(1)
            return self._count(index, tokens)
        temperature, top_p, penalty, greedy = self.floats[:, index]
        top_k, min_new, generated = self.ints[:, index]
        if self.kernels:
            scores, best = kernels.penalize(
                logits, index, self.seen, self.floats[2], self.ints[1], self.ints[2], self.stop_mask
            )
        else:
            scores = logits.float()
            penalty = penalty[:, None]
            penalized = torch.where(scores < 0, scores * penalty, scores / penalty)
            scores = torch.where(self.seen.index_select(0, index), penalized, scores)
            suppress = (generated < min_new)[:, None] & self.stop_mask[None, :]
            scores = scores.masked_fill(suppress, float("-inf"))
            best = scores.argmax(dim=-1)
        return self._count(
            index, torch.where(greedy > 0, best, self._draw(scores, temperature, top_k, top_p, top_k_bound))
        )

    def _count(self, index: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The sampled tokens, marked as seen for their rows and counted as generated."""
        self.seen.index_put_((index, tokens), self._true)
        # One kernel, where `ints[2, index] += 1` is three (a gather, the add, a scatter); a decoding batch's
        # padding entries all name the padding row, which counts them all, and whose count nothing reads.
        self.ints[2].index_add_(0, index, self._ones[: index.shape[0]])
        return tokens

    def _draw(
        self, scores: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, bound: int
    ) -> torch.Tensor:
        # Greedy rows are drawn too (and then ignored): one code path for the batch.
        scores = scores / temperature[:, None]
        values, indices = scores.topk(min(bound, scores.shape[1]), dim=-1)  # sorted, largest first
        beyond_k = torch.arange(values.shape[1], device=self.device)[None, :] >= top_k[:, None]
        values = values.masked_fill(beyond_k, float("-inf"))
        # Top-p: drop a token once the tokens ranked above it already hold `top_p` of the mass (keep the first).
        probs = values.softmax(dim=-1)
        beyond_p = (probs.cumsum(dim=-1) - probs) >= top_p[:, None]
        beyond_p[:, 0] = False
        probs = values.masked_fill(beyond_p, float("-inf")).softmax(dim=-1)
        choice = (probs / torch.empty_like(probs).exponential_()).argmax(dim=-1, keepdim=True)
        return indices.gather(1, choice).squeeze(1)
