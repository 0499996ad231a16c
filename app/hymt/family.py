"""Which model of the Hunyuan-MT family a checkpoint holds: Hunyuan-MT-7B, Hunyuan-MT-Chimera-7B or HY-MT1.5-7B.

The three share one architecture, vocabulary and chat template, so the config's numbers cannot tell them apart.
The name can: the `_name_or_path` that transformers writes into config.json and tokenizer_config.json when a
checkpoint is saved, then the checkpoint's own path (a hub cache directory is named after its repository, and people
keep checkpoints in directories named after the model). HYMT_MODEL_FAMILY overrides all of it; a checkpoint no signal
names is served as Hunyuan-MT-7B, and /health says that this was assumed.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

log = logging.getLogger("hymt.family")


@dataclass(frozen=True)
class Family:
    key: str  # the value of HYMT_MODEL_FAMILY
    name: str  # the model's own name, shown on the page, /health and /v1/models
    terminology: bool  # an official terminology prompt
    context: bool  # an official contextual-translation prompt
    fusion: bool  # fuses six candidate translations into one (Chimera)
    formatted: bool = False  # an official formatted-translation prompt (inline markup tags kept)


HUNYUAN_MT_7B = Family("hunyuan-mt-7b", "Hunyuan-MT-7B", terminology=False, context=False, fusion=False)
CHIMERA_7B = Family("hunyuan-mt-chimera-7b", "Hunyuan-MT-Chimera-7B", terminology=False, context=False, fusion=True)
HY_MT15_7B = Family("hy-mt1.5-7b", "HY-MT1.5-7B", terminology=True, context=True, fusion=False, formatted=True)
FAMILIES = {f.key: f for f in (HUNYUAN_MT_7B, CHIMERA_7B, HY_MT15_7B)}
FAMILY_CHOICES = ("auto", *FAMILIES)

# Most specific first: "Hunyuan-MT-Chimera-7B" also contains "Hunyuan-MT".
_NAMES = (
    (re.compile(r"chimera", re.I), CHIMERA_7B),
    (re.compile(r"hy[-_ ]?mt[-_ ]?1[._-]?5", re.I), HY_MT15_7B),
    (re.compile(r"hunyuan[-_ ]?mt", re.I), HUNYUAN_MT_7B),
)
_SMALL = re.compile(r"1[._]8b", re.I)


@dataclass(frozen=True)
class Identified:
    family: Family
    source: str  # what told: "HYMT_MODEL_FAMILY", "config.json", "tokenizer_config.json", "path" or "assumed"

    def to_json(self) -> dict:
        return {"family": self.family.key, "name": self.family.name, "source": self.source,
                "terminology_prompt": self.family.terminology, "context_prompt": self.family.context,
                "fusion": self.family.fusion, "formatted_prompt": self.family.formatted}


def from_name(text: str) -> Family | None:
    for pattern, family in _NAMES:
        if pattern.search(text):
            return family
    return None


def _saved_name(checkpoint: Path, filename: str) -> str:
    try:
        data = json.loads((checkpoint / filename).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    name = data.get("_name_or_path") or data.get("name_or_path") if isinstance(data, dict) else ""
    return name if isinstance(name, str) else ""


def check_choice(value: str) -> None:
    """HYMT_MODEL_FAMILY's value: "auto" or a family's key."""
    if value not in FAMILY_CHOICES:
        raise ConfigError(f"HYMT_MODEL_FAMILY must be one of {', '.join(FAMILY_CHOICES)}, not {value!r}")


def identify(checkpoint: Path, override: str = "auto") -> Identified:
    """The checkpoint's family, and which signal named it."""
    check_choice(override)
    if override != "auto":
        return Identified(FAMILIES[override], "HYMT_MODEL_FAMILY")
    # The path from its innermost directory outwards: the directory named after the model wins over its parents.
    signals = [("config.json", _saved_name(checkpoint, "config.json")),
               ("tokenizer_config.json", _saved_name(checkpoint, "tokenizer_config.json")),
               *(("path", part) for part in reversed(checkpoint.resolve().parts))]
    for source, text in signals:
        # The 1.8B models share the names but not the vocabulary or template: the loader's token checks refuse them.
        family = from_name(text) if text and not _SMALL.search(text) else None
        if family is not None:
            return Identified(family, source)
    log.warning("cannot tell which Hunyuan-MT model %s holds; serving it as %s (set HYMT_MODEL_FAMILY to say)",
                checkpoint, HUNYUAN_MT_7B.name)
    return Identified(HUNYUAN_MT_7B, "assumed")
