"""The KV arena: the INT8 cache stores a scale per token and reads back close to what was written."""

from __future__ import annotations

import pytest
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


@pytest.mark.parametrize("quantized", [False, True])
def test_rows_copied_in_every_layer_read_back_as_written(quantized):
    """A kept prompt prefix's rows (engine/prefixes.py): every layer's keys, values and scales, one copy each."""
    arena = KVArena(3, 32, 2, 16, quantized, torch.float32, torch.device("cpu"))
    states = [torch.randn(4, 2, 16) for _ in range(3)]
    for layer, s in enumerate(states):
        arena.write(layer, torch.arange(4, 8), s, 2 * s)
    arena.copy([(4, 20, 4), (4, 10, 2)])
    for layer in range(3):
        written = arena.read(layer, torch.arange(4, 8))
        for rows, want in ((torch.arange(20, 24), written), (torch.arange(10, 12), [w[:2] for w in written])):
            got = arena.read(layer, rows)
            assert all(torch.equal(g, w) for g, w in zip(got, want))
    assert not arena.keys[0][12:20].any() and arena.keys[1].data_ptr() > arena.keys[0].data_ptr()
