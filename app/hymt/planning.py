"""The decision the server runs with: read from the entrypoint's decision file when there is one, else planned now."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from .errors import ConfigError
from .planner.gpu import visible_gpu
from .family import CHIMERA_7B, from_name, identify
from .profiles import Decision, ModelShape, plan, plan_with_fusion
from .settings import Settings

log = logging.getLogger("hymt.planning")

# Hunyuan-MT-7B's shape (FACTS.md), used only when the checkpoint's config cannot be read yet (before a download).
HUNYUAN_MT_7B = ModelShape(hidden_size=4096, intermediate_size=14336, num_layers=32, num_heads=32, num_kv_heads=8,
                           head_dim=128, vocab_size=128167, tied_embeddings=False)


def model_shape(model: str) -> tuple[ModelShape, str]:
    from .engine.loader import load_config

    path = Path(model).expanduser()
    if not path.is_dir():
        return HUNYUAN_MT_7B, "built-in Hunyuan-MT-7B shape (checkpoint not on disk yet)"
    return ModelShape.from_config(load_config(path)), str(path / "config.json")


def decide(settings: Settings) -> Decision:
    if settings.decision_file and Path(settings.decision_file).is_file():
        try:
            decision = Decision(**json.loads(Path(settings.decision_file).read_text()))
            log.info("using the decision in %s: %s", settings.decision_file, decision.profile)
            return decision
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"cannot read decision file {settings.decision_file}: {exc}") from None
    shape, source = model_shape(settings.model)
    gpu = visible_gpu(settings.gpu_memory_gb)
    if _family(settings) is CHIMERA_7B:
        decision = plan(shape, gpu, settings)
        decision.fusion = {"placement": "same", "decision": None,
                           "reason": "the model served is Hunyuan-MT-Chimera-7B: it fuses the candidates itself"}
    elif settings.fusion_model:
        decision = plan_with_fusion(shape, model_shape(settings.fusion_model)[0], gpu, settings)
    else:
        decision = plan(shape, gpu, settings)
        decision.fusion = {"placement": "off", "decision": None,
                           "reason": "no fusion model: set HYMT_FUSION_MODEL to a Hunyuan-MT-Chimera-7B checkpoint"}
    decision.numbers["shape_source"] = source
    return decision


def _family(settings: Settings):
    """The served model's family as far as planning can tell (the loader identifies it again from the files)."""
    path = Path(settings.model).expanduser()
    if path.is_dir() or settings.model_family != "auto":
        return identify(path, settings.model_family).family
    return from_name(settings.model)
