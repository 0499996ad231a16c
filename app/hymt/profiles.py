"""Memory profiles (what each tier stores in which format) and the planner that picks one for a card.

All sizes come from the checkpoint's config: bytes of weights per tier, bytes of KV cache per token per tier, and
scratch for prefill activations and per-row sampling. The planner turns what is left of the card into a KV arena
(tokens and bytes) and a number of segments decoded together; it is pure arithmetic, and the engine's warm-up
proves it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field

from . import cleanup
from .errors import ConfigError, HymtError
from .planner.gpu import CUDA_CONTEXT_BYTES, GIB, GpuMemory


@dataclass(frozen=True)
class Tier:
    name: str
    weights: str  # "bf16", "int4", "int8", "nf4", "fp32"
    kv_cache: str  # "bf16", "int8", "fp32"
    device: str  # "cuda" or "cpu"
    auto: bool = True  # whether the planner may pick it by itself
    min_capability: tuple[int, int] = (0, 0)  # the GPU generation its kernels need


# Highest fidelity first: the planner walks this order. INT4 (humming-kernels, Ampere and later) is the 4-bit
# tier: on an H200 its linear layers took 1.87 ms per decoding step at one row and 2.89 at 64, where bitsandbytes'
# NF4 took 3.5 and 12.0 (bench/results/kernels.json). NF4 serves the GPUs before Ampere, and stands in when
# humming's kernels cannot be built. LLM.int8 weights are slower than NF4 and larger: by name only.
AMPERE = (8, 0)
TIERS: tuple[Tier, ...] = (
    Tier("bf16", "bf16", "bf16", "cuda"),
    Tier("bf16-int8kv", "bf16", "int8", "cuda"),
    Tier("int4", "int4", "bf16", "cuda", min_capability=AMPERE),
    Tier("int4-int8kv", "int4", "int8", "cuda", min_capability=AMPERE),
    Tier("nf4", "nf4", "bf16", "cuda"),
    Tier("nf4-int8kv", "nf4", "int8", "cuda"),
    Tier("int8", "int8", "bf16", "cuda", auto=False),
)
CPU_TIER = Tier("cpu", "fp32", "fp32", "cpu")
BY_NAME = {t.name: t for t in (*TIERS, CPU_TIER)}

ALLOCATOR_SLACK = 0.08  # share of the rest kept free for fragmentation in torch's caching allocator
# CUDA graph pool for decoding, cuBLAS workspaces, compiled kernels, rotary tables: measured well under this.
FIXED_OVERHEAD_BYTES = 384 * 1024 ** 2
CPU_KV_TOKENS = 16384
# Tokens of the official instruction and the chat template around a segment's text.
PROMPT_OVERHEAD_TOKENS = 64


def _output_tokens(settings) -> int:
    """The output budget of the longest segment."""
    return cleanup.max_new_tokens(settings.max_segment_tokens, settings.max_new_tokens)


def segment_kv_tokens(settings) -> int:
    """The longest KV range one segment can need: its prompt and its whole output budget."""
    return PROMPT_OVERHEAD_TOKENS + settings.max_segment_tokens + _output_tokens(settings)


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
    # A checkpoint quantized ahead of time (GPTQ/AWQ): its weights keep that format whatever the tier.
    quantized_bits: int | None = None
    quantized_format: str | None = None  # e.g. "gptq-int4"

    @classmethod
    def from_config(cls, config) -> "ModelShape":
        heads = config.num_attention_heads
        quant = getattr(config, "quantization_config", None)
        bits = _get(quant, "bits") if quant else None
        return cls(
            hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
            num_layers=config.num_hidden_layers, num_heads=heads,
            num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
            head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
            vocab_size=config.vocab_size, tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)),
            quantized_bits=int(bits) if bits else None,
            quantized_format=f"{_get(quant, 'quant_method')}-int{bits}" if bits else None,
        )

    @property
    def linear_params(self) -> int:
        """Parameters of the decoder's linear layers: the ones weight quantization shrinks."""
        h, q, kv = self.hidden_size, self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        attention = h * q + 2 * h * kv + q * h
        mlp = 3 * h * self.intermediate_size
        return self.num_layers * (attention + mlp)

    @property
    def other_params(self) -> int:
        """Embeddings, output head and norms: kept in 16 bits by every tier."""
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tied_embeddings else 2)
        norms = self.num_layers * (2 * self.hidden_size + 2 * self.head_dim) + self.hidden_size
        return embeddings + norms

    def weight_bytes(self, weights: str) -> int:
        # NF4 with double quantization: 4 bits, an 8-bit absmax per 64 values, an fp32 scale per 256 absmaxes.
        # INT4: 4 bits and a 16-bit scale and zero point per group of 128.
        per_linear = {"fp32": 4.0, "bf16": 2.0, "int8": 1.0 + 4.0 / self.hidden_size, "int4": 0.5 + 4 / 128,
                      "nf4": 0.5 + 1 / 64 + 4 / (64 * 256)}[weights]
        per_other = 4.0 if weights == "fp32" else 2.0
        return int(self.linear_params * per_linear + self.other_params * per_other)

    def kv_bytes_per_token(self, kv_cache: str) -> int:
        slots = 2 * self.num_layers * self.num_kv_heads
        if kv_cache == "int8":
            # int8 values plus one 16-bit scale per token and head, and one 16-bit layer to dequantize into
            return slots * (self.head_dim + 2) + 2 * self.num_kv_heads * self.head_dim * 2
        return slots * self.head_dim * (4 if kv_cache == "fp32" else 2)

    def activation_bytes_per_token(self) -> int:
        """Peak activations per batch token during prefill (hidden states, attention, the MLP's two halves)."""
        return 2 * (6 * self.hidden_size + 3 * self.intermediate_size)

    def transient_bytes(self, weights: str, max_in_flight: int, prefill_tokens: int) -> int:
        """Scratch beside the weights and the KV cache: a prefill step's activations; per decoding row the logits
        in 16 bits, their float32 copies while sampling and the repetition-penalty bits; for NF4 and LLM.int8 one
        dequantized MLP matrix; fixed overheads."""
        sampling = max_in_flight * self.vocab_size * (2 + 5 * 4 + 1)
        dequant = 2 * self.hidden_size * self.intermediate_size if weights in ("nf4", "int8") else 0
        return prefill_tokens * self.activation_bytes_per_token() + sampling + dequant + FIXED_OVERHEAD_BYTES


