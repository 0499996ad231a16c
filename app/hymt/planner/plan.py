"""The plan for one model on one card: the highest-fidelity tier that leaves room for the KV cache the settings
ask for, the KV arena (tokens and bytes) that is left, and the segments decoded together. Pure arithmetic over the
checkpoint's shape and the card's free memory; the engine's warm-up proves it."""

from __future__ import annotations

import dataclasses

from .. import cleanup
from ..errors import ConfigError, HymtError, ModelLoadError
from ..settings import Settings
from ..tiers import AUTO, CPU_TIER, TIERS, TIERS_BY_NAME, Tier, runs_on
from .decision import Decision, Numbers, TierBudget
from .gpu import CUDA_CONTEXT_BYTES, GIB, GpuMemory
from .shapes import ModelShape

ALLOCATOR_SLACK = 0.08  # share of the rest kept free for fragmentation in torch's caching allocator
CPU_KV_TOKENS = 16384
# Tokens of the official instruction and the chat template around a segment's text.
PROMPT_OVERHEAD_TOKENS = 64


def output_tokens(settings: Settings) -> int:
    """The output budget of the longest segment."""
    return cleanup.max_new_tokens(settings.max_segment_tokens, settings.max_new_tokens)


def segment_kv_tokens(settings: Settings) -> int:
    """The longest KV range one segment can need: its prompt and its whole output budget."""
    return PROMPT_OVERHEAD_TOKENS + settings.max_segment_tokens + output_tokens(settings)


def kv_budget(shape: ModelShape, tier: Tier, usable: int, max_in_flight: int, prefill_tokens: int) -> TierBudget:
    """How many KV tokens fit beside this tier's weights and scratch in `usable` bytes, and the numbers behind it."""
    weights = shape.weight_bytes(tier.weights)
    per_token = shape.kv_bytes_per_token(tier.kv_cache)
    transient = shape.transient_bytes(tier.weights, max_in_flight, prefill_tokens)
    left = usable - weights - transient
    tokens = left // per_token if left > 0 else 0
    return TierBudget(usable, weights, transient, per_token, tokens, in_flight(tokens, max_in_flight))


def cpu_numbers(settings: Settings) -> Numbers:
    """The CPU's: one tier, nothing to step down to, no CUDA context and no allocator's slack to keep."""
    return Numbers({}, settings.target_kv_tokens, 0, 0.0)


