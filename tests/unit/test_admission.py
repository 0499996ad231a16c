"""Admission by expected wait and the rate limits: pure arithmetic, no model, no server."""

from __future__ import annotations

import pytest

from hymt.api.ratelimit import Limits, RateLimit
from hymt.engine.admission import WINDOW_S, Admission
from hymt.errors import Overloaded


def test_an_empty_queue_admits_whatever_the_size():
    admission = Admission(max_wait_s=1, initial_tokens_per_s=10)
    verdict = admission.decide(0, [1000] * 50, free_rows=4)
    assert verdict.admitted and verdict.expected_wait_s > 1  # alone, it waits only for its own segments


def test_the_wait_is_the_tokens_ahead_over_the_throughput():
    admission = Admission(max_wait_s=10, initial_tokens_per_s=100)
    fits = admission.decide(900, [50], free_rows=0)  # 900 tokens ahead: 9 s
    assert fits.admitted and fits.expected_wait_s == pytest.approx(9)
    # Its own segments before its last count too: 900 + 3 x 50 = 1,050 tokens, 10.5 s.
    too_long = admission.decide(900, [50] * 4, free_rows=0)
    assert not too_long.admitted and too_long.expected_wait_s == pytest.approx(10.5)
    assert too_long.retry_after_s == 1


def test_retry_after_grows_with_the_queue():
    admission = Admission(max_wait_s=5, initial_tokens_per_s=10)
    small, big = admission.decide(100, [10], 0), admission.decide(1000, [10], 0)
    assert not small.admitted and not big.admitted
    assert big.retry_after_s > small.retry_after_s >= 1
    assert big.retry_after_s == 100 - 5  # 100 s expected, 5 allowed


def test_throughput_is_measured_only_while_saturated_and_replaces_the_seed():
    admission = Admission(max_wait_s=10, initial_tokens_per_s=1_000_000)
    admission.observe(0, 0.0, saturated=True)
    admission.observe(500, 10.0, saturated=False)  # idle stretches say nothing about capacity
    assert not admission.measured
    admission.observe(500, 10.0, saturated=True)
    admission.observe(1500, 10.0 + WINDOW_S * 4, saturated=True)  # 1,000 tokens in 2 s
    assert admission.measured and admission.tokens_per_s == pytest.approx(500)
    admission.observe(1500 + 2000, 12.0 + WINDOW_S * 4, saturated=True)  # 1,000 tok/s now: smoothed
    assert 500 < admission.tokens_per_s < 1000


def test_budgets_are_scaled_by_the_share_segments_really_use():
    admission = Admission(max_wait_s=10, initial_tokens_per_s=100)
    before = admission.decide(2000, [10], 0).expected_wait_s
    for _ in range(200):
        admission.observe_finished(100, 25)  # segments stop at a quarter of their budget
    after = admission.decide(2000, [10], 0).expected_wait_s
    assert after == pytest.approx(before / 4, rel=0.05)


def test_interactive_work_gets_the_throughput_batch_work_leaves_it():
    admission = Admission(max_wait_s=10, initial_tokens_per_s=100)
    alone = admission.decide(600, [50], 0)
    beside_documents = admission.decide(600, [50], 0, share=0.75)  # batch keeps a quarter while it has work
    assert alone.admitted and alone.expected_wait_s == pytest.approx(6)
    assert beside_documents.expected_wait_s == pytest.approx(8)
    assert not admission.decide(900, [50], 0, share=0.75).admitted  # 12 s: over the limit beside documents


def test_rate_limit_bucket_allows_a_burst_then_the_rate():
    now = [0.0]
    limit = RateLimit(per_minute=6, clock=lambda: now[0])
    assert [limit.retry_after_s("a") for _ in range(6)] == [0] * 6
    assert limit.retry_after_s("a") == 10  # one every 10 s
    assert limit.retry_after_s("b") == 0  # others have their own
    now[0] = 10.0
    assert limit.retry_after_s("a") == 0 and limit.retry_after_s("a") > 0


def test_limits_by_key_and_by_address():
    now = [0.0]
    limits = Limits(per_key=2, per_address=3, clock=lambda: now[0])
    limits.check(0, "10.0.0.1")
    limits.check(0, "10.0.0.2")
    with pytest.raises(Overloaded) as refused:
        limits.check(0, "10.0.0.3")
    assert refused.value.error_type == "rate_limited" and refused.value.retry_after_s == 30
    limits.check(1, "10.0.0.1")
    limits.check(None, "10.0.0.1")  # no keys configured: the address limit still holds
    with pytest.raises(Overloaded):
        limits.check(None, "10.0.0.1")
    assert limits.refused == 2
    Limits(0, 0).check(0, "10.0.0.1")  # both off