def _get(obj, key: str):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


@dataclass
class Decision:
    profile: str
    weights: str
    kv_cache: str
    device: str
    kv_cache_tokens: int  # the KV arena, in tokens
    kv_cache_bytes: int
    max_in_flight: int  # segments decoded together at most
    prefill_tokens: int
    max_seq_tokens: int  # the longest KV range one segment holds
    reason: str
    gpu: dict | None
    numbers: dict = field(default_factory=dict)
    # Quality "best": where the fusion model (Chimera) runs: {"placement": "off" | "same" | "resident" | "refused",
    # "reason": ..., "decision": the fusion model's own Decision as JSON when resident}.
    fusion: dict = field(default_factory=dict)

    @property
    def tier(self) -> Tier:
        return BY_NAME[self.profile]

    def to_json(self) -> dict:
        return asdict(self)

    def allows(self, tier: Tier) -> bool:
        """Whether this GPU runs the tier's kernels."""
        return _runs_on(tier, (self.gpu or {}).get("compute_capability"))

    def with_kv_tokens(self, kv_tokens: int, max_in_flight: int, reason: str) -> "Decision":
        per_token = self.kv_cache_bytes // max(1, self.kv_cache_tokens)
        return Decision(**{**asdict(self), "kv_cache_tokens": kv_tokens, "kv_cache_bytes": kv_tokens * per_token,
                           "max_in_flight": max_in_flight, "reason": reason})

    def with_tier(self, tier: Tier, reason: str) -> "Decision":
        """The next tier down, with the KV arena the planner gave it."""
        info = self.numbers.get("tiers", {}).get(tier.name, {})
        kv_tokens = info.get("kv_cache_tokens", self.kv_cache_tokens)
        return Decision(**{**asdict(self), "profile": tier.name, "weights": tier.weights, "kv_cache": tier.kv_cache,
                           "kv_cache_tokens": kv_tokens,
                           "kv_cache_bytes": kv_tokens * info.get("kv_bytes_per_token", 0),
                           "max_in_flight": info.get("max_in_flight", self.max_in_flight), "reason": reason})


