"""A checkpoint's shape, read from its config, and what it costs: bytes of weights per weight format, bytes of KV
cache per token, and the scratch beside them (prefill activations, per-row sampling, fixed overheads).

A Mixture of Experts (hy_v3, Hy-MT2-30B-A3B) holds every expert in memory, so its weights are counted whole; a
token reads only its chosen experts, which matters for speed, not for the memory plan. bitsandbytes (NF4, LLM.int8)
quantizes linear layers only: the experts, stacked in three-dimensional tensors, stay 16-bit under those formats."""

from __future__ import annotations

from dataclasses import dataclass

from .. import fp8_checkpoint
from ..tiers import KvCache, Tier

# CUDA graph pool for decoding, cuBLAS workspaces, compiled kernels, rotary tables: measured well under this.
FIXED_OVERHEAD_BYTES = 384 * 1024**2


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tied_embeddings: bool
    # A checkpoint quantized ahead of time (GPTQ/AWQ, Tencent's FP8): its weights keep that format whatever the tier.
    quantized_bits: int | None = None
    quantized_format: str | None = None  # e.g. "gptq-int4", "compressed-tensors-fp8"
    # A Mixture of Experts: the routed experts of each MoE layer, their width, how many a token takes, the shared
    # experts beside them (of the same width); its first `dense_layers` layers have a dense MLP of intermediate_size.
    num_experts: int = 0
    experts_per_token: int = 0
    expert_intermediate_size: int = 0
    num_shared_experts: int = 0
    dense_layers: int | None = None  # None: every layer (a dense model)

    @classmethod
    def from_config(cls, config) -> ModelShape:
        heads = config.num_attention_heads
        quant = getattr(config, "quantization_config", None)
        bits = _get(quant, "bits") if quant else None
        quantized_format = f"{_get(quant, 'quant_method')}-int{bits}" if bits else None
        if fp8_checkpoint.is_fp8(quant):
            bits, quantized_format = 8, fp8_checkpoint.FORMAT
        experts = getattr(config, "num_experts", None) or 0
        moe = (
            dict(
                num_experts=experts,
                experts_per_token=config.num_experts_per_tok,
                expert_intermediate_size=config.moe_intermediate_size,
                num_shared_experts=config.num_shared_experts or 0,
                dense_layers=list(config.mlp_layer_types).count("dense"),
            )
            if experts
            else {}
        )
        return cls(
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_layers=config.num_hidden_layers,
            num_heads=heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            vocab_size=config.vocab_size,
            tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            quantized_bits=int(bits) if bits else None,
            quantized_format=quantized_format,
            **moe,
        )

    @property
    def moe_layers(self) -> int:
        return 0 if self.dense_layers is None else self.num_layers - self.dense_layers

    @property
    def linear_params(self) -> int:
        """Parameters of the decoder's linear layers (the routed experts apart): the ones weight quantization
        shrinks. The shared experts are linear layers of their own."""
        h, q, kv = self.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h
        dense = self.num_layers - self.moe_layers
        shared = 3 * h * self.expert_intermediate_size * self.num_shared_experts
        return self.num_layers * attention + dense * 3 * h * self.intermediate_size + self.moe_layers * shared

    @property
    def expert_params(self) -> int:
        """Parameters of the routed experts, every one of them (0 for a dense model)."""
        return self.moe_layers * self.num_experts * 3 * self.hidden_size * self.expert_intermediate_size

    @property
    def linear_rows(self) -> int:
        """Output rows of the decoder's linear layers: each has its own scale in FP8."""
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return self.num_layers * (q + 2 * kv + self.hidden_size + 2 * self.intermediate_size + self.hidden_size)

    @property
    def other_params(self) -> int:
        """Embeddings, output head, norms and routers: kept in 16 bits by every tier."""
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        norms = self.num_layers * (2 * self.hidden_size + 2 * self.head_dim) + self.hidden_size
        # Each router's weights and selection bias (float32: its few kilobytes are not worth a term of their own).
        routers = self.moe_layers * self.num_experts * (self.hidden_size + 1)
        return embeddings + norms + routers

    def serves(self, tier: Tier) -> bool:
        """Whether the tier can hold this checkpoint's weights: a 4-bit one only in a 4-bit tier (its own format in
        place of INT4 or NF4), an FP8 one only in an fp8 tier; any other in every tier but that a Mixture of Experts
        has no fp8 tier (its routed experts are not quantized to e4m3)."""
        if self.quantized_format == fp8_checkpoint.FORMAT:
            return tier.weights == "fp8"
        if self.num_experts and tier.weights == "fp8":
            return False
        return self.quantized_bits != 4 or tier.weights in ("int4", "nf4")

    def offered(self, tier: Tier) -> bool:
        """Whether the planner may pick the tier by itself for this checkpoint: a tier it picks for any (Tier.auto)
        that holds these weights, or one of the only tiers that hold a pre-quantized checkpoint's (Tencent's FP8)."""
        return self.serves(tier) and (tier.auto or self.quantized_format == fp8_checkpoint.FORMAT)

    def weight_bytes(self, weights: str) -> int:
        # NF4 with double quantization: 4 bits, an 8-bit absmax per 64 values, an fp32 scale per 256 absmaxes.
        # INT4: 4 bits and a 16-bit scale and zero point per group of 128. FP8: one byte and an fp32 scale per
        # output row (Tencent's per-tensor scales too, kept per row once q/k/v and gate/up are fused).
        per_linear = {
            "fp32": 4.0,
            "bf16": 2.0,
            "fp8": 1.0,
            "int8": 1.0 + 4.0 / self.hidden_size,
            "int4": 0.5 + 4 / 128,
            "nf4": 0.5 + 1 / 64 + 4 / (64 * 256),
        }[weights]
        per_other = 4.0 if weights == "fp32" else 2.0
        # The experts in 4 bits where the INT4 tier quantizes them (engine/experts_int4.py: groups of 128, a 16-bit
        # scale and minimum each, as the linear layers' INT4); bitsandbytes leaves them be.
        per_expert = per_other if weights in ("nf4", "int8") else per_linear
        # INT4 keeps the output head in 8 bits (engine/weights.py): with tied embeddings a copy beside the 16-bit
        # embeddings, which the 1.8B models' plan on a 4 GB card must count.
        tied_head = self.vocab_size * self.hidden_size if weights == "int4" and self.tied_embeddings else 0
        row_scales = 4 * self.linear_rows if weights == "fp8" else 0
        return (
            int(self.linear_params * per_linear + self.expert_params * per_expert + self.other_params * per_other)
            + tied_head
            + row_scales
        )

    def kv_bytes_per_token(self, kv_cache: KvCache) -> int:
        slots = 2 * self.num_layers * self.num_kv_heads
        if kv_cache == "int8":
            # int8 values plus one 16-bit scale per token and head, and one 16-bit layer to dequantize into
            return slots * (self.head_dim + 2) + 2 * self.num_kv_heads * self.head_dim * 2
        return slots * self.head_dim * (4 if kv_cache == "fp32" else 2)

    def activation_bytes_per_token(self) -> int:
        """Peak activations per batch token during prefill (hidden states, attention, the MLP's two halves); in a
        Mixture of Experts layer, the router's float32 scores and each chosen expert's gate/up output and float32
        down output (kernels/moe.py), beside the shared expert's."""
        mlp = 3 * self.intermediate_size
        if self.num_experts:
            routed = self.experts_per_token * (2 * self.expert_intermediate_size + 2 * self.hidden_size)
            mlp = max(mlp, routed + 6 * self.num_experts + 3 * self.expert_intermediate_size * self.num_shared_experts)
        return 2 * (6 * self.hidden_size + mlp)

    def transient_bytes(self, weights: str, max_in_flight: int, prefill_tokens: int) -> int:
        """Scratch beside the weights and the KV cache: a prefill step's activations; per decoding row the logits
        in 16 bits, their float32 copies while sampling and the repetition-penalty bits; for NF4 and LLM.int8 one
        dequantized MLP matrix; for FP8 the prefill's widest input (the down projection's) quantized to one byte;
        fixed overheads."""
        sampling = max_in_flight * self.vocab_size * (2 + 5 * 4 + 1)
        dequant = 2 * self.hidden_size * self.intermediate_size if weights in ("nf4", "int8") else 0
        quantized_input = prefill_tokens * (self.intermediate_size + 4) if weights == "fp8" else 0
        return (
            prefill_tokens * self.activation_bytes_per_token()
            + sampling
            + dequant
            + quantized_input
            + FIXED_OVERHEAD_BYTES
        )


