"""Runs the scheduler's steps on the model: a prefill step (packed prompt chunks, and one token of each segment
riding along, eager) or a decoding step (one token per segment in flight), then per-row sampling.

On a GPU a decoding step replays a CUDA graph captured for the smallest batch-size bucket that holds the batch
(padding rows write to and read from the arena's reserved first row), so the hundreds of kernels of a 7B step are
launched at once instead of one by one from Python. Graphs are captured at start-up, largest first, in one shared
memory pool; capturing them is also the proof that decoding at every batch size fits in memory.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import torch

from ..prompts import Sampling
from .kvcache import KVArena
from .loader import Loaded
from .model import Batch, Decoder
from .sampler import Sampler
from .scheduler import Chunk, Sequence

log = logging.getLogger("hymt.runner")

BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256)


@dataclass
class RunnerStats:
    steps: dict = field(default_factory=lambda: {"prefill": 0, "decode": 0})
    tokens_in: int = 0  # prompt tokens prefilled (including those prefilled again after a preemption)
    tokens_out: int = 0
    segments: int = 0  # segments finished
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
    kv_cache: str  # "int8" or the model's dtype name
    cuda_graphs: bool
    compiled: bool


def attention_kind(device: torch.device, dtype: torch.dtype) -> str:
    """FlashAttention-2 runs on Ampere and later in 16 bits; everything else gathers."""
    if device.type == "cuda" and dtype in (torch.bfloat16, torch.float16) \
            and torch.cuda.get_device_capability(device) >= (8, 0):
        return "flash"
    return "dense"


class ModelRunner:
    def __init__(self, loaded: Loaded, plan: RunnerPlan):
        self.loaded = loaded
        self.plan = plan
        model = loaded.model
        config = loaded.config
        self.device = next(model.parameters()).device
        dtype = loaded.model.get_input_embeddings().weight.dtype
        self.attention = attention_kind(self.device, dtype)
        heads = config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        self.arena = KVArena(config.num_hidden_layers, plan.kv_tokens, config.num_key_value_heads, head_dim,
                             plan.kv_cache, dtype, self.device)
        self.decoder = Decoder(model, self.arena, self.attention, plan.compiled, plan.max_seq_tokens)
        self.sampler = Sampler(plan.max_in_flight, config.vocab_size, loaded.stop_ids, self.device)
        self.stats = RunnerStats()
        self.graphs: dict[int, tuple[torch.cuda.CUDAGraph, torch.Tensor]] = {}
        self.graph_error: str | None = None
        self.buckets = [b for b in BUCKETS if b < plan.max_in_flight] + [plan.max_in_flight]
        rows = plan.max_in_flight + 1
        # Decoding inputs, one column per row: token, position, arena row written, range start, cached length.
        self._host = torch.zeros((5, rows), dtype=torch.long, pin_memory=self.device.type == "cuda")
        self._inputs = torch.zeros((5, rows), dtype=torch.long, device=self.device)
        # A padding row: token 0 at position 0, written to and read from the arena's reserved first row.
        self._padding = torch.tensor([[0], [0], [0], [0], [1]], dtype=torch.long)
        self._arange = torch.arange(rows, device=self.device)
        # A PEFT model starts with its first adapter active (LoRA wrappers read it at every call).
        self._adapter = model.active_adapter if hasattr(model, "peft_config") else None

    def encode(self, prompt: str) -> list[int]:
        return self.loaded.tokenizer(prompt, add_special_tokens=False)["input_ids"]

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    # -- steps -------------------------------------------------------------------------------------------------
    def _use_adapter(self, name: str | None) -> None:
        """The step's LoRA adapter (the scheduler never mixes adapters in flight), or the base model for None."""
        model = self.loaded.model
        if not hasattr(model, "peft_config") or name == self._adapter:
            return
        if name is None:
            model.base_model.disable_adapter_layers()
        else:
            model.base_model.enable_adapter_layers()
            model.set_adapter(name)
        self._adapter = name

    @torch.inference_mode()
    def prefill(self, chunks: list[Chunk]) -> list[int | None]:
        """Run prompt chunks (and riding decoding rows); the next token for each chunk that ends its sequence, None
        for the others."""
        started = time.perf_counter()
        self._use_adapter(chunks[0].seq.adapter)
        ids, positions, write_index, query_starts, spans = [], [], [], [0], []
        for chunk in chunks:
            seq = chunk.seq
            if chunk.start == 0:
                self.sampler.reset_row(seq.row, seq.prompt_ids + seq.output_ids)
            span = range(chunk.start, chunk.start + chunk.length)
            ids += [seq.token(p) for p in span]
            positions += span
            write_index += [seq.kv_start + p for p in span]
            spans.append((query_starts[-1], chunk.length, seq.kv_start, chunk.start + chunk.length))
            query_starts.append(query_starts[-1] + chunk.length)
        sampling = [(i, c) for i, c in enumerate(chunks) if c.samples]
        batch = Batch(
            input_ids=self._tensor(ids), positions=self._tensor(positions),
            write_index=self._tensor(write_index),
            query_starts=self._tensor(query_starts, torch.int32),
            kv_starts=self._tensor([s[2] for s in spans] + [0], torch.int32),
            kv_lengths=self._tensor([s[3] for s in spans], torch.int32),
            logits_index=self._tensor([spans[i][0] + spans[i][1] - 1 for i, _ in sampling]),
            max_query=max(c.length for c in chunks), max_kv=max(s[3] for s in spans), spans=spans)
        logits = self.decoder.forward(batch)
        tokens: list[int | None] = [None] * len(chunks)
        if sampling:
            sampled = self._sample(logits, [c.seq for _, c in sampling])
            for (i, _), token in zip(sampling, sampled):
                tokens[i] = token
        self.stats.steps["prefill"] += 1
        self.stats.tokens_in += sum(c.length for c in chunks if not c.decoding)
        self.stats.step_s["prefill"] += time.perf_counter() - started
        return tokens

    @torch.inference_mode()
    def decode(self, seqs: list[Sequence]) -> list[int]:
        """One token for each segment, feeding each its last token."""
        started = time.perf_counter()
        self._use_adapter(seqs[0].adapter)
        n = len(seqs)
        columns = [[s.token(s.num_cached) for s in seqs], [s.num_cached for s in seqs],
                   [s.kv_start + s.num_cached for s in seqs], [s.kv_start for s in seqs],
                   [s.num_cached + 1 for s in seqs]]
        if self.device.type == "cpu":
            logits = self.decoder.forward(self._cpu_decode_batch(columns))
        else:
            rows = next((b for b in self.buckets if b >= n), n) if self.graphs else n
            self._host[:, :rows] = self._padding
            self._host[:, :n] = torch.tensor(columns, dtype=torch.long)
            self._inputs[:, :rows].copy_(self._host[:, :rows], non_blocking=True)
            if rows in self.graphs:
                graph, output = self.graphs[rows]
                graph.replay()
                logits = output[:n]
            else:
                logits = self._decode_rows(rows)[:n]
        tokens = self._sample(logits, seqs)
        self.stats.steps["decode"] += 1
        self.stats.max_in_flight_seen = max(self.stats.max_in_flight_seen, n)
        self.stats.step_s["decode"] += time.perf_counter() - started
        return tokens

    def _sample(self, logits: torch.Tensor, seqs: list[Sequence]) -> list[int]:
        tokens = self.sampler.sample(logits, [s.row for s in seqs], [s.sampling for s in seqs],
                                     [len(s.output_ids) < s.min_new_tokens for s in seqs]).tolist()
        self.stats.tokens_out += len(tokens)
        return tokens

    def _tensor(self, values: list, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.tensor(values, dtype=dtype, device=self.device)

    def _cpu_decode_batch(self, columns: list[list[int]]) -> Batch:
        n = len(columns[0])
        return Batch(input_ids=self._tensor(columns[0]), positions=self._tensor(columns[1]),
                     write_index=self._tensor(columns[2]), query_starts=self._arange[:n + 1].int(),
                     kv_starts=self._tensor(columns[3] + [0], torch.int32),
                     kv_lengths=self._tensor(columns[4], torch.int32), logits_index=self._arange[:n],
                     max_query=1, max_kv=max(columns[4]),
                     spans=[(i, 1, columns[3][i], columns[4][i]) for i in range(n)])

    def _decode_rows(self, rows: int) -> torch.Tensor:
        """The decoding forward over the first `rows` columns of the input buffer: fixed shapes, graph-capturable."""
        inputs = self._inputs
        return self.decoder.forward(Batch(
            input_ids=inputs[0, :rows], positions=inputs[1, :rows], write_index=inputs[2, :rows],
            query_starts=self._arange[:rows + 1].int(), kv_starts=inputs[3, :rows + 1].int(),
            kv_lengths=inputs[4, :rows].int(), logits_index=self._arange[:rows], max_query=1,
            max_kv=self.plan.max_seq_tokens))

    # -- start-up ----------------------------------------------------------------------------------------------
    def capture_graphs(self) -> float:
        """A CUDA graph per batch-size bucket, largest first so smaller ones reuse its pool; seconds taken. A
        failure other than out-of-memory leaves decoding eager (and uncompiled), with the reason logged."""
        if self.device.type != "cuda" or not self.plan.cuda_graphs:
            return 0.0
        started = time.perf_counter()
        try:
            self._capture()
        except torch.OutOfMemoryError:
            raise
        except Exception as exc:  # noqa: BLE001 - graphs are a speed-up; serving goes on without them
            log.exception("capturing CUDA graphs failed; decoding runs eagerly")
            self.graphs.clear()
            self.decoder.uncompile()
            self.graph_error = f"{type(exc).__name__}: {exc}"[:300]
        torch.cuda.synchronize()
        return time.perf_counter() - started

    @torch.inference_mode()
    def _capture(self) -> None:
        pool = None
        for rows in sorted(self.buckets, reverse=True):
            self._inputs.zero_()
            self._inputs[4] = 1
            self._decode_rows(rows)  # compiles the fused functions for this shape, outside the capture
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                output = self._decode_rows(rows)
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
        chunks, start = [], 1
        while budget > 0 and len(chunks) < plan.max_in_flight:
            length = min(budget, plan.max_seq_tokens - 1)
            seq = Sequence(prompt_ids=torch.randint(0, vocab, (length,), generator=generator).tolist(),
                           max_new_tokens=1, sampling=Sampling())
            seq.row, seq.kv_start = len(chunks), start
            chunks.append(Chunk(seq, 0, length))
            start, budget = start + length, budget - length
        self.prefill(chunks)
        rows = plan.max_in_flight if self.device.type == "cuda" else min(2, plan.max_in_flight)
        with torch.inference_mode():
            logits = torch.randn(rows, self.loaded.config.vocab_size, device=self.device)
            self.sampler.sample(logits, list(range(rows)), [Sampling()] * rows, [True] * rows)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.stats = RunnerStats()
        return {"prefill_tokens": sum(c.length for c in chunks), "rows": rows,
                "seconds": round(time.perf_counter() - started, 3)}