def kv_budget(shape: ModelShape, tier: Tier, gpu: GpuMemory, max_in_flight: int, prefill_tokens: int,
              ) -> dict:
    """How many KV tokens fit beside this tier's weights and scratch on this card, and the numbers behind it."""
    usable = (gpu.free_bytes - CUDA_CONTEXT_BYTES) * (1 - ALLOCATOR_SLACK)
    weights = shape.weight_bytes(tier.weights)
    per_token = shape.kv_bytes_per_token(tier.kv_cache)
    transient = shape.transient_bytes(tier.weights, max_in_flight, prefill_tokens)
    left = usable - weights - transient
    tokens = int(left // per_token) if left > 0 else 0
    return {"usable_bytes": int(usable), "weight_bytes": weights, "transient_bytes": transient,
            "kv_bytes_per_token": per_token, "kv_cache_tokens": tokens,
            "max_in_flight": in_flight(tokens, max_in_flight)}


def in_flight(kv_tokens: int, max_in_flight: int) -> int:
    """Decoding rows for an arena: one per 64 tokens (a short sentence's prompt and budget) up to the setting."""
    return max(1, min(max_in_flight, kv_tokens // 64))


def plan(shape: ModelShape, gpu: GpuMemory | None, settings) -> Decision:
    """Pick the highest-fidelity tier this GPU runs that leaves `target_kv_tokens` of KV cache; else the tier
    leaving the most; else refuse. HYMT_PROFILE names a tier to use regardless (refused if it cannot fit one
    segment). The numbers of every tier are kept in the decision."""
    seq_tokens = segment_kv_tokens(settings)
    forced = settings.profile
    if gpu is None or forced == "cpu":
        why = "forced by HYMT_PROFILE" if forced == "cpu" else "no NVIDIA GPU found: running on the CPU (slow)"
        tokens = max(settings.kv_cache_tokens or CPU_KV_TOKENS, seq_tokens + 1)
        return _decide(CPU_TIER, tokens, tokens * shape.kv_bytes_per_token("fp32"), settings, why, None, {})

    per_tier = {t.name: kv_budget(shape, t, gpu, settings.max_in_flight, settings.prefill_tokens) for t in TIERS}
    numbers = {"tiers": per_tier, "target_kv_tokens": settings.target_kv_tokens,
               "cuda_context_bytes": CUDA_CONTEXT_BYTES, "allocator_slack": ALLOCATOR_SLACK}
    gib = gpu.free_bytes / GIB
    capability = f" (compute capability {'.'.join(map(str, gpu.compute_capability))})" if gpu.compute_capability \
        else ""

    def decide(tier: Tier, why: str) -> Decision:
        info = per_tier[tier.name]
        tokens = settings.kv_cache_tokens or info["kv_cache_tokens"]
        return _decide(tier, tokens, tokens * info["kv_bytes_per_token"], settings, why, gpu, numbers,
                       shape.quantized_format)

    if forced != "auto":
        tier = BY_NAME.get(forced)
        if tier is None or tier is CPU_TIER:
            raise ConfigError(f"unknown profile {forced!r}")
        if not _runs_on(tier, gpu.compute_capability):
            raise HymtError(f"profile {forced} needs a GPU of compute capability "
                            f"{'.'.join(map(str, tier.min_capability))} or later{capability}",
                            error_type="does_not_fit")
        if per_tier[tier.name]["kv_cache_tokens"] <= seq_tokens:
            raise HymtError(f"profile {forced} does not fit in {gib:.1f} GiB: it needs "
                            f"{_need_gib(shape, tier, settings, seq_tokens):.1f} GiB", error_type="does_not_fit")
        return decide(tier, "forced by HYMT_PROFILE")

    # A 4-bit checkpoint can only be served as one of the 4-bit tiers (its own format instead of INT4 or NF4).
    candidates = [t for t in TIERS if t.auto and (shape.quantized_bits != 4 or t.weights in ("int4", "nf4"))]
    older = [t.name for t in candidates if not _runs_on(t, gpu.compute_capability)]
    candidates = [t for t in candidates if _runs_on(t, gpu.compute_capability)]
    note = f"; {', '.join(older)} need Ampere or later{capability}" if older else ""
    for tier in candidates:
        if per_tier[tier.name]["kv_cache_tokens"] >= settings.target_kv_tokens:
            return decide(tier, f"highest-fidelity tier leaving room for {settings.target_kv_tokens} KV tokens "
                                f"in {gib:.1f} GiB{note}")
    best = max(candidates, key=lambda t: per_tier[t.name]["kv_cache_tokens"])
    fits = per_tier[best.name]["kv_cache_tokens"]
    if fits > seq_tokens:
        return decide(best, f"no tier leaves room for {settings.target_kv_tokens} KV tokens in {gib:.1f} GiB; "
                            f"{best.name} leaves the most ({fits}){note}")
    smallest = min(candidates, key=lambda t: _need_gib(shape, t, settings, seq_tokens))
    raise HymtError(f"the model does not fit in {gib:.1f} GiB of free GPU memory: the smallest profile "
                    f"({smallest.name}) needs about {_need_gib(shape, smallest, settings, seq_tokens):.1f} GiB",
                    error_type="does_not_fit")


def _runs_on(tier: Tier, capability) -> bool:
    """An unknown GPU generation (None) is given the benefit of the doubt."""
    return capability is None or tuple(capability) >= tier.min_capability


def _need_gib(shape: ModelShape, tier: Tier, settings, seq_tokens: int) -> float:
    need = (shape.weight_bytes(tier.weights)
            + shape.transient_bytes(tier.weights, in_flight(seq_tokens, settings.max_in_flight),
                                    settings.prefill_tokens)
            + (seq_tokens + 1) * shape.kv_bytes_per_token(tier.kv_cache)) / (1 - ALLOCATOR_SLACK) + CUDA_CONTEXT_BYTES
    return need / GIB


def _decide(tier: Tier, kv_tokens: int, kv_bytes: int, settings, reason: str, gpu: GpuMemory | None,
            numbers: dict, weights: str | None = None) -> Decision:
    return Decision(profile=tier.name, weights=weights or tier.weights, kv_cache=tier.kv_cache, device=tier.device,
                    kv_cache_tokens=kv_tokens, kv_cache_bytes=kv_bytes,
                    max_in_flight=in_flight(kv_tokens, settings.max_in_flight), prefill_tokens=settings.prefill_tokens,
                    max_seq_tokens=segment_kv_tokens(settings), reason=reason,
                    gpu=gpu.to_json() if gpu else None, numbers=numbers)


# -- quality "best": the fusion model beside the translation model --------------------------------------------------
# Chimera's prompt holds the source and six candidates; a few such segments are fused together.
FUSION_IN_FLIGHT = 4
FUSION_TIERS = ("bf16", "nf4", "nf4-int8kv")


def fusion_settings(settings):
    """The fusion engine's settings: its prompt holds the source segment and six candidates (each up to the
    translation's output budget of 3x the source + 16, cut to fit), and it answers with one translation."""
    return dataclasses.replace(settings, model=settings.fusion_model,
                               max_segment_tokens=min(4096, 7 * settings.max_segment_tokens + 128),
                               max_new_tokens=_output_tokens(settings), max_in_flight=FUSION_IN_FLIGHT,
                               kv_cache_tokens=None, glossaries=None, adapters=None, fusion_model=None,
                               model_family="auto")


def best_segment_tokens(settings, fusion_max_seq_tokens: int) -> int:
    """Quality best splits texts finer, so that a segment's fusion prompt (the source, six candidates of about
    twice its tokens, and the template) and its output fit the fusion engine's longest KV range."""
    return max(16, min(settings.max_segment_tokens, (fusion_max_seq_tokens - 2 * PROMPT_OVERHEAD_TOKENS) // 16))


def fusion_need_bytes(shape: ModelShape, tier: Tier, fusion) -> int:
    """GPU memory for the fusion model at a tier: weights, scratch and a KV arena for FUSION_IN_FLIGHT segments,
    with the allocator's slack."""
    kv_tokens = FUSION_IN_FLIGHT * segment_kv_tokens(fusion)
    need = (shape.weight_bytes(tier.weights) + shape.transient_bytes(tier.weights, FUSION_IN_FLIGHT,
                                                                     fusion.prefill_tokens)
            + kv_tokens * shape.kv_bytes_per_token(tier.kv_cache))
    return int(need / (1 - ALLOCATOR_SLACK))


def plan_with_fusion(shape: ModelShape, fusion_shape: ModelShape, gpu: GpuMemory | None, settings) -> Decision:
    """The translation model's plan with the fusion model resident beside it: for each fusion tier (highest
    fidelity first) the translation model is planned in what the fusion model leaves; the pair that keeps the
    translation model at its highest tier wins (then the one reaching HYMT_TARGET_KV_TOKENS, then the fusion
    model's fidelity). Where no pair fits, the translation model is planned alone and the mode is refused."""
    fusion = fusion_settings(settings)
    kv_tokens = FUSION_IN_FLIGHT * segment_kv_tokens(fusion)
    if gpu is None or settings.profile == "cpu":
        decision = plan(shape, gpu, settings)
        own = _decide(CPU_TIER, kv_tokens, kv_tokens * fusion_shape.kv_bytes_per_token("fp32"), fusion,
                      "beside the translation model in the computer's memory", None, {})
        decision.fusion = {"placement": "resident", "reason": own.reason, "decision": own.to_json()}
        return decision
    options = []
    for name in FUSION_TIERS:
        tier = BY_NAME[name]
        if not _runs_on(tier, gpu.compute_capability) or (fusion_shape.quantized_bits == 4 and name == "bf16"):
            continue
        need = fusion_need_bytes(fusion_shape, tier, fusion)
        try:
            decision = plan(shape, dataclasses.replace(gpu, free_bytes=gpu.free_bytes - need), settings)
        except HymtError:
            continue
        options.append((TIERS.index(decision.tier), decision.kv_cache_tokens < settings.target_kv_tokens,
                        FUSION_TIERS.index(name), decision, tier, need))
    if not options:
        decision = plan(shape, gpu, settings)
        smallest = min(fusion_need_bytes(fusion_shape, BY_NAME[n], fusion) for n in FUSION_TIERS) / GIB
        decision.fusion = {"placement": "refused", "decision": None, "reason": (
            f"the fusion model (Hunyuan-MT-Chimera-7B) needs at least {smallest:.1f} GiB beside the translation "
            f"model, and {gpu.free_bytes / GIB:.1f} GiB has no room for both")}
        return decision
    *_, decision, tier, need = min(options, key=lambda o: o[:3])
    reason = (f"{tier.name} beside the translation model ({decision.profile}): {need / GIB:.1f} GiB set aside "
              f"for it")
    own = _decide(tier, kv_tokens, kv_tokens * fusion_shape.kv_bytes_per_token(tier.kv_cache), fusion, reason,
                  gpu, {}, fusion_shape.quantized_format)
    decision.reason += f"; with the fusion model resident ({need / GIB:.1f} GiB set aside)"
    decision.fusion = {"placement": "resident", "reason": reason, "decision": own.to_json()}
    return decision
