"""A segment's decoding settings, as the token engine takes them: the sampler reads them per row."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sampling:
    """Decoding settings; the defaults are the ones the model card recommends."""

    greedy: bool = False
    top_k: int = 20
    top_p: float = 0.6
    temperature: float = 0.7
    repetition_penalty: float = 1.05