def in_flight(kv_tokens: int, max_in_flight: int) -> int:
    """Decoding rows for an arena: one per 64 tokens (a short sentence's prompt and budget) up to the setting."""
    return max(1, min(max_in_flight, kv_tokens // 64))


def plan(shape: ModelShape, gpu: GpuMemory | None, settings: Settings) -> Decision:
    """Pick the highest-fidelity tier this GPU runs that leaves `target_kv_tokens` of KV cache; else the tier
    leaving the most; else refuse. HYMT_PROFILE names a tier to use regardless (refused if it cannot fit one
    segment). The numbers of every tier are kept in the decision."""
    seq_tokens = segment_kv_tokens(settings)
    forced = settings.profile
    if gpu is None or forced == CPU_TIER.name:
        why = "forced by HYMT_PROFILE" if forced == CPU_TIER.name else "no NVIDIA GPU found: running on the CPU (slow)"
        tokens = max(settings.kv_cache_tokens or CPU_KV_TOKENS, seq_tokens + 1)
        return decision_at(
            CPU_TIER, tokens, tokens * shape.kv_bytes_per_token("fp32"), settings, why, None, cpu_numbers(settings)
        )

    usable = int((gpu.free_bytes - CUDA_CONTEXT_BYTES) * (1 - ALLOCATOR_SLACK))
    per_tier = {t.name: kv_budget(shape, t, usable, settings.max_in_flight, settings.prefill_tokens) for t in TIERS}
    numbers = Numbers(per_tier, settings.target_kv_tokens, CUDA_CONTEXT_BYTES, ALLOCATOR_SLACK)
    gib = gpu.free_bytes / GIB
    capability = f" (compute capability {'.'.join(map(str, gpu.compute_capability))})" if gpu.compute_capability else ""

    def settle_on(tier: Tier, why: str) -> Decision:
        budget = per_tier[tier.name]
        tokens = settings.kv_cache_tokens or budget.kv_cache_tokens
        return decision_at(
            tier, tokens, tokens * budget.kv_bytes_per_token, settings, why, gpu, numbers, shape.quantized_format
        )

    if forced != AUTO:
        tier = TIERS_BY_NAME.get(forced)
        if tier is None or tier is CPU_TIER:
            raise ConfigError(f"unknown profile {forced!r}")
        if not shape.serves(tier):
            raise ConfigError(
                f"profile {forced} cannot hold this checkpoint's {shape.quantized_format} weights: "
                f"{', '.join(t.name for t in TIERS if shape.serves(t))} can"
            )
        if not runs_on(tier, gpu.compute_capability):
            instead = _instead(tier, shape, gpu.compute_capability)
            raise HymtError(
                f"profile {forced} needs a GPU of compute capability {_version(tier.min_capability)} or "
                f"later{capability}" + (f": use {instead.name} instead" if instead else ""),
                error_type="does_not_fit",
            )
        if per_tier[tier.name].kv_cache_tokens <= seq_tokens:
            raise HymtError(
                f"profile {forced} does not fit in {gib:.1f} GiB: it needs "
                f"{_need_gib(shape, tier, settings, seq_tokens):.1f} GiB",
                error_type="does_not_fit",
            )
        return settle_on(tier, "forced by HYMT_PROFILE")

    candidates = [t for t in TIERS if shape.offered(t)]
    older = [t for t in candidates if not runs_on(t, gpu.compute_capability)]
    candidates = [t for t in candidates if runs_on(t, gpu.compute_capability)]
    note = _needs(older) + capability if older else ""
    if not candidates:  # an FP8 checkpoint on a GPU before Ada: not a matter of memory
        unquantized = dataclasses.replace(shape, quantized_bits=None, quantized_format=None)
        instead = _instead(older[0], unquantized, gpu.compute_capability)
        raise ModelLoadError(
            f"this checkpoint's {shape.quantized_format} weights need a GPU of compute capability "
            f"{_version(min(t.min_capability for t in older))} or later{capability}: serve its bf16 checkpoint"
            + (f" ({instead.name} runs on this GPU)" if instead else "")
        )
    for tier in candidates:
        if per_tier[tier.name].kv_cache_tokens >= settings.target_kv_tokens:
            return settle_on(
                tier,
                f"highest-fidelity tier leaving room for {settings.target_kv_tokens} KV tokens in {gib:.1f} GiB{note}",
            )
    best = max(candidates, key=lambda t: per_tier[t.name].kv_cache_tokens)
    fits = per_tier[best.name].kv_cache_tokens
    if fits > seq_tokens:
        return settle_on(
            best,
            f"no tier leaves room for {settings.target_kv_tokens} KV tokens in {gib:.1f} GiB; "
            f"{best.name} leaves the most ({fits}){note}",
        )
    smallest = min(candidates, key=lambda t: _need_gib(shape, t, settings, seq_tokens))
    raise HymtError(
        f"the model does not fit in {gib:.1f} GiB of free GPU memory: the smallest profile "
        f"({smallest.name}) needs about {_need_gib(shape, smallest, settings, seq_tokens):.1f} GiB{note}",
        error_type="does_not_fit",
    )


def _version(capability: tuple[int, int]) -> str:
    return ".".join(map(str, capability))


def _needs(tiers: list[Tier]) -> str:
    """What the tiers a GPU cannot run need: "; fp8, fp8-int8kv need compute capability 8.9 or later; ..."."""
    by_need: dict[tuple[int, int], list[str]] = {}
    for tier in tiers:
        by_need.setdefault(tier.min_capability, []).append(tier.name)
    return "".join(
        f"; {', '.join(names)} need{'s' if len(names) == 1 else ''} compute capability {_version(need)} or later"
        for need, names in sorted(by_need.items(), reverse=True)
    )


def _instead(tier: Tier, shape: ModelShape, capability: tuple[int, int] | None) -> Tier | None:
    """What to force in place of a tier this GPU cannot run: the next one down with the same KV cache that it runs."""
    return next(
        (
            t
            for t in TIERS[TIERS.index(tier) + 1 :]
            if t.kv_cache == tier.kv_cache and shape.offered(t) and runs_on(t, capability)
        ),
        None,
    )


def _need_gib(shape: ModelShape, tier: Tier, settings: Settings, seq_tokens: int) -> float:
    need = (
        shape.weight_bytes(tier.weights)
        + shape.transient_bytes(tier.weights, in_flight(seq_tokens, settings.max_in_flight), settings.prefill_tokens)
        + (seq_tokens + 1) * shape.kv_bytes_per_token(tier.kv_cache)
    ) / (1 - ALLOCATOR_SLACK) + CUDA_CONTEXT_BYTES
    return need / GIB


def decision_at(
    tier: Tier,
    kv_tokens: int,
    kv_bytes: int,
    settings: Settings,
    reason: str,
    gpu: GpuMemory | None,
    numbers: Numbers,
    weights: str | None = None,
) -> Decision:
    """The decision for a tier the planner settled on, with a KV arena of `kv_tokens` (`kv_bytes`)."""
    return Decision(
        profile=tier.name,
        weights=weights or tier.weights,
        kv_cache=tier.kv_cache,
        device=tier.device,
        kv_cache_tokens=kv_tokens,
        kv_cache_bytes=kv_bytes,
        max_in_flight=in_flight(kv_tokens, settings.max_in_flight),
        prefill_tokens=settings.prefill_tokens,
        max_seq_tokens=segment_kv_tokens(settings),
        reason=reason,
        gpu=gpu,
        numbers=numbers,
    )
