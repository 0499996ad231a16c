"""Runs one batch of segments through `generate`: left padding, the tier's KV cache, the batch's adapter, stop on
<|eos|>, and on out-of-memory a split of the batch, so no segment is lost to a batch that was too large."""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from ..errors import GenerationError, HymtError
from .kvcache import make_cache
from .loader import Loaded
from .scheduler import Work

log = logging.getLogger("hymt.runner")


@dataclass
class BatchStats:
    batches: int = 0
    segments: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    oom_events: int = 0
    batch_sizes: Counter = field(default_factory=Counter)  # segments per batch -> number of batches
    generate_s: float = 0.0  # time spent inside `generate`


class _CancelledRows(StoppingCriteria):
    """Stops generating for rows whose job was cancelled (the client left), so their slots stop costing time."""

    def __init__(self, is_cancelled: Sequence[Callable[[], bool]]):
        self.is_cancelled = is_cancelled
        self.none: torch.Tensor | None = None

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        flags = [c() for c in self.is_cancelled]
        if any(flags):
            return torch.tensor(flags, dtype=torch.bool, device=input_ids.device)
        # The common case reuses one device tensor: no host-to-device copy on every decoding step.
        if self.none is None:
            self.none = torch.zeros(len(flags), dtype=torch.bool, device=input_ids.device)
        return self.none


class ModelRunner:
    def __init__(self, loaded: Loaded, kv_cache: str, empty_cache_after_batch: bool = False,
                 has_adapters: bool = False):
        self.loaded = loaded
        self.has_adapters = has_adapters
        self.kv_cache = kv_cache
        self.empty_cache_after_batch = empty_cache_after_batch
        self.device = next(loaded.model.parameters()).device
        self.num_layers = loaded.config.num_hidden_layers
        self.stats = BatchStats()

    def encode(self, prompt: str) -> list[int]:
        return self.loaded.tokenizer(prompt, add_special_tokens=False)["input_ids"]

    def count_tokens(self, text: str) -> int:
        return len(self.loaded.tokenizer(text, add_special_tokens=False)["input_ids"])

    def run(self, batch: list[Work], is_cancelled: Sequence[Callable[[], bool]] | None = None,
            ) -> list[str | HymtError]:
        """Generated text per segment, in order; a segment that fails even alone gets its error instead."""
        cancelled = list(is_cancelled) if is_cancelled is not None else [lambda: False] * len(batch)
        try:
            outputs = self.generate(batch, cancelled)
        except torch.OutOfMemoryError:
            self.stats.oom_events += 1
            self._free()
            if len(batch) == 1:
                log.error("out of memory on a single segment of %d prompt tokens", len(batch[0].prompt_ids))
                return [GenerationError("out of GPU memory on this segment even alone; send shorter text")]
            half = len(batch) // 2
            log.warning("out of memory on a batch of %d segments: retrying as %d + %d",
                        len(batch), half, len(batch) - half)
            return self.run(batch[:half], cancelled[:half]) + self.run(batch[half:], cancelled[half:])
        except Exception as exc:  # noqa: BLE001 - a runtime failure ends these segments with an error, not the engine
            log.exception("generation failed for a batch of %d segments", len(batch))
            return [GenerationError(f"generation failed: {type(exc).__name__}")] * len(batch)
        if self.empty_cache_after_batch:
            self._free()
        return outputs

    def _free(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def generate(self, batch: list[Work], cancelled: list[Callable[[], bool]]) -> list[str]:
        """One `generate` call for the whole batch; out-of-memory propagates (the warm-up relies on it)."""
        tok = self.loaded.tokenizer
        longest = max(len(w.prompt_ids) for w in batch)
        pad = self.loaded.pad_id
        # Left padding: every row's prompt ends at the same column, where generation starts.
        input_ids = torch.tensor([[pad] * (longest - len(w.prompt_ids)) + w.prompt_ids for w in batch],
                                 device=self.device)
        attention_mask = torch.tensor([[0] * (longest - len(w.prompt_ids)) + [1] * len(w.prompt_ids)
                                       for w in batch], device=self.device)
        adapter, sampling = batch[0].group
        kwargs = dict(
            input_ids=input_ids, attention_mask=attention_mask,
            max_new_tokens=max(w.max_new_tokens for w in batch),
            min_new_tokens=max(w.min_new_tokens for w in batch) or None,
            eos_token_id=self.loaded.stop_ids, pad_token_id=pad,
            past_key_values=make_cache(self.kv_cache, self.num_layers),
            stopping_criteria=StoppingCriteriaList([_CancelledRows(cancelled)]),
            **sampling.generate_kwargs(),
        )
        model = self.loaded.model
        started = time.perf_counter()
        with torch.inference_mode(), _adapter(model, adapter, self.has_adapters):
            out = model.generate(**kwargs)
        self.stats.generate_s += time.perf_counter() - started
        new_tokens = out[:, longest:].tolist()
        texts = []
        for work, row in zip(batch, new_tokens):
            row = row[:work.max_new_tokens]
            for i, token in enumerate(row):
                if token in self.loaded.stop_ids or token == pad:
                    row = row[:i]
                    break
            self.stats.tokens_out += len(row)
            texts.append(tok.decode(row, skip_special_tokens=True))
        self.stats.batches += 1
        self.stats.batch_sizes[len(batch)] += 1
        self.stats.segments += len(batch)
        self.stats.tokens_in += sum(len(w.prompt_ids) for w in batch)
        return texts


class _adapter:
    """Selects the batch's LoRA adapter on a PEFT model, or disables adapters for the base model."""

    def __init__(self, model, name: str | None, enabled: bool):
        self.model, self.name, self.enabled, self.inner = model, name, enabled, None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.name is None:
            self.inner = self.model.disable_adapter()
            self.inner.__enter__()
        else:
            self.model.set_adapter(self.name)
        return self

    def __exit__(self, *exc):
        if self.inner is not None:
            self.inner.__exit__(*exc)
        return False