def _get(obj, key: str):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


# The shape of Hunyuan-MT-7B, which Chimera, HY-MT1.5-7B and Hy-MT2-7B share (Hy-MT2-7B's in no official repository:
# docs/models.md); used only when the checkpoint's config cannot be read yet (before a download, or `hymt profile
# --family`). Not the model family of the same name (hymt.family.HUNYUAN_MT_7B).
HUNYUAN_MT_7B_SHAPE = ModelShape(
    hidden_size=4096,
    intermediate_size=14336,
    num_layers=32,
    num_heads=32,
    num_kv_heads=8,
    head_dim=128,
    vocab_size=128167,
    tied_embeddings=False,
)
# The shape HY-MT1.5-1.8B and Hy-MT2-1.8B share, as their published checkpoints have it (no official repository
# states it: docs/models.md), for the same use.
HY_MT_1_8B_SHAPE = ModelShape(
    hidden_size=2048,
    intermediate_size=6144,
    num_layers=32,
    num_heads=16,
    num_kv_heads=4,
    head_dim=128,
    vocab_size=120818,
    tied_embeddings=True,
)
# Hy-MT2-30B-A3B (hy_v3), as NVIDIA NeMo's HyMT2Config gives its published config.json and Tencent's training script
# (--num_experts 128 --moe_topk 8 --moe_intermediate_size 768 --moe_layer_num_skipped 1 ...) confirms: 48 layers,
# the first dense, 128 routed experts of 768 and one shared, 8 per token; 32 query heads over 4 KV heads of 128;
# 120,832 tokens, untied. About 30.1 B parameters, 3.3 B of them used per token.
HY_MT2_30B_A3B_SHAPE = ModelShape(
    hidden_size=2048,
    intermediate_size=6912,
    num_layers=48,
    num_heads=32,
    num_kv_heads=4,
    head_dim=128,
    vocab_size=120832,
    tied_embeddings=False,
    num_experts=128,
    experts_per_token=8,
    expert_intermediate_size=768,
    num_shared_experts=1,
    dense_layers=1,
)
