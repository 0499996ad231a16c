"""Which model of the Hunyuan-MT family a checkpoint holds: Hunyuan-MT-7B, Hunyuan-MT-Chimera-7B, HY-MT1.5-7B,
HY-MT1.5-1.8B, Hy-MT2-7B, Hy-MT2-1.8B or Hy-MT2-30B-A3B.

The 7B models share one architecture, vocabulary and chat template, and so do the two 1.8B models, so the config's
numbers cannot tell the members of a size apart. The name can: the `_name_or_path` that transformers writes into
config.json and tokenizer_config.json when a checkpoint is saved, then the checkpoint's own path (a hub cache
directory is named after its repository, and people keep checkpoints in directories named after the model).
HYMT_MODEL_FAMILY overrides all of it. Where a name gives the model but the config says another size (the 1.8B
vocabulary, or hy_v3, the architecture of Hy-MT2-30B-A3B, a Mixture of Experts), the config wins. A checkpoint no
signal names is served as Hunyuan-MT-7B (HY-MT1.5-1.8B with the 1.8B vocabulary, Hy-MT2-30B-A3B with hy_v3), and
/health says that this was assumed.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from .chat import MOE_CHAT, SEVEN_B_CHAT, SMALL_CHAT, SMALL_VOCAB_SIZE, ChatFormat
from .errors import ConfigError

log = logging.getLogger("hymt.family")

# Each checkpoint's own license (the License.txt of Tencent-Hunyuan/Hunyuan-MT, HY-MT and Hy-MT2 on GitHub).
HUNYUAN_LICENSE = "Tencent Hunyuan Community License (not valid in the EU, the UK and South Korea)"
HY_LICENSE = "Tencent HY Community License (not valid in the EU, the UK and South Korea)"
APACHE_LICENSE = "Apache-2.0"


@dataclass(frozen=True)
class Family:
    key: str  # the value of HYMT_MODEL_FAMILY
    name: str  # the model's own name, shown on the page, /health and /v1/models
    line: str  # the release its prompts come from: "hunyuan-mt", "chimera", "hy-mt1.5" or "hy-mt2"
    chat: ChatFormat  # the tokenizer's chat template and special tokens (7B, 1.8B or 30B-A3B)
    license: str
    terminology: bool  # an official terminology prompt
    context: bool  # an official contextual-translation prompt
    fusion: bool  # fuses six candidate translations into one (Chimera)
    formatted: bool = False  # an official formatted-translation prompt (inline markup tags kept)
    style: bool = False  # an official style prompt (request option `style`)
    background: bool = False  # an official background prompt (request option `background`)
    # The recommended output cap (Hy-MT2's README: max_tokens 4096); None where none is published.
    max_new_tokens: int | None = None

    @property
    def size(self) -> str:
        """The size, "7b", "1.8b" or "30b-a3b": each has its own chat format."""
        return self.chat.key

    @property
    def small(self) -> bool:
        return self.chat is SMALL_CHAT


HUNYUAN_MT_7B = Family(
    "hunyuan-mt-7b",
    "Hunyuan-MT-7B",
    "hunyuan-mt",
    SEVEN_B_CHAT,
    HUNYUAN_LICENSE,
    terminology=False,
    context=False,
    fusion=False,
)
CHIMERA_7B = Family(
    "hunyuan-mt-chimera-7b",
    "Hunyuan-MT-Chimera-7B",
    "chimera",
    SEVEN_B_CHAT,
    HUNYUAN_LICENSE,
    terminology=False,
    context=False,
    fusion=True,
)
# HY-MT1.5's README gives one set of prompts for both sizes; its context prompt also carries a request's background.
HY_MT15_7B = Family(
    "hy-mt1.5-7b",
    "HY-MT1.5-7B",
    "hy-mt1.5",
    SEVEN_B_CHAT,
    HY_LICENSE,
    terminology=True,
    context=True,
    fusion=False,
    formatted=True,
    background=True,
)
HY_MT15_1_8B = Family(
    "hy-mt1.5-1.8b",
    "HY-MT1.5-1.8B",
    "hy-mt1.5",
    SMALL_CHAT,
    HY_LICENSE,
    terminology=True,
    context=True,
    fusion=False,
    formatted=True,
    background=True,
)
# Hy-MT2's README lists no contextual-translation and no formatted prompt: those stay off (the formatted prompt is
# the tested equivalent, as for Hunyuan-MT-7B).
HY_MT2_7B = Family(
    "hy-mt2-7b",
    "Hy-MT2-7B",
    "hy-mt2",
    SEVEN_B_CHAT,
    APACHE_LICENSE,
    terminology=True,
    context=False,
    fusion=False,
    style=True,
    background=True,
    max_new_tokens=4096,
)
HY_MT2_1_8B = Family(
    "hy-mt2-1.8b",
    "Hy-MT2-1.8B",
    "hy-mt2",
    SMALL_CHAT,
    APACHE_LICENSE,
    terminology=True,
    context=False,
    fusion=False,
    style=True,
    background=True,
    max_new_tokens=4096,
)
# The Mixture of Experts (hy_v3): Hy-MT2's prompts (its README gives one table for every size) and output cap.
HY_MT2_30B_A3B = Family(
    "hy-mt2-30b-a3b",
    "Hy-MT2-30B-A3B",
    "hy-mt2",
    MOE_CHAT,
    APACHE_LICENSE,
    terminology=True,
    context=False,
    fusion=False,
    style=True,
    background=True,
    max_new_tokens=4096,
)
FAMILIES = {
    f.key: f for f in (HUNYUAN_MT_7B, CHIMERA_7B, HY_MT15_7B, HY_MT15_1_8B, HY_MT2_7B, HY_MT2_1_8B, HY_MT2_30B_A3B)
}
FAMILY_CHOICES = ("auto", *FAMILIES)

_HY_MT2 = re.compile(r"hy[-_ ]?mt[-_ ]?2(?![\d.])", re.I)
# Most specific first: "Hunyuan-MT-Chimera-7B" also contains "Hunyuan-MT".
_LINES = (
    (re.compile(r"chimera", re.I), "chimera"),
    (_HY_MT2, "hy-mt2"),
    (re.compile(r"hy[-_ ]?mt[-_ ]?1[._-]?5", re.I), "hy-mt1.5"),
    (re.compile(r"hunyuan[-_ ]?mt", re.I), "hunyuan-mt"),
)
_SMALL = re.compile(r"1[._]8b", re.I)
_MOE = re.compile(r"30b[-_ ]?a3b", re.I)
MOE_MODEL_TYPE = "hy_v3"  # the architecture of Hy-MT2-30B-A3B (transformers' HYV3ForCausalLM)


@dataclass(frozen=True)
class Identified:
    family: Family
    source: str  # what told: "HYMT_MODEL_FAMILY", "config.json", "tokenizer_config.json", "path" or "assumed"

    def to_json(self) -> dict:
        f = self.family
        return {
            "family": f.key,
            "name": f.name,
            "source": self.source,
            "license": f.license,
            "terminology_prompt": f.terminology,
            "context_prompt": f.context,
            "fusion": f.fusion,
            "formatted_prompt": f.formatted,
            "style_prompt": f.style,
            "background_prompt": f.background,
        }


def member(line: str, size: str) -> Family | None:
    """The model of a release at a size (None where the release has none: Hunyuan-MT has no 1.8B, only Hy-MT2 has a
    30B-A3B)."""
    return next((f for f in FAMILIES.values() if f.line == line and f.size == size), None)


def from_name(text: str, size: str | None = None) -> Family | None:
    """The model a name gives; `size` (the config's, when known) decides the size over the name's."""
    for pattern, line in _LINES:
        if pattern.search(text):
            return member(line, size or _named_size(text))
    return None


def _named_size(text: str) -> str:
    if _MOE.search(text):
        return MOE_CHAT.key
    return SMALL_CHAT.key if _SMALL.search(text) else SEVEN_B_CHAT.key


def config_size(config: dict) -> str | None:
    """The size a config.json says: its architecture (hy_v3: the 30B-A3B) or its vocabulary (the 1.8B's); None
    where it says nothing (an empty or unreadable config)."""
    if config.get("model_type") == MOE_MODEL_TYPE:
        return MOE_CHAT.key
    vocab = config.get("vocab_size")
    if not isinstance(vocab, int):
        return None
    return SMALL_CHAT.key if vocab == SMALL_VOCAB_SIZE else SEVEN_B_CHAT.key


def _saved_config(checkpoint: Path, filename: str) -> dict:
    try:
        data = json.loads((checkpoint / filename).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _saved_name(data: dict) -> str:
    name = data.get("_name_or_path") or data.get("name_or_path")
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
    config = _saved_config(checkpoint, "config.json")
    size = config_size(config)
    # The path from its innermost directory outwards: the directory named after the model wins over its parents.
    signals = [
        ("config.json", _saved_name(config)),
        ("tokenizer_config.json", _saved_name(_saved_config(checkpoint, "tokenizer_config.json"))),
        *(("path", part) for part in reversed(checkpoint.resolve().parts)),
    ]
    for source, text in signals:
        family = from_name(text, size) if text else None
        if family is not None:
            return Identified(family, source)
    assumed = {SMALL_CHAT.key: HY_MT15_1_8B, MOE_CHAT.key: HY_MT2_30B_A3B}.get(size or "", HUNYUAN_MT_7B)
    log.warning(
        "cannot tell which Hunyuan-MT model %s holds; serving it as %s (set HYMT_MODEL_FAMILY to say)",
        checkpoint,
        assumed.name,
    )
    return Identified(assumed, "assumed")
