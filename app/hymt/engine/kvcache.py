"""INT8 KV cache: keys and values stored as int8 with one scale per token and head (about 65 KiB per token for the
7B model instead of 128 KiB), as a cache layer on transformers' quantized-layer base so `generate` uses it as is.

Unlike transformers' KIVI-style layers (per-channel groups, a bf16 residual window re-quantized every 128 tokens),
per-token scales let new tokens be appended without touching the old ones, and padding rows (all zeros) stay exact.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import BaseQuantizedLayer, Cache, DynamicCache


class Int8KVLayer(BaseQuantizedLayer):
    """Stores [batch, kv_heads, seq, head_dim] states as int8 plus [batch, kv_heads, seq, 1] scales."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._quantized_keys = self._quantize(key_states)
        self._quantized_values = self._quantize(value_states)

    def _quantize(self, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale = tensor.abs().amax(dim=-1, keepdim=True).float().div(127.0).clamp(min=1e-8)
        q = torch.round(tensor.float() / scale).clamp(-127, 127).to(torch.int8)
        return q, scale.to(self.dtype)

    def _dequantize(self, q_tensor: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        q, scale = q_tensor
        return q.to(self.dtype) * scale

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        self.cumulative_length += key_states.shape[-2]
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        else:
            self._quantized_keys = _append(self._quantized_keys, self._quantize(key_states))
            self._quantized_values = _append(self._quantized_values, self._quantize(value_states))
        # Attention reads dequantized states: one layer's worth at a time, freed after the layer runs.
        return self._dequantize(self._quantized_keys), self._dequantize(self._quantized_values)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        if not self.is_initialized:
            return
        idx = beam_idx.to(self._quantized_keys[0].device)
        self._quantized_keys = tuple(t.index_select(0, idx) for t in self._quantized_keys)
        self._quantized_values = tuple(t.index_select(0, idx) for t in self._quantized_values)


def _append(old: tuple[torch.Tensor, torch.Tensor], new: tuple[torch.Tensor, torch.Tensor]):
    return torch.cat([old[0], new[0]], dim=-2), torch.cat([old[1], new[1]], dim=-2)


def make_cache(kind: str, num_layers: int) -> Cache:
    """A fresh cache for one `generate` call: "int8" or the default 16-bit dynamic cache."""
    if kind == "int8":
        return Cache(layers=[Int8KVLayer() for _ in range(num_layers)])
    return DynamicCache()
