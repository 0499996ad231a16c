"""The decision the server runs with: read from the entrypoint's decision file when there is one, else planned now."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from .errors import ConfigError
from .hardware import visible_gpu
from .profiles import Decision, ModelShape, plan
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
    decision = plan(shape, visible_gpu(settings.gpu_memory_gb), settings)
    decision.numbers["shape_source"] = source
    return decision
