"""The decision the engine runs with: a tier, its KV arena in tokens and bytes, the segments decoded together, the
reason, the numbers behind it (each tier's budget, which start-up steps down through), and where quality best's
fusion model runs. All frozen; they travel as JSON in the entrypoint's decision file."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Literal

from ..tiers import TIERS_BY_NAME, KvCache, Tier, runs_on
from .gpu import GpuMemory

# off: no fusion model; same: the model served is Chimera, which fuses by itself; resident: the fusion model has
# its own engine beside the translation model; refused: the card has no room for both.
Placement = Literal["off", "same", "resident", "refused"]


@dataclass(frozen=True)
class FusionPlan:
    """Where quality "best"'s fusion model (Hunyuan-MT-Chimera-7B) runs, and why."""

    placement: Placement = "off"
    decision: Decision | None = None  # the fusion model's own decision, when resident
    reason: str | None = None

    @classmethod
    def from_json(cls, data: dict) -> FusionPlan:
        own = data["decision"]
        return cls(**{**data, "decision": Decision.from_json(own) if own else None})


@dataclass(frozen=True)
class TierBudget:
    """What one tier leaves in the memory planned: the bytes behind it, and the KV arena and decoding rows left."""

    usable_bytes: int  # the memory planned, less what the CUDA context and the allocator's slack take
    weight_bytes: int
    transient_bytes: int
    kv_bytes_per_token: int
    kv_cache_tokens: int
    max_in_flight: int


@dataclass(frozen=True)
class Numbers:
    """The numbers behind a decision: each GPU tier's budget (none on the CPU, whose one tier is not stepped down
    from) and the planner's figures."""

    tiers: dict[str, TierBudget]
    target_kv_tokens: int
    cuda_context_bytes: int
    allocator_slack: float
    shape_source: str | None = None  # where the checkpoint's shape came from, once decide.py planned it

    @classmethod
    def from_json(cls, data: dict) -> Numbers:
        return cls(**{**data, "tiers": {name: TierBudget(**budget) for name, budget in data["tiers"].items()}})


@dataclass(frozen=True)
class Decision:
    profile: str
    weights: str
    kv_cache: KvCache
    device: str
    kv_cache_tokens: int  # the KV arena, in tokens
    kv_cache_bytes: int
    max_in_flight: int  # segments decoded together at most
    prefill_tokens: int
    max_seq_tokens: int  # the longest KV range one segment holds
    reason: str
    gpu: GpuMemory | None  # None on the CPU
    numbers: Numbers
    fusion: FusionPlan = FusionPlan()

    @classmethod
    def from_json(cls, data: dict) -> Decision:
        return cls(
            **{
                **data,
                "gpu": GpuMemory.from_json(data["gpu"]) if data["gpu"] else None,
                "numbers": Numbers.from_json(data["numbers"]),
                "fusion": FusionPlan.from_json(data["fusion"]),
            }
        )

    @property
    def tier(self) -> Tier:
        return TIERS_BY_NAME[self.profile]

    def to_json(self) -> dict:
        return asdict(self)

    def allows(self, tier: Tier) -> bool:
        """Whether this GPU runs the tier's kernels."""
        return runs_on(tier, self.gpu.compute_capability if self.gpu else None)

    def with_kv_tokens(self, kv_tokens: int, max_in_flight: int, reason: str) -> Decision:
        per_token = self.kv_cache_bytes // max(1, self.kv_cache_tokens)
        return dataclasses.replace(
            self,
            kv_cache_tokens=kv_tokens,
            kv_cache_bytes=kv_tokens * per_token,
            max_in_flight=max_in_flight,
            reason=reason,
        )

    def with_tier(self, tier: Tier, reason: str) -> Decision:
        """The next tier down, with the KV arena the planner gave it."""
        budget = self.numbers.tiers[tier.name]
        return dataclasses.replace(
            self,
            profile=tier.name,
            weights=tier.weights,
            kv_cache=tier.kv_cache,
            kv_cache_tokens=budget.kv_cache_tokens,
            kv_cache_bytes=budget.kv_cache_tokens * budget.kv_bytes_per_token,
            max_in_flight=budget.max_in_flight,
            reason=reason,
        )

    def with_fusion(self, fusion: FusionPlan) -> Decision:
        return dataclasses.replace(self, fusion=fusion)
