"""The KV arena: the INT8 cache stores a scale per token and reads back close to what was written."""

from __future__ import annotations

import torch

from hymt.engine.kvcache import KVArena


def test_int8_arena_stores_per_token_scales_and_reads_back_close():
    arena = KVArena(1, 8, 2, 16, True, torch.float32, torch.device("cpu"))
    states = torch.randn(3, 2, 16)
    arena.write(0, torch.tensor([5, 1, 2]), states, -states)
    keys, values = arena.read(0, torch.tensor([1, 2, 5]))
    assert arena.keys[0].dtype == torch.int8
    assert torch.allclose(keys, states[[1, 2, 0]], atol=states.abs().max().item() / 100)
    assert torch.allclose(values, -states[[1, 2, 0]], atol=states.abs().max().item() / 100)
    whole, _ = arena.layer(0)
    assert torch.equal(whole[[1, 2, 5]], keys)
