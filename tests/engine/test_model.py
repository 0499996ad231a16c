"""The model's attention on the test model: one masked call for a decoding batch equals the per-segment path."""

from __future__ import annotations

import torch

from hymt.engine.kvcache import KVArena


def test_padded_decoding_attention_equals_per_segment_attention(translator):
    """The GPU fallback's one masked call for a decoding batch against the per-segment path."""
    from hymt.engine.model import Batch

    decoder = translator.engine.runner.decoder
    arena = KVArena(1, 64, decoder.num_kv_heads, decoder.head_dim, False, torch.float32, torch.device("cpu"))
    arena.keys[0].normal_()
    arena.values[0].normal_()
    decoder_arena, decoder.arena = decoder.arena, arena
    try:
        q = torch.randn(3, decoder.num_heads, decoder.head_dim)
        starts, lengths = [1, 20, 40], [5, 17, 1]
        batch = Batch(
            input_ids=torch.zeros(3, dtype=torch.long),
            positions=torch.zeros(3, dtype=torch.long),
            write_index=torch.zeros(3, dtype=torch.long),
            query_starts=torch.arange(4, dtype=torch.int32),
            kv_starts=torch.tensor(starts + [0], dtype=torch.int32),
            kv_lengths=torch.tensor(lengths, dtype=torch.int32),
            logits_index=torch.arange(3),
            max_query=1,
            max_kv=20,
        )
        padded = decoder._attend(0, q, batch, decoder._gather_plan(batch))
        batch.spans = [(i, 1, s, n) for i, (s, n) in enumerate(zip(starts, lengths))]
        assert torch.allclose(padded, decoder._attend(0, q, batch, decoder._span_plan(batch.spans)), atol=1e-5)
    finally:
        decoder.arena = decoder_arena
