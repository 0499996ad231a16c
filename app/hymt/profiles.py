"""Memory profiles (what each tier stores in which format) and the planner that picks one for a card.

All sizes come from the checkpoint's config: bytes of weights per tier, bytes of KV cache per token per tier, and
an estimate of activations per batch token. The planner is pure arithmetic; the engine's warm-up proves it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .errors import ConfigError, HymtError
from .hardware import CUDA_CONTEXT_BYTES, GIB, GpuMemory


@dataclass(frozen=True)
class Tier:
    name: str
    weights: str  # "bf16", "int8", "nf4", "fp32"
    kv_cache: str  # "bf16", "int8", "fp32"
    device: str  # "cuda" or "cpu"
    auto: bool = True  # whether the planner may pick it by itself


# Highest fidelity first: the planner walks this order. LLM.int8 weights are slower than NF4 at batch 1 and larger,
# so the planner never picks them; they stay available by name (see the README's measurements).
TIERS: tuple[Tier, ...] = (
    Tier("bf16", "bf16", "bf16", "cuda"),
    Tier("bf16-int8kv", "bf16", "int8", "cuda"),
    Tier("int8", "int8", "bf16", "cuda", auto=False),
    Tier("nf4", "nf4", "bf16", "cuda"),
    Tier("nf4-int8kv", "nf4", "int8", "cuda"),
)
CPU_TIER = Tier("cpu", "fp32", "fp32", "cpu")
BY_NAME = {t.name: t for t in (*TIERS, CPU_TIER)}

ALLOCATOR_SLACK = 0.08  # share of the rest kept free for fragmentation in torch's caching allocator
MIN_BATCH_TOKENS = 512
MAX_BATCH_TOKENS = 65536
CPU_BATCH_TOKENS = 2048


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
        per_linear = {"fp32": 4.0, "bf16": 2.0, "int8": 1.0 + 4.0 / self.hidden_size,
                      "nf4": 0.5 + 1 / 64 + 4 / (64 * 256)}[weights]
        per_other = 4.0 if weights == "fp32" else 2.0
        return int(self.linear_params * per_linear + self.other_params * per_other)

    def kv_bytes_per_token(self, kv_cache: str) -> int:
        slots = 2 * self.num_layers * self.num_kv_heads
        if kv_cache == "int8":
            return slots * (self.head_dim + 2)  # int8 values plus one 16-bit scale per token and head
        return slots * self.head_dim * (4 if kv_cache == "fp32" else 2)

    def activation_bytes_per_token(self) -> int:
        """Peak activations per batch token during prefill (hidden states, attention, the MLP's two halves)."""
        return 2 * (6 * self.hidden_size + 3 * self.intermediate_size)

    def transient_bytes(self, weights: str, max_batch_size: int) -> int:
        """Fixed scratch: fp32 logits of the last position per sequence (and a copy for sampling), and for NF4
        one dequantized MLP matrix at a time."""
        logits = 2 * 4 * self.vocab_size * max_batch_size
        dequant = 2 * self.hidden_size * self.intermediate_size if weights in ("nf4", "int8") else 0
        return logits + dequant


def _get(obj, key: str):
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


@dataclass
class Decision:
    profile: str
    weights: str
    kv_cache: str
    device: str
    batch_tokens: int
    reason: str
    gpu: dict | None
    numbers: dict = field(default_factory=dict)

    @property
    def tier(self) -> Tier:
        return BY_NAME[self.profile]

    def to_json(self) -> dict:
        return asdict(self)

    def with_batch_tokens(self, batch_tokens: int, reason: str) -> "Decision":
        return Decision(**{**asdict(self), "batch_tokens": batch_tokens, "reason": reason})

    def with_tier(self, tier: Tier, batch_tokens: int, reason: str) -> "Decision":
        return Decision(**{**asdict(self), "profile": tier.name, "weights": tier.weights,
                           "kv_cache": tier.kv_cache, "batch_tokens": batch_tokens, "reason": reason})


def budget_tokens(shape: ModelShape, tier: Tier, gpu: GpuMemory, max_batch_size: int) -> tuple[int, dict]:
    """How many batch tokens fit beside this tier's weights on this card, and the numbers behind it."""
    usable = (gpu.free_bytes - CUDA_CONTEXT_BYTES) * (1 - ALLOCATOR_SLACK)
    weights = shape.weight_bytes(tier.weights)
    transient = shape.transient_bytes(tier.weights, max_batch_size)
    per_token = shape.kv_bytes_per_token(tier.kv_cache) + shape.activation_bytes_per_token()
    left = usable - weights - transient
    tokens = int(left // per_token) if left > 0 else 0
    return tokens, {"usable_bytes": int(usable), "weight_bytes": weights, "transient_bytes": transient,
                    "bytes_per_batch_token": per_token, "fits_batch_tokens": tokens}


def plan(shape: ModelShape, gpu: GpuMemory | None, *, forced: str = "auto", target_batch_tokens: int = 4096,
         max_batch_size: int = 32, batch_tokens: int | None = None) -> Decision:
    """Pick the highest-fidelity tier leaving room for `target_batch_tokens`; else the tier leaving the most room;
    else refuse. `forced` names a tier to use regardless (still refused if its weights cannot fit)."""
    if gpu is None or forced == "cpu":
        why = "forced by HYMT_PROFILE" if forced == "cpu" else "no NVIDIA GPU found: running on the CPU (slow)"
        return _decide(CPU_TIER, batch_tokens or CPU_BATCH_TOKENS, why, None, {})

    per_tier = {t.name: budget_tokens(shape, t, gpu, max_batch_size) for t in TIERS}
    numbers = {"tiers": {name: info for name, (_, info) in per_tier.items()},
               "target_batch_tokens": target_batch_tokens, "cuda_context_bytes": CUDA_CONTEXT_BYTES,
               "allocator_slack": ALLOCATOR_SLACK}
    gib = gpu.free_bytes / GIB

    if forced != "auto":
        tier = BY_NAME.get(forced)
        if tier is None or tier is CPU_TIER:
            raise ConfigError(f"unknown profile {forced!r}")
        fits = per_tier[tier.name][0]
        if fits < MIN_BATCH_TOKENS:
            raise HymtError(f"profile {forced} does not fit in {gib:.1f} GiB: it needs "
                            f"{_need_gib(shape, tier, max_batch_size):.1f} GiB", error_type="does_not_fit")
        return _decide(tier, _clamp(batch_tokens or fits), "forced by HYMT_PROFILE", gpu, numbers,
                       shape.quantized_format)

    # A 4-bit checkpoint can only be served as one of the 4-bit tiers (its own format instead of NF4).
    candidates = [t for t in TIERS if t.auto and (shape.quantized_bits != 4 or t.weights == "nf4")]
    for tier in candidates:
        fits = per_tier[tier.name][0]
        if fits >= target_batch_tokens:
            why = f"highest-fidelity tier leaving room for {target_batch_tokens} batch tokens in {gib:.1f} GiB"
            return _decide(tier, _clamp(batch_tokens or fits), why, gpu, numbers, shape.quantized_format)
    best = max(candidates, key=lambda t: per_tier[t.name][0])
    fits = per_tier[best.name][0]
    if fits >= MIN_BATCH_TOKENS:
        why = (f"no tier leaves room for {target_batch_tokens} batch tokens in {gib:.1f} GiB; "
               f"{best.name} leaves the most ({fits})")
        return _decide(best, _clamp(batch_tokens or fits), why, gpu, numbers, shape.quantized_format)
    smallest = min(candidates, key=lambda t: _need_gib(shape, t, max_batch_size))
    raise HymtError(f"the model does not fit in {gib:.1f} GiB of free GPU memory: the smallest profile "
                    f"({smallest.name}) needs about {_need_gib(shape, smallest, max_batch_size):.1f} GiB",
                    error_type="does_not_fit")


def _need_gib(shape: ModelShape, tier: Tier, max_batch_size: int) -> float:
    per_token = shape.kv_bytes_per_token(tier.kv_cache) + shape.activation_bytes_per_token()
    need = (shape.weight_bytes(tier.weights) + shape.transient_bytes(tier.weights, max_batch_size)
            + MIN_BATCH_TOKENS * per_token) / (1 - ALLOCATOR_SLACK) + CUDA_CONTEXT_BYTES
    return need / GIB


def _clamp(tokens: int) -> int:
    return max(MIN_BATCH_TOKENS, min(MAX_BATCH_TOKENS, tokens))


def _decide(tier: Tier, batch_tokens: int, reason: str, gpu: GpuMemory | None, numbers: dict,
            weights: str | None = None) -> Decision:
    return Decision(profile=tier.name, weights=weights or tier.weights, kv_cache=tier.kv_cache, device=tier.device,
                    batch_tokens=batch_tokens, reason=reason, gpu=gpu.to_json() if gpu else None, numbers=numbers)
