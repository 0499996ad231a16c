"""The decision the server runs with: read from the entrypoint's decision file when there is one, else planned now
for the checkpoint's shape, the card this process sees and the fusion model, if any.

It reads the checkpoint's config as the engine's loader does (hymt.checkpoint), so that a checkpoint the loader
would refuse is refused here, before anything starts."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from ..checkpoint import load_config
from ..errors import ConfigError, HymtError
from ..family import (
    CHIMERA_7B,
    HUNYUAN_MT_7B,
    HY_MT2_1_8B,
    HY_MT2_7B,
    HY_MT2_30B_A3B,
    HY_MT15_1_8B,
    Family,
    from_name,
    identify,
)
from ..settings import Settings
from .decision import Decision, FusionPlan
from .fusion import plan_with_fusion
from .gpu import GpuMemory, visible_gpu
from .plan import plan
from .shapes import HUNYUAN_MT_7B_SHAPE, HY_MT2_30B_A3B_SHAPE, HY_MT_1_8B_SHAPE, ModelShape

# Each size's published shape, planned before its checkpoint is on disk.
BUILT_IN_SHAPES = {
    HUNYUAN_MT_7B.size: HUNYUAN_MT_7B_SHAPE,
    HY_MT2_1_8B.size: HY_MT_1_8B_SHAPE,
    HY_MT2_30B_A3B.size: HY_MT2_30B_A3B_SHAPE,
}

log = logging.getLogger("hymt.planning")


def checkpoint_shape(model: str, family: Family | None = None) -> tuple[ModelShape, str]:
    """The checkpoint's shape and where it was read; while the checkpoint is not on disk (before a download, or
    `hymt profile --family` without one), the built-in shape of the model named."""
    path = Path(model).expanduser()
    if not path.is_dir():
        family = family or HUNYUAN_MT_7B
        return BUILT_IN_SHAPES[family.size], f"built-in {family.name} shape (no checkpoint on disk)"
    return ModelShape.from_config(load_config(path)), str(path / "config.json")


def decision_for(settings: Settings) -> Decision:
    """The entrypoint's decision when its file is there; else the plan for this checkpoint on this card, with where
    quality best's fusion model runs."""
    if settings.decision_file and Path(settings.decision_file).is_file():
        try:
            decision = Decision.from_json(json.loads(Path(settings.decision_file).read_text()))
            log.info("using the decision in %s: %s", settings.decision_file, decision.profile)
            return decision
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise ConfigError(f"cannot read decision file {settings.decision_file}: {exc}") from None
    # A checkpoint on disk is read (and refused, for an architecture hymt does not serve) before it is identified.
    named = None if Path(settings.model).expanduser().is_dir() else _family(settings)
    shape, source = checkpoint_shape(settings.model, named)
    family = named or _family(settings)
    gpu = visible_gpu(settings.gpu_memory_gb)
    try:
        if family is CHIMERA_7B:
            decision = plan(shape, gpu, settings).with_fusion(
                FusionPlan("same", reason="the model served is Hunyuan-MT-Chimera-7B: it fuses the candidates itself")
            )
        elif settings.fusion_model:
            fusion_shape = checkpoint_shape(settings.fusion_model, from_name(settings.fusion_model))[0]
            decision = plan_with_fusion(shape, fusion_shape, gpu, settings)
        else:
            decision = plan(shape, gpu, settings).with_fusion(
                FusionPlan("off", reason="no fusion model: set HYMT_FUSION_MODEL to a Hunyuan-MT-Chimera-7B checkpoint")
            )
    except HymtError as exc:
        raise _naming_smaller_models(exc, shape, gpu, settings) from None
    return dataclasses.replace(decision, numbers=dataclasses.replace(decision.numbers, shape_source=source))


def _naming_smaller_models(
    refused: HymtError, shape: ModelShape, gpu: GpuMemory | None, settings: Settings
) -> HymtError:
    """A larger model refused for want of memory: the refusal names the smaller ones that fit. A Mixture of Experts
    names Hy-MT2-7B (next to it in the published evaluation) and Hy-MT2-1.8B; a 7B model the 1.8B models."""
    if refused.error_type != "does_not_fit":
        return refused
    if shape.num_experts:
        return HymtError(
            f"{refused.message}; the smaller Hy-MT2 models, {HY_MT2_7B.license} as well: set HYMT_MODEL to "
            f"tencent/{HY_MT2_7B.name} (next to it in the published evaluation; "
            f"{_fitting(HUNYUAN_MT_7B_SHAPE, gpu, settings)}) or tencent/{HY_MT2_1_8B.name} "
            f"({_fitting(HY_MT_1_8B_SHAPE, gpu, settings)})",
            error_type="does_not_fit",
            status=refused.status,
        )
    if shape.weight_bytes("bf16") <= HY_MT_1_8B_SHAPE.weight_bytes("bf16"):
        return refused
    try:
        small = plan(HY_MT_1_8B_SHAPE, gpu, settings)
    except HymtError:
        return refused
    return HymtError(
        f"{refused.message}; a 1.8B model fits ({small.profile}): set HYMT_MODEL to "
        f"tencent/{HY_MT2_1_8B.name} ({HY_MT2_1_8B.license}) or tencent/{HY_MT15_1_8B.name}",
        error_type="does_not_fit",
        status=refused.status,
    )


def _family(settings: Settings) -> Family | None:
    """The served model's family as far as planning can tell (the loader identifies it again from the files)."""
    path = Path(settings.model).expanduser()
    if path.is_dir() or settings.model_family != "auto":
        return identify(path, settings.model_family).family
    return from_name(settings.model)


def _fitting(shape: ModelShape, gpu: GpuMemory | None, settings: Settings) -> str:
    """What a refusal says of a smaller model: the profile it gets on this card, or that it does not fit."""
    try:
        return f"it fits here as {plan(shape, gpu, settings).profile}"
    except HymtError:
        return "it does not fit here either"
