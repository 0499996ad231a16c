"""Prefill steps replayed as CUDA graphs: a prefill step (the newcomers' prompt chunks and one token of each segment
riding along) padded to the smallest of a few token-count buckets. Run eagerly, such a step costs its kernels'
launches from Python, 16-35 ms on an H200 for 16 to 1,024 prompt tokens of the 7B whatever they are
(bench/prefill_cost.py), which held every segment in flight for several decoding steps each time a newcomer joined.

Fixed shapes, as a graph needs: the step's fields live in static device buffers, filled from one pinned host buffer
with one copy each per step. Segments take a fixed number of slots (one per runner row, and one more): the step's
segments first, then one padding segment holding the bucket's padding tokens (they write the arena's reserved first
row and attend causally to the rows from it, real keys whose result nothing reads), then empty slots (no queries,
no keys). Every slot gets logits; the slots of the segments that sample get their rows' tokens and device state,
the others name the runner's padding row. FlashAttention's varlen kernel reads each segment's range in place, as
the eager step does, so only the "flash" attention is captured; the sampling and the state's advance are in the
graph, the settings of a newcomer's row (Sampler.admit) are written before it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .model import Batch, Decoder
from .sampler import CAPTURED_TOP_K, Sampler
from .scheduler import Chunk

# Steps between two buckets pad to the larger: finer where most steps fall (a full batch's riders and a few
# newcomers' prompts).
BUCKETS = (64, 128, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536, 2048, 3072, 4096)


@dataclass
class Layout:
    """A prefill step's fields as the static buffers take them, padded to a bucket of tokens and a fixed number of
    slots: per token its id, position and arena row written; per slot the packed token whose logits it samples, its
    runner row, its new position and its range's start (`per_slot`, those four lists one after another);
    FlashAttention's query starts [slots + 1], range starts [slots + 1] and cached lengths [slots] (`attention`); and
    the chunks that sample, in slot order."""

    ids: list[int]
    positions: list[int]
    writes: list[int]
    per_slot: list[int]
    attention: list[int]
    sampling: list[int]


def layout(chunks: list[Chunk], bucket: int, slots: int, pad_row: int) -> Layout:
    ids: list[int] = []
    positions: list[int] = []
    writes: list[int] = []
    starts, kv_starts, kv_lengths = [0], [], []
    sampling: list[int] = []
    logits, rows, ends, range_starts = [], [], [], []
    for i, chunk in enumerate(chunks):
        seq = chunk.seq
        span = range(chunk.start, chunk.start + chunk.length)
        ids += [seq.token(p) for p in span]
        positions += span
        writes += [seq.kv_start + p for p in span]
        starts.append(starts[-1] + chunk.length)
        kv_starts.append(seq.kv_start)
        kv_lengths.append(span.stop)
        if chunk.samples:
            sampling.append(i)
            logits.append(len(ids) - 1)
            rows.append(seq.row)
            ends.append(span.stop)
            range_starts.append(seq.kv_start)
    # The padding segment: its tokens write the arena's reserved row and read the rows from it.
    padding = bucket - len(ids)
    ids += [0] * padding
    positions += [0] * padding
    writes += [0] * padding
    starts.append(bucket)
    kv_starts.append(0)
    kv_lengths.append(padding)
    empty = slots - len(kv_lengths)
    starts += [bucket] * empty
    kv_starts += [0] * (empty + 1)  # and FlashAttention's unused last entry
    kv_lengths += [0] * empty
    unsampled = slots - len(sampling)
    logits += [0] * unsampled
    rows += [pad_row] * unsampled
    ends += [0] * unsampled
    range_starts += [0] * unsampled
    per_slot = logits + rows + ends + range_starts
    return Layout(ids, positions, writes, per_slot, starts + kv_starts + kv_lengths, sampling)


class PrefillGraphs:
    def __init__(
        self,
        decoder: Decoder,
        sampler: Sampler,
        state: torch.Tensor,
        pad_row: int,
        max_tokens: int,
        max_kv: int,
        device: torch.device,
    ):
        self.decoder, self.sampler, self.state, self.pad_row = decoder, sampler, state, pad_row
        self.max_kv = max_kv
        self.slots = slots = pad_row + 1  # one per row in flight (pad_row is max_in_flight), and the padding one
        self.buckets = [b for b in BUCKETS if b < max_tokens] + [max_tokens]
        tokens = self.max_tokens = max_tokens
        # Long fields: tokens, positions, arena rows written [tokens each]; then per slot the packed token whose
        # logits it samples, its runner row, its new position and its range's start.
        self._longs = torch.zeros(3 * tokens + 4 * slots, dtype=torch.long, device=device)
        # int32 fields, FlashAttention's: query starts [slots + 1], range starts [slots + 1], cached lengths [slots].
        self._ints = torch.zeros(3 * slots + 2, dtype=torch.int32, device=device)
        self._longs_host = torch.zeros_like(self._longs, device="cpu").pin_memory()
        self._ints_host = torch.zeros_like(self._ints, device="cpu").pin_memory()
        self._tokens_host = torch.zeros(slots, dtype=torch.long).pin_memory()
        self._done = torch.cuda.Event()
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}

    def fits(self, chunks: list[Chunk]) -> bool:
        """Whether a captured graph can run this step: every row that samples in it within the captured top-k, and
        its tokens within the largest bucket."""
        rows = [c.seq.row for c in chunks if c.samples]
        return bool(self.graphs) and self.sampler.capturable(rows) and sum(c.length for c in chunks) <= self.max_tokens

    def capture(self, pool=None):
        """A graph per bucket, largest first, into `pool` (None: a new one); returns the pool for the decoding
        graphs to share."""
        for bucket in sorted(self.buckets, reverse=True):
            self._stage([], bucket)
            self._copy()
            self._forward(bucket)  # compiles the fused functions for this shape, outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                output = self._forward(bucket)
            pool = graph.pool()
            self.graphs[bucket] = (graph, output)
        return pool

    def run(self, chunks: list[Chunk]) -> list[int | None]:
        """The step's next token for each chunk that ends its sequence (None for the others), as the eager step."""
        bucket = next(b for b in self.buckets if b >= sum(c.length for c in chunks))
        sampling = self._stage(chunks, bucket)
        self._copy()
        graph, output = self.graphs[bucket]
        graph.replay()
        self._tokens_host.copy_(output, non_blocking=True)
        self._done.record()
        self._done.synchronize()
        sampled = self._tokens_host[: len(sampling)].tolist()
        tokens: list[int | None] = [None] * len(chunks)
        for i, token in zip(sampling, sampled):
            tokens[i] = token
        return tokens

    def _stage(self, chunks: list[Chunk], bucket: int) -> list[int]:
        """The step's fields into the host buffers; the chunks that sample, in slot order."""
        staged = layout(chunks, bucket, self.slots, self.pad_row)
        t, longs = self.max_tokens, self._longs_host
        for offset, values in ((0, staged.ids), (t, staged.positions), (2 * t, staged.writes)):
            longs[offset : offset + bucket] = torch.tensor(values)
        longs[3 * t :] = torch.tensor(staged.per_slot)
        self._ints_host[:] = torch.tensor(staged.attention, dtype=torch.int32)
        return staged.sampling

    def _copy(self) -> None:
        self._longs.copy_(self._longs_host, non_blocking=True)
        self._ints.copy_(self._ints_host, non_blocking=True)

    def _forward(self, bucket: int) -> torch.Tensor:
        """The whole step over the static buffers, `bucket` tokens: the forward, the sampling, the sampled rows'
        state. The sampled tokens [slots]."""
        t, s = self.max_tokens, self.slots
        longs, ints = self._longs, self._ints
        logits_index, rows, ends, range_starts = longs[3 * t :].view(4, s)
        batch = Batch(
            input_ids=longs[:bucket],
            positions=longs[t : t + bucket],
            write_index=longs[2 * t : 2 * t + bucket],
            query_starts=ints[: s + 1],
            kv_starts=ints[s + 1 : 2 * s + 2],
            kv_lengths=ints[2 * s + 2 :],
            logits_index=logits_index,
            max_query=bucket,
            max_kv=self.max_kv,
            spans=[],  # a prefill step's (flash attention reads the device fields alone)
        )
        logits = self.decoder.forward(batch)
        tokens = self.sampler.sample(logits, rows, CAPTURED_TOP_K)
        self.state[:, rows] = torch.stack([tokens, ends, range_starts])
        self.state[:, self.pad_row] = 0  # padding slots keep reading and writing the arena's reserved row
        return tokens
