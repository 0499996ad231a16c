"""Faults inside the engine on the tiny test model: a job cancelled while its step runs, a listener that raises,
and admission by expected wait. Each accepted job ends in a full answer or an explicit error; the others go on."""

from __future__ import annotations

import pytest

from hymt.errors import Cancelled, Overloaded
from hymt.languages import resolve
from hymt.prompts import Sampling

GREEDY = Sampling(greedy=True)
EN, DE = resolve("en"), resolve("de")


def test_a_job_cancelled_during_its_step_leaves_the_others_whole(engine, monkeypatch):
    expected = engine.submit([("Keep translating me.", EN)], DE, GREEDY).wait(60)
    real, victim = engine.runner.launch, {}

    def decode_while_a_client_leaves(seqs):
        # The client of one job in this very step disconnects: its rows must stay valid until the step is over.
        if "job" in victim and not victim["job"].ended and any(s.job_id == victim["job"].id for s in seqs):
            engine.cancel(victim["job"])
        return real(seqs)

    monkeypatch.setattr(engine.runner, "launch", decode_while_a_client_leaves)
    keep = engine.submit([("Keep translating me.", EN)], DE, GREEDY)
    victim["job"] = engine.submit([("This one is cancelled. " * 3, EN)], DE, GREEDY)
    assert keep.wait(60) == expected
    assert victim["job"].done.wait(60) and isinstance(victim["job"].error, Cancelled)
    monkeypatch.undo()
    assert engine.alive and engine.in_flight == 0 and engine.kv_used_tokens == 0 and engine.queue_depth == 0


def test_a_listener_that_raises_does_not_lose_its_job_or_others(engine):
    heard = []

    def broken(event):
        heard.append(event.kind)
        raise RuntimeError("listener bug")

    expected = engine.submit([("One. Two.", EN)], DE, GREEDY).wait(60)
    broken_job = engine.submit([("One. Two.", EN)], DE, GREEDY, listener=broken, stream=True)
    other = engine.submit([("One. Two.", EN)], DE, GREEDY)
    assert broken_job.wait(60) == expected and other.wait(60) == expected
    assert heard[-1] == "done" and "segment" in heard and "token" in heard
    assert engine.alive


def test_admission_refuses_at_once_when_the_expected_wait_is_too_long(engine, monkeypatch):
    admission = engine.admission
    monkeypatch.setattr(admission, "max_wait_s", 0.5)
    monkeypatch.setattr(admission, "tokens_per_s", 1.0)  # as if measured under load: one token a second
    monkeypatch.setattr(admission, "measured", True)
    monkeypatch.setattr(engine.scheduler, "max_in_flight", 1)  # the rest waits
    refused_before = admission.refused
    first = engine.submit([("Long text here. " * 10, EN), ("More long text. " * 10, EN)], DE, GREEDY)
    with pytest.raises(Overloaded) as refused:
        engine.submit([("Hello.", EN)], DE, GREEDY)
    assert refused.value.retry_after_s >= 1 and "would wait about" in refused.value.message
    assert admission.refused == refused_before + 1 and admission.expected_wait_s > 0.5
    engine.cancel(first)
    assert first.done.wait(60)
    monkeypatch.undo()
    assert engine.submit([("Hello.", EN)], DE, GREEDY).wait(60)
