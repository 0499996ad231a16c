"""The decision the engine runs with: a tier, its KV arena in tokens and bytes, the segments decoded together, the
reason, the numbers behind it, and where quality best's fusion model runs. Both are frozen; they travel as JSON in
the entrypoint's decision file."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Literal

from ..tiers import TIERS_BY_NAME, KvCache, Tier, runs_on

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
        own = data.get("decision")
        return cls(**{**data, "decision": Decision.from_json(own) if own else None})


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
    gpu: dict | None
    numbers: dict = field(default_factory=dict)
    fusion: FusionPlan = FusionPlan()

    @classmethod
    def from_json(cls, data: dict) -> Decision:
        return cls(**{**data, "fusion": FusionPlan.from_json(data.get("fusion") or {})})

    @property
    def tier(self) -> Tier:
        return TIERS_BY_NAME[self.profile]

    def to_json(self) -> dict:
        return asdict(self)

    def allows(self, tier: Tier) -> bool:
        """Whether this GPU runs the tier's kernels."""
        return runs_on(tier, (self.gpu or {}).get("compute_capability"))

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
        info = self.numbers.get("tiers", {}).get(tier.name, {})
        kv_tokens = info.get("kv_cache_tokens", self.kv_cache_tokens)
        return dataclasses.replace(
            self,
            profile=tier.name,
            weights=tier.weights,
            kv_cache=tier.kv_cache,
            kv_cache_tokens=kv_tokens,
            kv_cache_bytes=kv_tokens * info.get("kv_bytes_per_token", 0),
            max_in_flight=info.get("max_in_flight", self.max_in_flight),
            reason=reason,
        )

    def with_fusion(self, fusion: FusionPlan) -> Decision:
        return dataclasses.replace(self, fusion=fusion)
