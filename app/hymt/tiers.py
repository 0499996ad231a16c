"""The memory profiles ("tiers"): what each stores in which format, the order the planner walks them in, and their
names, defined here once for HYMT_PROFILE, the command line, the API, the planner and the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# How a tier keeps the KV cache, spelled so everywhere (planner, engine, /health, /metrics): in the model's own bf16
# or fp32, or as int8 with a 16-bit scale per token and head.
KvCache = Literal["bf16", "int8", "fp32"]


@dataclass(frozen=True)
class Tier:
    name: str
    weights: str  # "bf16", "fp8", "int4", "int8", "nf4", "fp32"
    kv_cache: KvCache
    device: str  # "cuda" or "cpu"
    auto: bool = True  # whether the planner may pick it by itself
    min_capability: tuple[int, int] = (0, 0)  # the GPU generation its kernels need


# Highest fidelity first: the planner walks this order. FP8 (e4m3 weights with a scale per output row, Ada and
# Hopper's FP8 tensor cores) keeps more of the weights than 4 bits in a little over half of bf16's memory.
# INT4 (humming-kernels, Ampere and later) is the 4-bit tier: on an H200 its linear layers took 1.87 ms per decoding
# step at one row and 2.89 at 64, where bitsandbytes' NF4 took 3.5 and 12.0 (bench/results/kernels.json). NF4
# serves the GPUs before Ampere, and stands in when humming's kernels cannot be built. LLM.int8 weights are slower
# than NF4 and larger: by name only.
AMPERE = (8, 0)
ADA = (8, 9)
TIERS: tuple[Tier, ...] = (
    Tier("bf16", "bf16", "bf16", "cuda"),
    Tier("bf16-int8kv", "bf16", "int8", "cuda"),
    Tier("fp8", "fp8", "bf16", "cuda", min_capability=ADA),
    Tier("fp8-int8kv", "fp8", "int8", "cuda", min_capability=ADA),
    Tier("int4", "int4", "bf16", "cuda", min_capability=AMPERE),
    Tier("int4-int8kv", "int4", "int8", "cuda", min_capability=AMPERE),
    Tier("nf4", "nf4", "bf16", "cuda"),
    Tier("nf4-int8kv", "nf4", "int8", "cuda"),
    Tier("int8", "int8", "bf16", "cuda", auto=False),
)
CPU_TIER = Tier("cpu", "fp32", "fp32", "cpu")
TIERS_BY_NAME = {t.name: t for t in (*TIERS, CPU_TIER)}

AUTO = "auto"  # HYMT_PROFILE's default: the planner picks the tier
# What HYMT_PROFILE and --profile accept: auto, the GPU tiers in alphabetical order, then cpu.
PROFILE_CHOICES = (AUTO, *sorted(t.name for t in TIERS), CPU_TIER.name)


def runs_on(tier: Tier, capability: tuple[int, int] | None) -> bool:
    """Whether a GPU of this compute capability runs the tier's kernels; an unknown generation (None) is given the
    benefit of the doubt."""
    return capability is None or capability >= tier.min_capability
