"""The decoder's forward pass for continuous batching, over the loaded transformers modules (so their weights,
quantized linear layers and LoRA wrappers serve as loaded): tokens of many segments packed in one row, each
segment's keys and values in its own range of the KV arena.

Attention, by what the GPU and the cache allow:
- "flash": FlashAttention-2's varlen kernel (through torch) reads each segment's range in place, given its start
  and length (an INT8 arena is dequantized a layer at a time first); GPUs from Ampere on.
- "dense": each segment's keys gathered from the arena (dequantized for the INT8 cache) into torch's SDPA. On the
  CPU segment by segment, with the exact calls transformers makes, so greedy output equals `generate`'s; on a GPU
  one padded, masked call for the whole decoding batch, so the step can be captured in a CUDA graph.

Where the weights were fused (weights.py), q, k and v come from one matmul and the gate and up halves from another.
The element-wise pieces (RMSNorm, rotary embedding with the Q/K norms, SiLU gate) are small functions with
transformers' own arithmetic; on a GPU they are compiled with torch.compile, which fuses each into one kernel.
Where Triton is present on a GPU (engine/kernels/), the rotary embedding, the Q/K norms and the arena write are
one kernel per layer, for a decoding batch together with its attention (reading an INT8 arena as stored).

Two architectures: the dense Hunyuan models (HunYuanDenseV1: Q/K norms `query_layernorm`/`key_layernorm`, after the
rotary embedding) and hy_v3 (Hy-MT2-30B-A3B: `q_norm`/`k_norm` before it; its first layer a dense MLP, the others a
Mixture of Experts, moe.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..family import MOE_MODEL_TYPE
from . import fp8, kernels
from .kvcache import KVArena
from .moe import MoE, is_moe


@dataclass
class Batch:
    """One forward pass: T packed tokens of n segments.

    input_ids, positions, write_index: [T]; query_starts: [n + 1] (int32, cumulative query lengths);
    kv_starts: [n + 1] (int32, each segment's first arena row; the last entry is unused); kv_lengths: [n] (int32,
    cached tokens including this pass's); logits_index: [m] (the packed tokens whose next-token logits are wanted;
    a GPU's decoding batch wants every one).
    `spans` (host lists: query start, query length, kv start, kv length per segment) drives the CPU path; None for
    a decoding batch on a GPU, whose shapes stay fixed for CUDA graph capture.
    """

    input_ids: torch.Tensor
    positions: torch.Tensor
    write_index: torch.Tensor
    query_starts: torch.Tensor
    kv_starts: torch.Tensor
    kv_lengths: torch.Tensor
    logits_index: torch.Tensor
    max_query: int
    max_kv: int
    spans: list[tuple[int, int, int, int]] | None = None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dtype = x.dtype
    x = x.to(torch.float32)
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return weight * x.to(dtype)


def add_rms_norm(
    hidden: torch.Tensor,
    delta: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The residual sum and its RMSNorm (one kernel when compiled, where the sum alone took one of its own)."""
    hidden = hidden + delta
    return hidden, rms_norm(hidden, weight, eps)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_qk_norm(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q [T, heads, D], k [T, kv_heads, D], cos/sin [T, D]: rotary embedding, then the per-head RMSNorm (the dense
    Hunyuan models normalise after rotating)."""
    cos, sin = cos[:, None, :], sin[:, None, :]
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    return rms_norm(q, q_weight, eps), rms_norm(k, k_weight, eps)


def qk_norm_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_weight: torch.Tensor,
    k_weight: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """As rope_qk_norm in hy_v3's order: the per-head RMSNorm, then the rotary embedding."""
    q, k = rms_norm(q, q_weight, eps), rms_norm(k, k_weight, eps)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def qk_norms(attn) -> tuple[torch.Tensor, torch.Tensor]:
    """An attention module's per-head Q and K norm weights, under either architecture's names."""
    if hasattr(attn, "q_norm"):
        return attn.q_norm.weight, attn.k_norm.weight
    return attn.query_layernorm.weight, attn.key_layernorm.weight


def dense_mlp(mlp):
    """A layer's dense MLP: itself, or a Mixture of Experts' shared expert."""
    return mlp.shared_experts if is_moe(mlp) else mlp


# A decoder layer's projections as the fast paths hold them, fused: (owner, fused name, parts). weights.fuse joins
# the first two in 16 bits; the int4 and fp8 profiles make all four.
PROJECTIONS = (
    ("self_attn", "qkv_proj", ("q_proj", "k_proj", "v_proj")),
    ("mlp", "gate_up_proj", ("gate_proj", "up_proj")),
    ("self_attn", "o_proj", ("o_proj",)),
    ("mlp", "down_proj", ("down_proj",)),
)


def owner_path(layer, owner: str) -> str:
    """Where PROJECTIONS' `owner` is in `layer`: its attention, or its dense MLP (a Mixture of Experts' shared
    expert)."""
    return "mlp.shared_experts" if owner == "mlp" and is_moe(layer.mlp) else owner


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


class Decoder:
    def __init__(self, model, arena: KVArena, attention: str, compiled: bool, max_positions: int):
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        config = base.config
        self.embed, self.layers, self.norm = base.model.embed_tokens, base.model.layers, base.model.norm
        self.fp8 = [m for m in self.layers.modules() if isinstance(m, fp8.Fp8Linear)]  # the fp8 tiers' layers
        self.lm_head = base.lm_head
        self.arena = arena
        self.attention = attention
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.num_heads
        self.eps = config.rms_norm_eps
        self.scale = self.head_dim**-0.5
        self.norm_first = config.model_type == MOE_MODEL_TYPE  # hy_v3 normalises q and k before rotating them
        self.moe = MoE(config) if any(is_moe(layer.mlp) for layer in self.layers) else None
        self.qkv_sizes = [self.num_heads * self.head_dim] + [self.num_kv_heads * self.head_dim] * 2
        self.device = self.embed.weight.device
        self.dtype = self.embed.weight.dtype
        # cos/sin per position, computed as transformers' rotary module does (float32 angles, then the model dtype).
        rotary = base.model.rotary_emb
        angles = (
            torch.arange(max_positions, device=self.device, dtype=torch.float32)[:, None]
            * rotary.inv_freq.to(self.device, torch.float32)[None, :]
        )
        angles = torch.cat((angles, angles), dim=-1)
        self.cos = (angles.cos() * rotary.attention_scaling).to(self.dtype)
        self.sin = (angles.sin() * rotary.attention_scaling).to(self.dtype)
        self.uncompile()
        if compiled:  # one call each, so that each keeps its function's signature for mypy
            self.rms_norm = torch.compile(rms_norm, dynamic=True)
            self.add_rms_norm = torch.compile(add_rms_norm, dynamic=True)
            self.rope_qk_norm = torch.compile(qk_norm_rope if self.norm_first else rope_qk_norm, dynamic=True)
            self.silu_mul = torch.compile(silu_mul, dynamic=True)
            arena.compile()
        self.kernels = kernels.AVAILABLE and self.device.type == "cuda"
        if self.kernels:
            kernels.enable_pdl(self.device)
        # The split decoding attention's arrival counters (kernels/attention.py), zeros between its calls.
        self.arrived = torch.zeros(kernels.PROGRAMS, dtype=torch.int32, device=self.device)
        # Weight shape -> (matvec configuration, its us, cuBLAS's us) where the Triton matvec wins at one row; the
        # down projection's gated where it reads the gate/up output as it comes.
        gated = frozenset(
            tuple(dense_mlp(layer.mlp).down_proj.weight.shape)
            for layer in self.layers
            if hasattr(dense_mlp(layer.mlp), "gate_up_proj")
        )
        self.matvec = (
            kernels.tune_matvec([m.weight for m in self._linears()], gated, self.silu_mul) if self.kernels else {}
        )
        fp8.use_kernels(self.fp8, self.kernels, self.dtype)

    def uncompile(self) -> None:
        """torch's eager path throughout (where capturing the decoding graphs failed): nothing compiled, no Triton."""
        self.kernels, self.matvec = False, {}
        fp8.use_kernels(self.fp8, False, self.dtype)
        self.rms_norm, self.add_rms_norm, self.rope_qk_norm, self.silu_mul = (
            rms_norm,
            add_rms_norm,
            qk_norm_rope if self.norm_first else rope_qk_norm,
            silu_mul,
        )
        self.arena.uncompile()

    @torch.inference_mode()
    def forward(self, batch: Batch) -> torch.Tensor:
        """Next-token logits [m, vocab] for the tokens at batch.logits_index; keys and values written on the way."""
        tokens = batch.input_ids.shape[0]
        hidden = self.embed(batch.input_ids)
        cos, sin = (None, None) if self.kernels else (self.cos[batch.positions], self.sin[batch.positions])
        decoding = batch.spans is None  # a GPU's decoding batch: one query per segment
        add_rms_norm = kernels.add_rms_norm if self.kernels else self.add_rms_norm
        gather = None
        if self.attention == "dense" and not (decoding and self.kernels):  # the arena rows each segment reads
            gather = self._gather_plan(batch) if batch.spans is None else self._span_plan(batch.spans)
        x = self.rms_norm(hidden, self.layers[0].input_layernorm.weight, self.eps)
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            attn, mlp = layer.self_attn, layer.mlp
            q, k, v = self._qkv(attn, x)
            if decoding and self.kernels:  # rotation, norms, the arena's write and the attention: one kernel
                q_weight, k_weight = qk_norms(attn)
                out = kernels.decode_attention(
                    q,
                    k,
                    v,
                    self.cos,
                    self.sin,
                    batch.positions,
                    q_weight,
                    k_weight,
                    self.eps,
                    *self.arena.storage(i),
                    batch.kv_starts,
                    batch.kv_lengths,
                    self.scale,
                    self.arrived,
                    norm_first=self.norm_first,
                )
            else:
                q = self._rotate_and_store(i, attn, q, k, v, batch, cos, sin)
                out = self._attend(i, q, batch, gather)
            hidden, x = add_rms_norm(
                hidden,
                self._linear(attn.o_proj, out.reshape(tokens, self.num_heads * self.head_dim)),
                layer.post_attention_layernorm.weight,
                self.eps,
            )
            # The next layer's input norm rides with the sum; after the last layer, the final norm (over every
            # token: a norm is per token, and a decoding batch wants the logits of all of them, so no gather).
            norm = self.layers[i + 1].input_layernorm if i < last else self.norm
            if self.moe is not None and is_moe(mlp):
                residual = (hidden, norm.weight, self.eps)
                arrived = self.arrived if self.kernels else None
                hidden, x = self.moe.forward(mlp, x, self._mlp, residual, add_rms_norm, arrived)
            else:
                hidden, x = add_rms_norm(hidden, self._mlp(mlp, x), norm.weight, self.eps)
        return self._linear(self.lm_head, x if decoding else x[batch.logits_index])

    def _rotate_and_store(
        self,
        layer: int,
        attn,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        batch: Batch,
        cos: torch.Tensor | None,
        sin: torch.Tensor | None,
    ) -> torch.Tensor:
        """The rotated, normalised queries [T, heads, D]; the keys (rotated, normalised) and values written to the
        arena at batch.write_index."""
        q_weight, k_weight = qk_norms(attn)
        if self.kernels:
            return kernels.rope_norm_store(
                q,
                k,
                v,
                self.cos,
                self.sin,
                batch.positions,
                batch.write_index,
                q_weight,
                k_weight,
                self.eps,
                *self.arena.storage(layer),
                norm_first=self.norm_first,
            )
        assert cos is not None and sin is not None  # forward gathers them wherever the kernels do not rotate
        tokens = q.shape[0]
        q = q.view(tokens, self.num_heads, self.head_dim)
        k = k.view(tokens, self.num_kv_heads, self.head_dim)
        v = v.view(tokens, self.num_kv_heads, self.head_dim)
        q, k = self.rope_qk_norm(q, k, cos, sin, q_weight, k_weight, self.eps)
        self.arena.write(layer, batch.write_index, k, v)
        return q

    def _linears(self) -> list[torch.nn.Linear]:
        """The plain 16-bit linear layers one decoding step runs (fused where fused), the head included."""
        modules = [self.lm_head]
        for layer in self.layers:
            attn, mlp = layer.self_attn, dense_mlp(layer.mlp)
            # (a Mixture of Experts' shared expert has none where the 4-bit experts hold it)
            modules += [getattr(attn, "qkv_proj", None), attn.o_proj]
            modules += [getattr(mlp, "gate_up_proj", None), getattr(mlp, "down_proj", None)]
        return [m for m in modules if type(m) is torch.nn.Linear and m.weight.dtype in (torch.bfloat16, torch.float16)]

    def _tuned(self, module, x: torch.Tensor) -> dict | None:
        """The Triton matvec's configuration for module at input x, where x is one row and it wins there."""
        if x.shape[0] == 1 and self.matvec and type(module) is torch.nn.Linear:
            tuned = self.matvec.get(tuple(module.weight.shape))
            return tuned[0] if tuned is not None else None
        return None

    def _linear(self, module, x: torch.Tensor) -> torch.Tensor:
        """module(x), through the Triton matvec where x is one row and it wins for the weight's shape."""
        tuned = self._tuned(module, x)
        if tuned is not None and not tuned.get("gated"):
            return kernels.matvec(x, module.weight, **tuned)
        return module(x)

    def _qkv(self, attn, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The three projections, as one matmul where the weights were fused (see weights.py)."""
        if hasattr(attn, "qkv_proj"):
            return self._linear(attn.qkv_proj, x).split(self.qkv_sizes, dim=-1)
        return attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)

    def _mlp(self, mlp, x: torch.Tensor) -> torch.Tensor:
        """down(SiLU(gate(x)) * up(x)), gate and up as one matmul where fused; at one row the down projection may
        apply the SiLU itself (tune_matvec's `gated`)."""
        if not hasattr(mlp, "gate_up_proj"):
            return self._linear(mlp.down_proj, self.silu_mul(mlp.gate_proj(x), mlp.up_proj(x)))
        gate_up = self._linear(mlp.gate_up_proj, x)
        tuned = self._tuned(mlp.down_proj, x)
        if tuned is not None and tuned.get("gated"):
            return kernels.matvec(gate_up, mlp.down_proj.weight, **tuned)
        return self._linear(mlp.down_proj, self.silu_mul(*gate_up.chunk(2, dim=-1)))

    def _attend(self, layer: int, q: torch.Tensor, batch: Batch, gather) -> torch.Tensor:
        if self.attention == "flash":
            keys, values = self.arena.layer(layer)
            return torch.ops.aten._flash_attention_forward(
                q,
                keys,
                values,
                batch.query_starts,
                batch.kv_starts,
                batch.max_query,
                batch.max_kv,
                0.0,
                True,
                False,
                scale=self.scale,
                seqused_k=batch.kv_lengths,
            )[0]
        if batch.spans is None:
            return self._attend_padded(layer, q, *gather)
        return torch.cat(
            [
                self._attend_one(layer, q[qs : qs + ql], ql, index, mask)
                for (qs, ql, _, _), (index, mask) in zip(batch.spans, gather)
            ]
        )

    def _span_plan(self, spans: list[tuple[int, int, int, int]]) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
        """Per segment of a CPU batch: its arena rows, and the causal mask of a later prefill chunk (None when
        plain causal attention, or none, is right)."""
        plan = []
        for _, q_len, kv_start, kv_len in spans:
            mask = None
            if q_len != kv_len and q_len != 1:  # a later chunk of a prefill: causal from where the chunk starts
                mask = (
                    torch.arange(kv_len, device=self.device)[None, :]
                    <= torch.arange(kv_len - q_len, kv_len, device=self.device)[:, None]
                )
            plan.append((torch.arange(kv_start, kv_start + kv_len, device=self.device), mask))
        return plan

    def _attend_one(
        self, layer: int, q: torch.Tensor, q_len: int, index: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """One segment: q [q_len, heads, D] against its cached tokens at arena rows `index` (the last q_len are
        its own)."""
        keys, values = self.arena.read(layer, index)
        q, keys, values = (t.transpose(0, 1)[None] for t in (q, keys, values))  # [1, heads, tokens, D]
        if mask is None:
            out = F.scaled_dot_product_attention(
                q, keys, values, is_causal=q_len > 1, scale=self.scale, enable_gqa=True
            )
        else:
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=self.scale, enable_gqa=True)
        return out[0].transpose(0, 1)

    def _gather_plan(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """For a decoding batch (one query per segment): arena rows [n, max_kv] to gather and which are real."""
        n = batch.kv_lengths.shape[0]
        offsets = torch.arange(batch.max_kv, device=self.device)
        index = (batch.kv_starts[:n, None].long() + offsets[None, :]).clamp(max=self.arena.num_tokens - 1)
        return index, offsets[None, :] < batch.kv_lengths[:, None]

    def _attend_padded(self, layer: int, q: torch.Tensor, index: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        n = q.shape[0]
        keys, values = self.arena.read(layer, index)  # [n, max_kv, kv_heads, D]
        # One query per segment: its heads grouped under their shared KV head, as the query length.
        q = q.view(n, self.num_kv_heads, self.num_heads // self.num_kv_heads, self.head_dim)
        out = F.scaled_dot_product_attention(
            q, keys.transpose(1, 2), values.transpose(1, 2), attn_mask=valid[:, None, None, :], scale=self.scale
        )
        return out.reshape(n, self.num_heads, self.head_dim)
