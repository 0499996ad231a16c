"""Runs the scheduler's steps on the model: a prefill step (packed prompt chunks, and one token of each segment
riding along, eager) or a decoding step (one token per segment in flight), each with its per-row sampling.

Each runner row's decoding state (its last token, its position, where its KV range starts) lives on the device,
written when a prefill step samples it and advanced by every decoding step itself. So a decoding step needs
nothing from the host but which rows it runs, and that only when the batch changed: on a GPU it is one CUDA graph
replay, captured for the smallest batch-size bucket that holds the batch, with the whole step in it (the forward,
the sampling, the state's advance; padding rows read and write the arena's reserved first row), and one small copy
of the sampled tokens back to the host. `launch` returns at once and `collect` waits for the tokens, so the engine
prepares step N+1 while the GPU runs step N. Graphs are captured at start-up, largest first, in one shared memory
pool; capturing them is also the proof that decoding at every batch size fits in memory. With FlashAttention,
prefill steps are captured too, by token-count bucket (engine/prefill.py), into the same pool.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from ..tiers import KvCache
from .adapters import adapted
from .kvcache import KVArena
from .loader import Loaded
from .model import Batch, Decoder
from .prefill import PrefillGraphs
from .requests import Request
from .sampler import CAPTURED_TOP_K, Newcomer, Sampler
from .scheduler import Chunk
from .sequence import Sequence

log = logging.getLogger("hymt.runner")

BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256)


@dataclass
class RunnerStats:
    """The runner's part of the engine's Snapshot (engine/requests.py), field for field."""

    steps: dict = field(default_factory=lambda: {"prefill": 0, "decode": 0})
    tokens_in: int = 0  # prompt tokens prefilled (including those prefilled again after a preemption)
    oom_events: int = 0
    preemptions: int = 0
    step_s: dict = field(default_factory=lambda: {"prefill": 0.0, "decode": 0.0})
    max_in_flight_seen: int = 0


@dataclass(frozen=True)
class RunnerPlan:
    kv_tokens: int  # arena rows
    max_in_flight: int  # decoding rows
    prefill_tokens: int  # prompt tokens per prefill step
    max_seq_tokens: int  # the longest range one segment may hold (prompt + output budget)
    kv_cache: KvCache  # the tier's
    cuda_graphs: bool
    compiled: bool


def attention_kind(device: torch.device, dtype: torch.dtype) -> str:
    """FlashAttention-2 runs on Ampere and later in 16 bits; everything else gathers."""
    if (
        device.type == "cuda"
        and dtype in (torch.bfloat16, torch.float16)
        and torch.cuda.get_device_capability(device) >= (8, 0)
    ):
        return "flash"
    return "dense"


@dataclass
class Launched:
    """A decoding step on its way: its segments, and where its tokens land on the host."""

    seqs: list[Sequence]
    host: torch.Tensor
    done: torch.cuda.Event | None
    started: float
    tokens: list[int] | None = None  # known at once where the step ran synchronously


class ModelRunner:
    def __init__(self, loaded: Loaded, plan: RunnerPlan):
        self.loaded = loaded
        self.plan = plan
        model = loaded.model
        config = loaded.config
        self.device = next(model.parameters()).device
        embeddings = model.get_input_embeddings().weight
        assert isinstance(embeddings, torch.Tensor)  # a Parameter (nn.Module's attributes are typed Tensor | Module)
        dtype = embeddings.dtype
        self.attention = attention_kind(self.device, dtype)
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        self.arena = KVArena(
            config.num_hidden_layers,
            plan.kv_tokens,
            config.num_key_value_heads,
            head_dim,
            plan.kv_cache == "int8",
            dtype,
            self.device,
        )
        self.decoder = Decoder(model, self.arena, self.attention, plan.compiled, plan.max_seq_tokens)
        # One row more than segments in flight: the padding row of a captured batch.
        self.pad_row = plan.max_in_flight
        rows = plan.max_in_flight + 1
        self.sampler = Sampler(rows, config.vocab_size, loaded.stop_ids, self.device)
        self.stats = RunnerStats()
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.graph_error: str | None = None
        self.buckets = [b for b in BUCKETS if b < plan.max_in_flight] + [plan.max_in_flight]
        # Per row on the device: last token, position (tokens cached), first arena row of its range.
        self.state = torch.zeros((3, rows), dtype=torch.long, device=self.device)
        self._index = torch.full((rows,), self.pad_row, dtype=torch.long, device=self.device)  # a step's rows
        self.prefill_graphs: PrefillGraphs | None = None
        if self.device.type == "cuda" and plan.cuda_graphs and self.attention == "flash":
            # A step's tokens: a full prefill budget and a token of every row riding along, within the arena.
            tokens = min(plan.prefill_tokens + plan.max_in_flight, plan.kv_tokens - 1)
            self.prefill_graphs = PrefillGraphs(
                self.decoder, self.sampler, self.state, plan.max_in_flight, tokens, plan.max_seq_tokens, self.device
            )
        self._arange = torch.arange(rows + 1, device=self.device)
        self._arange32 = self._arange.int()  # a decoding batch's query starts (one query per row)
        self._ones = torch.ones(rows, dtype=torch.long, device=self.device)
        pinned = self.device.type == "cuda"
        # Two of each host buffer: one for the step on the GPU, one for the step being prepared.
        self._index_host = [torch.zeros(rows, dtype=torch.long, pin_memory=pinned) for _ in range(2)]
        self._tokens_host = [torch.zeros(rows, dtype=torch.long, pin_memory=pinned) for _ in range(2)]
        self._events = [torch.cuda.Event() for _ in range(2)] if pinned else [None, None]
        self._parity = 0
        self._batch: tuple | None = None  # the (bucket, rows) the index buffer holds
        self._last_collect = 0.0
        # A PEFT model starts with its first adapter active (LoRA wrappers read it at every call).
        self._adapter = model.active_adapter if adapted(model) else None

    # -- steps -------------------------------------------------------------------------------------------------
    def _use_adapter(self, name: str | None) -> None:
        """The step's LoRA adapter (the scheduler never mixes adapters in flight), or the base model for None."""
        model = self.loaded.model
        if not adapted(model) or name == self._adapter:
            return
        if name is None:
            model.base_model.disable_adapter_layers()
        else:
            model.base_model.enable_adapter_layers()
            model.set_adapter(name)
        self._adapter = name

    @property
    def prefill_captured(self) -> bool:
        """Whether prefill steps replay captured graphs (then a prefill step costs about what a decoding step of its
        tokens does, and newcomers need not gather for one)."""
        return self.prefill_graphs is not None and bool(self.prefill_graphs.graphs)

    @torch.inference_mode()
    def prefill(self, chunks: list[Chunk], eager: bool = False) -> list[int | None]:
        """Run prompt chunks (and riding decoding rows); the next token for each chunk that ends its sequence, None
        for the others. The rows that sampled carry their new state on the device from here on. A captured graph
        runs the step where one fits it (unless `eager`)."""
        started = time.perf_counter()
        self._use_adapter(chunks[0].seq.adapter)
        self.sampler.admit(
            [
                Newcomer(s.row, s.sampling, s.min_new_tokens, len(s.output_ids), s.prompt_ids + s.output_ids)
                for s in (c.seq for c in chunks if c.start == c.seq.reused and not c.decoding)
            ]
        )
        graphs = self.prefill_graphs
        if not eager and graphs is not None and graphs.fits(chunks):
            tokens = graphs.run(chunks)
        else:
            tokens = self._prefill_eager(chunks)
        self.stats.steps["prefill"] += 1
        self.stats.tokens_in += sum(c.length for c in chunks if not c.decoding)
        self.stats.step_s["prefill"] += time.perf_counter() - started
        return tokens

    def _prefill_eager(self, chunks: list[Chunk]) -> list[int | None]:
        ids, write_index, query_starts, spans = [], [], [0], []
        positions: list[int] = []
        for chunk in chunks:
            seq = chunk.seq
            span = range(chunk.start, chunk.start + chunk.length)
            ids += [seq.token(p) for p in span]
            positions += span
            write_index += [seq.kv_start + p for p in span]
            spans.append((query_starts[-1], chunk.length, seq.kv_start, chunk.start + chunk.length))
            query_starts.append(query_starts[-1] + chunk.length)
        sampling = [(i, c) for i, c in enumerate(chunks) if c.samples]
        batch = Batch(
            input_ids=self._tensor(ids),
            positions=self._tensor(positions),
            write_index=self._tensor(write_index),
            query_starts=self._tensor(query_starts, torch.int32),
            kv_starts=self._tensor([s[2] for s in spans] + [0], torch.int32),
            kv_lengths=self._tensor([s[3] for s in spans], torch.int32),
            logits_index=self._tensor([spans[i][0] + spans[i][1] - 1 for i, _ in sampling]),
            max_query=max(c.length for c in chunks),
            max_kv=max(s[3] for s in spans),
            spans=spans,
        )
        logits = self.decoder.forward(batch)
        tokens: list[int | None] = [None] * len(chunks)
        if sampling:
            seqs = [c.seq for _, c in sampling]
            rows = [s.row for s in seqs]
            index = self._tensor(rows)
            sampled = self.sampler.sample(logits, index, self.sampler.top_k_bound(rows))
            ends = [c.start + c.length for _, c in sampling]
            self.state[:, index] = torch.stack([sampled, self._tensor(ends), self._tensor([s.kv_start for s in seqs])])
            for (i, _), token in zip(sampling, sampled.tolist()):
                tokens[i] = token
        return tokens

    @torch.inference_mode()
    def launch(self, seqs: list[Sequence]) -> Launched:
        """Start a decoding step (one token for each segment, from the state its rows hold) and return without
        waiting for it, where its batch can run as a captured graph; otherwise run it now."""
        started = time.perf_counter()
        self._use_adapter(seqs[0].adapter)
        rows = [s.row for s in seqs]
        n = len(rows)
        if self.device.type == "cpu":  # from the same device state, so the engine's overlap runs here too
            index = self._tensor(rows)
            logits = self.decoder.forward(self._cpu_decode_batch(index))
            tokens = self._advance_rows(logits, index, self.sampler.top_k_bound(rows))
            return Launched(seqs, tokens, None, started, tokens.tolist())
        captured = bool(self.graphs) and self.sampler.capturable(rows)
        bucket = next(b for b in self.buckets if b >= n) if captured else n
        parity, self._parity = self._parity, 1 - self._parity
        if self._batch != (bucket, tuple(rows)):
            staged = self._index_host[parity]
            staged[:n] = torch.tensor(rows)
            staged[n:bucket] = self.pad_row
            self._index[:bucket].copy_(staged[:bucket], non_blocking=True)
            self._batch = (bucket, tuple(rows))
        if captured:
            graph, output = self.graphs[bucket]
            graph.replay()
        else:
            output = self._decode_rows(bucket, self.sampler.top_k_bound(rows))
        host = self._tokens_host[parity]
        host[:bucket].copy_(output[:bucket], non_blocking=True)
        done = self._events[parity]
        assert done is not None  # a CUDA device: the CPU ran its step above
        done.record()
        return Launched(seqs, host, done, started)

    def collect(self, launched: Launched) -> list[int]:
        """The tokens of a launched decoding step, once the GPU has them."""
        if launched.tokens is None:
            assert launched.done is not None  # launched on a CUDA device (the CPU's steps carry their tokens)
            launched.done.synchronize()
            launched.tokens = launched.host[: len(launched.seqs)].tolist()
        now = time.perf_counter()
        self.stats.steps["decode"] += 1
        self.stats.max_in_flight_seen = max(self.stats.max_in_flight_seen, len(launched.seqs))
        self.stats.step_s["decode"] += now - max(launched.started, self._last_collect)
        self._last_collect = now
        return launched.tokens

    def _advance_rows(self, logits: torch.Tensor, index: torch.Tensor, top_k_bound: int) -> torch.Tensor:
        """Sample each row's next token and advance its state: the next step feeds it at the next position."""
        tokens = self.sampler.sample(logits, index, top_k_bound)
        self.state[0, index] = tokens
        self.state[1].index_add_(0, index, self._ones[: index.shape[0]])  # one kernel where `+= 1` takes three
        return tokens

    def _tensor(self, values: list, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def _cpu_decode_batch(self, index: torch.Tensor) -> Batch:
        """The CPU's decoding batch, with the per-segment spans its exact attention calls need."""
        _, positions, starts = self.state[:, index]
        spans = [
            (i, 1, start, position + 1) for i, (start, position) in enumerate(zip(starts.tolist(), positions.tolist()))
        ]
        return self._decode_batch(index, max(span[3] for span in spans), spans)

    def _decode_batch(self, index: torch.Tensor, max_kv: int, spans: list | None = None) -> Batch:
        """One new token for each row of `index`, from the rows' device state (what they fed last, where)."""
        rows = index.shape[0]
        tokens, positions, starts = self.state[:, index]
        return Batch(
            input_ids=tokens,
            positions=positions,
            write_index=starts + positions,
            query_starts=self._arange32[: rows + 1],
            kv_starts=torch.cat([starts, starts[:1]]).int(),
            kv_lengths=(positions + 1).int(),
            logits_index=self._arange[:rows],
            max_query=1,
            max_kv=max_kv,
            spans=spans,
        )

    def _decode_rows(self, rows: int, top_k_bound: int) -> torch.Tensor:
        """The whole decoding step over the first `rows` entries of the index buffer, from the rows' device state:
        the forward, the sampling, the state's advance; fixed shapes, graph-capturable. The sampled tokens [rows]."""
        index = self._index[:rows]
        logits = self.decoder.forward(self._decode_batch(index, self.plan.max_seq_tokens))
        sampled = self._advance_rows(logits, index, top_k_bound)
        self.state[:, self.pad_row] = 0  # padding rows keep reading and writing the arena's reserved row
        return sampled

    # -- start-up ----------------------------------------------------------------------------------------------
    def capture_graphs(self) -> float:
        """A CUDA graph per prefill token bucket (with FlashAttention) and per decoding batch-size bucket, largest
        first so smaller ones reuse its pool; seconds taken. A failure other than out-of-memory leaves those steps
        eager (decoding also uncompiled), with the reason logged."""
        if self.device.type != "cuda" or not self.plan.cuda_graphs:
            return 0.0
        started = time.perf_counter()
        try:
            self._capture()
        except torch.OutOfMemoryError:
            raise
        except Exception as exc:  # graphs are a speed-up; serving goes on without them
            log.exception("capturing CUDA graphs failed; decoding runs eagerly")
            self.graphs.clear()
            if self.prefill_graphs is not None:
                self.prefill_graphs.graphs.clear()
            self.decoder.uncompile()
            self.sampler.kernels = False
            self.graph_error = f"{type(exc).__name__}: {exc}"[:300]
        torch.cuda.synchronize()
        return time.perf_counter() - started

    @torch.inference_mode()
    def _capture(self) -> None:
        pool = None
        if self.prefill_graphs is not None:
            try:
                pool = self.prefill_graphs.capture()
            except torch.OutOfMemoryError:
                raise
            except Exception as exc:  # prefill steps then run eagerly, as before; decoding is captured still
                log.exception("capturing the prefill graphs failed; prefill steps run eagerly")
                self.prefill_graphs.graphs.clear()
                self.graph_error = f"prefill: {type(exc).__name__}: {exc}"[:300]
                pool = None
        self._index.fill_(self.pad_row)  # every row of the capture is padding
        self._batch = None
        for rows in sorted(self.buckets, reverse=True):
            self._decode_rows(rows, CAPTURED_TOP_K)  # compiles the fused functions for this shape, outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                output = self._decode_rows(rows, CAPTURED_TOP_K)
            pool = graph.pool()
            self.graphs[rows] = (graph, output)

    def warm_up(self) -> dict:
        """Prove the memory plan before the first request: a full prefill step and sampling for every row (the
        graphs already ran every decoding batch size). Out-of-memory propagates to the caller, who shrinks."""
        started = time.perf_counter()
        plan = self.plan
        vocab = min(self.loaded.config.vocab_size, self.loaded.pad_id)
        generator = torch.Generator().manual_seed(0)
        budget = min(plan.prefill_tokens, plan.kv_tokens - 1) if self.device.type == "cuda" else 16
        chunks: list[Chunk] = []
        start = 1
        while budget > 0 and len(chunks) < plan.max_in_flight:
            length = min(budget, plan.max_seq_tokens - 1)
            seq = Sequence(
                Request(
                    id=0, prompt_ids=torch.randint(0, vocab, (length,), generator=generator).tolist(), max_new_tokens=1
                )
            )
            seq.row, seq.kv_start = len(chunks), start
            chunks.append(Chunk(seq, 0, length))
            start, budget = start + length, budget - length
        self.prefill(chunks)
        if self.prefill_captured:  # a step no graph fits (a wide top-k) runs eagerly beside the graphs' memory
            self.prefill(chunks, eager=True)
        rows = plan.max_in_flight if self.device.type == "cuda" else min(2, plan.max_in_flight)
        with torch.inference_mode():
            logits = torch.randn(rows, self.loaded.config.vocab_size, device=self.device)
            self.sampler.sample(logits, self._arange[:rows], CAPTURED_TOP_K)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.stats = RunnerStats()
        return {
            "prefill_tokens": sum(c.length for c in chunks),
            "rows": rows,
            "seconds": round(time.perf_counter() - started, 3),
        }
