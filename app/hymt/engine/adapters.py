"""LoRA adapters per language pair: a manifest says which directions each adapter serves; every other direction
runs on the base model.

Manifest (JSON): {"adapters": [{"name": "en-bo", "path": "en-bo", "directions": ["en>bo", "*>bo"]}]}
Paths are relative to the manifest's folder. "*" stands for any source or any target.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeGuard

from ..errors import ConfigError
from ..languages import resolve


@dataclass(frozen=True)
class Adapter:
    name: str
    path: Path
    directions: tuple[tuple[str, str], ...]  # (source code or "*", target code or "*")


def read_manifest(manifest: str | Path) -> list[Adapter]:
    path = Path(manifest)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["adapters"]
        adapters = []
        for entry in entries:
            directions = []
            for direction in entry["directions"]:
                src, tgt = direction.split(">")
                directions.append((_code(src), _code(tgt)))
            adapter_path = (path.parent / entry["path"]).resolve()
            if not (adapter_path / "adapter_config.json").is_file():
                raise ConfigError(f"adapter {entry['name']!r}: {adapter_path} has no adapter_config.json")
            adapters.append(Adapter(name=str(entry["name"]), path=adapter_path, directions=tuple(directions)))
    except ConfigError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read adapter manifest {path}: {type(exc).__name__}: {exc}") from None
    return adapters


def _code(text: str) -> str:
    text = text.strip()
    return "*" if text == "*" else resolve(text).code


def choose(adapters: list[Adapter], source: str | None, target: str) -> str | None:
    """The adapter serving this direction (an exact pair wins over a wildcard), or None for the base model."""
    best, best_score = None, -1
    for adapter in adapters:
        for src, tgt in adapter.directions:
            if (src in ("*", source)) and (tgt in ("*", target)):
                score = (src != "*") + (tgt != "*")
                if score > best_score:
                    best, best_score = adapter.name, score
    return best


class Tuner(Protocol):
    """The LoRA layers inside a PeftModel (its base_model, a LoraModel)."""

    def enable_adapter_layers(self) -> None: ...

    def disable_adapter_layers(self) -> None: ...


class Adapted(Protocol):
    """The PeftModel that attach returns, as the runner switches adapters on it."""

    active_adapter: str
    base_model: Tuner

    def set_adapter(self, adapter_name: str) -> None: ...


def adapted(model: object) -> TypeGuard[Adapted]:
    """Whether the model carries adapters (attach's PeftModel); a transformers model alone has no peft_config."""
    return hasattr(model, "peft_config")


def attach(model, adapters: list[Adapter]):
    """Wrap the model with every adapter loaded (it works on a 4-bit base too); returns the PEFT model."""
    if not adapters:
        return model
    from peft import PeftModel

    first, *rest = adapters
    peft_model = PeftModel.from_pretrained(model, str(first.path), adapter_name=first.name)
    for adapter in rest:
        peft_model.load_adapter(str(adapter.path), adapter_name=adapter.name)
    peft_model.eval()
    return peft_model
