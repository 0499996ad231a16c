"""Tencent's FP8 checkpoints as published (Hunyuan-MT-7B-fp8, HY-MT1.5-*-FP8, Hy-MT2-*-FP8): their
quantization_config read and checked here, without the compressed-tensors package, for the planner (which sizes
them) and the engine's loader (which loads them); any other FP8 scheme is refused with one line.

Served: quant_method `compressed-tensors`, format `naive-quantized` (AngelSlim's export; `float-quantized` stores the
same tensors), one config group targeting `Linear` with float 8-bit weights (e4m3) and one scale per tensor or per
output channel; the output head left out by `ignore` or AngelSlim's `ignored_layers`, and nothing else. The
activations' scheme (Tencent's: static, per tensor) is not used: hymt quantizes them per token as they come.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

from .errors import ModelLoadError

# The planner's name for such a checkpoint's weights (ModelShape.quantized_format, Decision.weights).
FORMAT = "compressed-tensors-fp8"
FORMATS = ("naive-quantized", "float-quantized")
# "tensor": weight_scale [1] (Tencent's); "channel": weight_scale [out, 1].
STRATEGIES = ("tensor", "channel")
# transformers' own FP8 formats, whose scales are laid out otherwise (blocks, `weight_scale_inv`).
OTHER_FP8_METHODS = ("fp8", "fbgemm_fp8")


@dataclass(frozen=True)
class Fp8Scheme:
    strategy: str  # one of STRATEGIES


def is_fp8(quant) -> TypeGuard[dict]:
    """Whether a config's quantization_config is a compressed-tensors one (read_scheme says whether it is served)."""
    return isinstance(quant, dict) and quant.get("quant_method") == "compressed-tensors"


def check(quant, where: str) -> None:
    """Refuse, in one line naming `where`, an FP8 checkpoint whose scheme hymt does not load."""
    if isinstance(quant, dict) and quant.get("quant_method") in OTHER_FP8_METHODS:
        raise ModelLoadError(
            f"{where} is quantized with quant_method {quant['quant_method']!r}; hymt loads FP8 checkpoints in "
            "Tencent's compressed-tensors layout (one scale per tensor or per row), or serve the bf16 checkpoint"
        )
    if is_fp8(quant):
        read_scheme(quant, where)


def read_scheme(quant: dict, where: str) -> Fp8Scheme:
    """The FP8 scheme of a compressed-tensors quantization_config, or ModelLoadError saying what is not served."""

    def refuse(what: str) -> ModelLoadError:
        return ModelLoadError(
            f"{where}: {what}; hymt loads compressed-tensors FP8 checkpoints with e4m3 weights scaled per tensor or "
            "per row (Tencent's), or serve the bf16 checkpoint"
        )

    if quant.get("format") not in FORMATS:
        raise refuse(f"compressed-tensors format {quant.get('format')!r} is not served")
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        raise refuse(f"{len(groups) if isinstance(groups, dict) else 'no'} config groups, where one is served")
    group = next(iter(groups.values()))
    if not isinstance(group, dict) or group.get("targets") != ["Linear"]:
        raise refuse(f"a config group targeting {group.get('targets') if isinstance(group, dict) else group!r}")
    weights = group.get("weights")
    if not isinstance(weights, dict):
        raise refuse("no weights scheme")
    if weights.get("type") != "float" or weights.get("num_bits") != 8:
        raise refuse(f"{weights.get('num_bits')}-bit {weights.get('type')} weights")
    strategy = weights.get("strategy")
    if strategy not in STRATEGIES:
        raise refuse(f"weights scaled per {strategy!r}")
    if weights.get("group_size") or weights.get("block_structure") or weights.get("symmetric") is False:
        raise refuse("weights in groups, blocks or with zero points")
    ignored = []
    for key in ("ignore", "ignored_layers"):
        names = quant.get(key) or []
        if not isinstance(names, list):
            raise refuse(f"{key} is {names!r}, not a list of layers")
        ignored += [str(name) for name in names]
    kept = [name for name in ignored if "lm_head" not in name]
    if kept:
        raise refuse(f"layers left in 16 bits besides the output head ({', '.join(kept[:3])})")
    return Fp8Scheme(strategy)
