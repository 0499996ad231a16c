"""The KV arena: keys and values of every segment in flight, allocated once at start-up for the planned number of
tokens. Per layer, keys and values are [tokens, kv_heads, head_dim]; a segment owns a contiguous range of token
rows (the scheduler's allocator hands them out). Each kind of tensor is one allocation for all layers, each layer a
view of it, so that copying rows (a kept prompt prefix, engine/prefixes.py) is one kernel for every layer.

The INT8 tier stores int8 values with one scale per token and head (about 65 KiB per token for the 7B model
instead of 128 KiB): new tokens are quantized as they are written, without touching the old ones, and read back
dequantized: by flash attention as a whole layer at a time into one 16-bit scratch layer (a fixed shape, so the
step can be captured; a layer of the arena is a few tens of MiB), by the gathering path per token.

On a GPU both conversions are compiled (`compile()`): eager, the quantization is a dozen kernels per write, and the
dequantizing multiply (int8 by a broadcast 16-bit scale) runs torch's slow mixed-type path, which cost the 8 GB
tier half its single-user speed; compiled, each is one kernel.
"""

from __future__ import annotations

import torch


class KVArena:
    def __init__(
        self,
        num_layers: int,
        num_tokens: int,
        num_kv_heads: int,
        head_dim: int,
        quantized: bool,
        dtype: torch.dtype,
        device: torch.device,
    ):
        self.quantized = quantized  # int8 values with their scales (the int8 KV tiers); else the model's dtype
        self.num_tokens = num_tokens
        self.dtype = dtype
        self.device = device
        store = torch.int8 if quantized else dtype
        shape = (num_tokens, num_kv_heads, head_dim)
        self._whole = [torch.zeros((num_layers, *shape), dtype=store, device=device) for _ in range(2)]
        self.keys, self.values = (list(whole.unbind(0)) for whole in self._whole)
        if quantized:
            scale_shape = (num_layers, num_tokens, num_kv_heads, 1)
            scales = [torch.ones(scale_shape, dtype=dtype, device=device) for _ in range(2)]
            self._whole += scales
            self.key_scales, self.value_scales = (list(whole.unbind(0)) for whole in scales)
            self._scratch = (
                torch.zeros(shape, dtype=dtype, device=device),
                torch.zeros(shape, dtype=dtype, device=device),
            )
        self.uncompile()

    def compile(self) -> None:
        self._quantize = torch.compile(quantize, dynamic=True)
        self._dequantize = torch.compile(dequantize, dynamic=False)

    def uncompile(self) -> None:
        self._quantize, self._dequantize = quantize, dequantize

    def write(self, layer: int, index: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Store [n, kv_heads, head_dim] states at token rows `index` [n]."""
        if self.quantized:
            for store, scales, states in ((self.keys, self.key_scales, keys), (self.values, self.value_scales, values)):
                q, scale = self._quantize(states, self.dtype)
                store[layer].index_copy_(0, index, q)
                scales[layer].index_copy_(0, index, scale)
        else:
            self.keys[layer].index_copy_(0, index, keys)
            self.values[layer].index_copy_(0, index, values)

    def copy(self, copies: list[tuple[int, int, int]]) -> None:
        """Copy token rows in every layer: (first source row, first destination row, rows) each, the sources
        read before any destination is written."""
        if not copies:
            return
        source = torch.cat([torch.arange(s, s + n) for s, _, n in copies]).to(self.device, non_blocking=True)
        destination = torch.cat([torch.arange(d, d + n) for _, d, n in copies]).to(self.device, non_blocking=True)
        for whole in self._whole:
            whole.index_copy_(1, destination, whole.index_select(1, source))

    def storage(self, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """A layer's arena as stored, for the kernels that write and read it in place: keys, values and, for INT8,
        their scales (None otherwise)."""
        if self.quantized:
            return self.keys[layer], self.values[layer], self.key_scales[layer], self.value_scales[layer]
        return self.keys[layer], self.values[layer], None, None

    def layer(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A whole layer's keys and values in 16 bits: the arena itself, or the INT8 arena dequantized into the
        scratch layer."""
        if not self.quantized:
            return self.keys[layer], self.values[layer]
        keys, values = self._scratch
        self._dequantize(
            self.keys[layer], self.key_scales[layer], self.values[layer], self.value_scales[layer], keys, values
        )
        return keys, values

    def read(self, layer: int, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values at token rows `index` (any shape), dequantized: index.shape + [kv_heads, head_dim]."""
        keys, values = self.keys[layer][index], self.values[layer][index]
        if self.quantized:
            keys = keys.to(self.dtype) * self.key_scales[layer][index]
            values = values.to(self.dtype) * self.value_scales[layer][index]
        return keys, values


def quantize(states: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values and their per-row scale (in `dtype`) of states [..., head_dim]."""
    scale = states.abs().amax(dim=-1, keepdim=True).float().div(127.0).clamp(min=1e-8)
    return torch.round(states.float() / scale).clamp(-127, 127).to(torch.int8), scale.to(dtype)


def dequantize(
    keys: torch.Tensor,
    key_scales: torch.Tensor,
    values: torch.Tensor,
    value_scales: torch.Tensor,
    keys_out: torch.Tensor,
    values_out: torch.Tensor,
) -> None:
    """A layer's keys and values into the 16-bit outputs (one pass over both when compiled)."""
    keys_out.copy_(keys.to(keys_out.dtype) * key_scales)
    values_out.copy_(values.to(values_out.dtype) * value_scales)
