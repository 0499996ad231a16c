"""The decision the server runs with: read from the entrypoint's decision file when there is one, else planned now
for the checkpoint's shape, the card this process sees and the fusion model, if any.

The one module of the planner above the engine: it reads the checkpoint's config through the engine's loader, so
that a checkpoint the loader would refuse is refused here, before anything starts."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

from ..errors import ConfigError
from ..family import CHIMERA_7B, Family, from_name, identify
from .decision import Decision, FusionPlan
from .fusion import plan_with_fusion
from .gpu import visible_gpu
from .plan import plan
from .shapes import HUNYUAN_MT_7B_SHAPE, ModelShape

log = logging.getLogger("hymt.planning")


def checkpoint_shape(model: str) -> tuple[ModelShape, str]:
    """The checkpoint's shape and where it was read; the built-in 7B shape while the checkpoint is not on disk."""
    from ..engine.loader import load_config

    path = Path(model).expanduser()
    if not path.is_dir():
        return HUNYUAN_MT_7B_SHAPE, "built-in Hunyuan-MT-7B shape (checkpoint not on disk yet)"
    return ModelShape.from_config(load_config(path)), str(path / "config.json")


def decision_for(settings) -> Decision:
    """The entrypoint's decision when its file is there; else the plan for this checkpoint on this card, with where
    quality best's fusion model runs."""
    if settings.decision_file and Path(settings.decision_file).is_file():
        try:
            decision = Decision.from_json(json.loads(Path(settings.decision_file).read_text()))
            log.info("using the decision in %s: %s", settings.decision_file, decision.profile)
            return decision
        except (ValueError, TypeError, AttributeError) as exc:
            raise ConfigError(f"cannot read decision file {settings.decision_file}: {exc}") from None
    shape, source = checkpoint_shape(settings.model)
    gpu = visible_gpu(settings.gpu_memory_gb)
    if _family(settings) is CHIMERA_7B:
        decision = plan(shape, gpu, settings).with_fusion(FusionPlan(
            "same", reason="the model served is Hunyuan-MT-Chimera-7B: it fuses the candidates itself"))
    elif settings.fusion_model:
        decision = plan_with_fusion(shape, checkpoint_shape(settings.fusion_model)[0], gpu, settings)
    else:
        decision = plan(shape, gpu, settings).with_fusion(FusionPlan(
            "off", reason="no fusion model: set HYMT_FUSION_MODEL to a Hunyuan-MT-Chimera-7B checkpoint"))
    return dataclasses.replace(decision, numbers={**decision.numbers, "shape_source": source})


def _family(settings) -> Family | None:
    """The served model's family as far as planning can tell (the loader identifies it again from the files)."""
    path = Path(settings.model).expanduser()
    if path.is_dir() or settings.model_family != "auto":
        return identify(path, settings.model_family).family
    return from_name(settings.model)
