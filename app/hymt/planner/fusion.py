"""Quality "best": the fusion model (Hunyuan-MT-Chimera-7B) placed beside the translation model on one card, or
refused where both do not fit; its engine's settings, and the finer segments its prompts need."""

from __future__ import annotations

import dataclasses

from ..errors import ConfigError, HymtError
from ..settings import Settings
from ..tiers import CPU_TIER, TIERS, TIERS_BY_NAME, Tier, runs_on
from .decision import Decision, FusionPlan, Numbers
from .gpu import GIB, GpuMemory
from .plan import (
    ALLOCATOR_SLACK,
    PROMPT_OVERHEAD_TOKENS,
    cpu_numbers,
    decision_at,
    kv_budget,
    output_tokens,
    plan,
    segment_kv_tokens,
)
from .shapes import ModelShape

# Chimera's prompt holds the source and six candidates; a few such segments are fused together.
FUSION_IN_FLIGHT = 4
FUSION_TIERS = ("bf16", "fp8", "nf4", "nf4-int8kv")


def fusion_settings(settings: Settings) -> Settings:
    """The fusion engine's settings: its prompt holds the source segment and six candidates (each up to the
    translation's output budget of 3x the source + 16, cut to fit), and it answers with one translation."""
    if not settings.fusion_model:  # a decision file planned with one, read by a server started without it
        raise ConfigError("the decision places a fusion model, but HYMT_FUSION_MODEL is not set")
    return dataclasses.replace(
        settings,
        model=settings.fusion_model,
        max_segment_tokens=min(4096, 7 * settings.max_segment_tokens + 128),
        max_new_tokens=output_tokens(settings),
        max_in_flight=FUSION_IN_FLIGHT,
        kv_cache_tokens=None,
        glossaries=None,
        adapters=None,
        fusion_model=None,
        model_family="auto",
    )


def best_segment_tokens(settings: Settings, fusion_max_seq_tokens: int) -> int:
    """Quality best splits texts finer, so that a segment's fusion prompt (the source, six candidates of about
    twice its tokens, and the template) and its output fit the fusion engine's longest KV range."""
    return max(16, min(settings.max_segment_tokens, (fusion_max_seq_tokens - 2 * PROMPT_OVERHEAD_TOKENS) // 16))


def fusion_need_bytes(shape: ModelShape, tier: Tier, fusion: Settings) -> int:
    """GPU memory set aside for the fusion model at a tier: its weights, scratch and KV arena, with the allocator's
    slack."""
    return int(_fusion_bytes(shape, tier, fusion) / (1 - ALLOCATOR_SLACK))


def _fusion_bytes(shape: ModelShape, tier: Tier, fusion: Settings) -> int:
    """The fusion model's weights, scratch and a KV arena for FUSION_IN_FLIGHT segments at a tier."""
    return (
        shape.weight_bytes(tier.weights)
        + shape.transient_bytes(tier.weights, FUSION_IN_FLIGHT, fusion.prefill_tokens)
        + _kv_tokens(fusion) * shape.kv_bytes_per_token(tier.kv_cache)
    )


def _kv_tokens(fusion: Settings) -> int:
    return FUSION_IN_FLIGHT * segment_kv_tokens(fusion)


def _numbers(shape: ModelShape, tier: Tier, fusion: Settings) -> Numbers:
    """The fusion model's numbers in what is set aside for it at `tier` (less the allocator's slack; the CUDA
    context is the translation model's): each tier's budget there, which its start-up steps down through."""
    usable = _fusion_bytes(shape, tier, fusion)
    budgets = {t.name: kv_budget(shape, t, usable, FUSION_IN_FLIGHT, fusion.prefill_tokens) for t in TIERS}
    return Numbers(budgets, _kv_tokens(fusion), 0, ALLOCATOR_SLACK)


def plan_with_fusion(
    shape: ModelShape, fusion_shape: ModelShape, gpu: GpuMemory | None, settings: Settings
) -> Decision:
    """The translation model's plan with the fusion model resident beside it: for each fusion tier (highest
    fidelity first) the translation model is planned in what the fusion model leaves; the pair that keeps the
    translation model at its highest tier wins (then the one reaching HYMT_TARGET_KV_TOKENS, then the fusion
    model's fidelity). Where no pair fits, the translation model is planned alone and the mode is refused."""
    fusion = fusion_settings(settings)
    kv_tokens = _kv_tokens(fusion)
    if gpu is None or settings.profile == CPU_TIER.name:
        decision = plan(shape, gpu, settings)
        own = decision_at(
            CPU_TIER,
            kv_tokens,
            kv_tokens * fusion_shape.kv_bytes_per_token("fp32"),
            fusion,
            "beside the translation model in the computer's memory",
            None,
            cpu_numbers(fusion),
        )
        return decision.with_fusion(FusionPlan("resident", own, own.reason))
    options = []
    for name in FUSION_TIERS:
        tier = TIERS_BY_NAME[name]
        if not runs_on(tier, gpu.compute_capability) or not fusion_shape.offered(tier):
            continue
        need = fusion_need_bytes(fusion_shape, tier, fusion)
        try:
            decision = plan(shape, dataclasses.replace(gpu, free_bytes=gpu.free_bytes - need), settings)
        except HymtError:
            continue
        options.append(
            (
                TIERS.index(decision.tier),
                decision.kv_cache_tokens < settings.target_kv_tokens,
                FUSION_TIERS.index(name),
                decision,
                tier,
                need,
            )
        )
    if not options:
        decision = plan(shape, gpu, settings)
        served = [TIERS_BY_NAME[n] for n in FUSION_TIERS if fusion_shape.offered(TIERS_BY_NAME[n])]
        smallest = min(fusion_need_bytes(fusion_shape, t, fusion) for t in served) / GIB
        return decision.with_fusion(
            FusionPlan(
                "refused",
                reason=(
                    f"the fusion model (Hunyuan-MT-Chimera-7B) needs at least {smallest:.1f} GiB "
                    f"beside the translation model, and {gpu.free_bytes / GIB:.1f} GiB has no room for both"
                ),
            )
        )
    *_, decision, tier, need = min(options, key=lambda o: o[:3])
    reason = f"{tier.name} beside the translation model ({decision.profile}): {need / GIB:.1f} GiB set aside for it"
    own = decision_at(
        tier,
        kv_tokens,
        kv_tokens * fusion_shape.kv_bytes_per_token(tier.kv_cache),
        fusion,
        reason,
        gpu,
        _numbers(fusion_shape, tier, fusion),
        fusion_shape.quantized_format,
    )
    beside = f"; with the fusion model resident ({need / GIB:.1f} GiB set aside)"
    return dataclasses.replace(decision, reason=decision.reason + beside, fusion=FusionPlan("resident", own, reason))
