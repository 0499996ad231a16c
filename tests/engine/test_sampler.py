"""The sampler: greedy and sampled rows in one batch, the stop token held back until the minimum length, the
repetition penalty, and draws in proportion to the filtered probabilities."""

from __future__ import annotations

import math

import torch

from hymt.engine.sampler import Newcomer, Sampler
from hymt.engine.sampling_params import Sampling

GREEDY = Sampling(greedy=True)


def test_sampler_mixes_greedy_and_sampled_rows_and_holds_back_the_stop_token():
    sampler = Sampler(4, 10, stop_ids=[9], device=torch.device("cpu"))
    rows = [(GREEDY, 0), (Sampling(top_k=1), 0), (GREEDY, 1), (Sampling(top_k=1), 1)]  # (settings, min_new_tokens)
    sampler.admit([Newcomer(row, sampling, min_new, 0, [0]) for row, (sampling, min_new) in enumerate(rows)])
    logits = torch.tensor([[0.0] * 9 + [5.0]] * 4)
    logits[:, 3] = 4.0
    index = torch.arange(4)
    assert sampler.sample(logits, index, sampler.top_k_bound([0, 1, 2, 3])).tolist() == [9, 9, 3, 3]
    assert sampler.seen[2, 3] and not sampler.seen[2, 5]
    assert sampler.ints[2].tolist() == [1, 1, 1, 1]  # each row counted its token: min_new_tokens 1 is met
    assert sampler.sample(logits, index, sampler.top_k_bound([0, 1, 2, 3])).tolist() == [9, 9, 9, 9]
    # Token 1 was seen: the 1.05 penalty takes it below an unseen token 0.
    sampler.admit([Newcomer(0, GREEDY, 0, 0, [1])])
    assert sampler.sample(torch.tensor([[2.0, 2.05] + [0.0] * 8]), index[:1], 10).tolist() == [0]


def test_sampled_rows_draw_in_proportion_to_the_filtered_probabilities():
    torch.manual_seed(0)
    sampler = Sampler(1, 4, stop_ids=[3], device=torch.device("cpu"))
    # Temperature 1, top-k 2 keeps tokens 0 and 1 (probabilities 3/4 and 1/4 between them), top-p 1 keeps both.
    sampler.admit([Newcomer(0, Sampling(temperature=1.0, top_k=2, top_p=1.0, repetition_penalty=1.0), 0, 0, [3])])
    logits = torch.tensor([[math.log(3.0), 0.0, -1.0, -5.0]])
    draws = [sampler.sample(logits, torch.tensor([0]), 2).item() for _ in range(4000)]
    assert set(draws) == {0, 1}
    assert 0.72 < draws.count(0) / len(draws) < 0.78


def test_newcomers_admitted_together_take_the_state_each_would_alone():
    """One admission of several rows writes what admitting each alone writes, and clears what a row's previous
    segment had seen."""
    newcomers = [
        Newcomer(2, Sampling(temperature=0.7, top_k=5, top_p=0.9, repetition_penalty=1.1), 3, 1, [4, 7, 4]),
        Newcomer(0, GREEDY, 0, 0, [1]),
        Newcomer(3, Sampling(top_k=0), 2, 5, [0, 9]),
    ]
    together, alone = (Sampler(5, 10, stop_ids=[9], device=torch.device("cpu")) for _ in range(2))
    for sampler in (together, alone):
        sampler.admit([Newcomer(r, GREEDY, 0, 0, [2, 3, 5]) for r in range(5)])  # an earlier segment in every row
    together.admit(newcomers)
    for newcomer in newcomers:
        alone.admit([newcomer])
    assert together.top_k == alone.top_k == [10, 10, 5, 10, 10]
    for name in ("floats", "ints", "seen"):
        assert torch.equal(getattr(together, name), getattr(alone, name)), name
    assert together.seen[2].nonzero().flatten().tolist() == [4, 7]
    assert together.seen[1].nonzero().flatten().tolist() == [2, 3, 5]  # a row no newcomer took keeps its state
    assert together.ints[:, 3].tolist() == [10, 2, 5]
