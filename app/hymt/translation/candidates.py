"""Quality "best"'s candidates: the decoding settings each text is translated under before Chimera fuses them (and
LibreTranslate's `alternatives`, which ranks them instead)."""

from __future__ import annotations

from ..engine.sampling_params import Sampling

# Quality "best": the six decoding settings of the candidates Chimera fuses (its candidates came from Hunyuan-MT-7B
# "under varying sampling settings"): greedy, the recommended sampling, and cooler and hotter variants of it.
CANDIDATE_SAMPLINGS = (
    Sampling(greedy=True),
    Sampling(),
    Sampling(temperature=0.5, top_p=0.5, top_k=10),
    Sampling(temperature=0.9, top_p=0.8, top_k=40),
    Sampling(temperature=1.0, top_p=0.9, top_k=50),
    Sampling(temperature=1.1, top_p=0.95, top_k=100, repetition_penalty=1.1),
)
