"""Per-row decoding settings in one batch: greedy rows and sampled rows side by side, each with its own temperature,
top-k, top-p and repetition penalty, in the order and with the arithmetic of transformers' processors (repetition
penalty, end-of-sequence suppression before `min_new_tokens`, temperature, top-k, top-p), so that greedy rows pick
exactly the token `generate` picks.

The repetition penalty needs every token a segment has seen (prompt and output): one bit per vocabulary entry per
row of the runner, set when a segment is prefilled and as it generates.
"""

from __future__ import annotations

import torch

from ..prompts import Sampling


class Sampler:
    def __init__(self, num_rows: int, vocab_size: int, stop_ids: list[int], device: torch.device):
        self.device = device
        self.seen = torch.zeros(num_rows, vocab_size, dtype=torch.bool, device=device)
        # The vocabulary entries that end a segment, as a mask: built once, not at every step that suppresses them.
        self.stop_mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
        self.stop_mask[stop_ids] = True

    def reset_row(self, row: int, token_ids: list[int]) -> None:
        self.seen[row].zero_()
        self.seen[row, torch.tensor(token_ids, device=self.device)] = True

    def sample(self, logits: torch.Tensor, rows: list[int], settings: list[Sampling],
               suppress_stop: list[bool]) -> torch.Tensor:
        """logits [n, vocab] (any float dtype) -> next token per row [n], marked as seen for its row."""
        scores = logits.float()
        index = torch.tensor(rows, device=self.device)
        seen = self.seen.index_select(0, index)
        penalty = self._column([s.repetition_penalty for s in settings])
        penalized = torch.where(scores < 0, scores * penalty, scores / penalty)
        scores = torch.where(seen, penalized, scores)
        if any(suppress_stop):
            mask = torch.tensor(suppress_stop, device=self.device)[:, None] & self.stop_mask[None, :]
            scores = scores.masked_fill(mask, float("-inf"))
        tokens = scores.argmax(dim=-1)
        if not all(s.greedy for s in settings):
            sampled = self._sample(scores, settings)
            greedy = torch.tensor([s.greedy for s in settings], device=self.device)
            tokens = torch.where(greedy, tokens, sampled)
        self.seen[index, tokens] = True
        return tokens

    def _column(self, values: list[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float32, device=self.device)[:, None]

    def _sample(self, scores: torch.Tensor, settings: list[Sampling]) -> torch.Tensor:
        # Greedy rows are sampled too (and then ignored): one code path for the batch.
        scores = scores / self._column([s.temperature if s.temperature > 0 else 1.0 for s in settings])
        top_k = [min(s.top_k, scores.shape[1]) if s.top_k > 0 else scores.shape[1] for s in settings]
        values, indices = scores.topk(max(top_k), dim=-1)  # sorted, largest first
        beyond_k = torch.arange(values.shape[1], device=self.device)[None, :] >= \
            torch.tensor(top_k, device=self.device)[:, None]
        values = values.masked_fill(beyond_k, float("-inf"))
        # Top-p: drop a token once the tokens ranked above it already hold `top_p` of the mass (keep the first).
        probs = values.softmax(dim=-1)
        mass_before = probs.cumsum(dim=-1) - probs
        beyond_p = mass_before >= self._column([s.top_p for s in settings])
        beyond_p[:, 0] = False
        probs = values.masked_fill(beyond_p, float("-inf")).softmax(dim=-1)
        choice = torch.multinomial(probs, 1)
        return indices.gather(1, choice).squeeze(1)
