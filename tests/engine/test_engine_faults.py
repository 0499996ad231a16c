"""Faults inside the engine on the tiny test model: a job cancelled while its step runs, a listener that raises,
and admission by expected wait. Each accepted job ends in a full answer or an explicit error; the others go on."""

from __future__ import annotations

import pytest

from hymt.engine.sampling_params import Sampling
from hymt.errors import Cancelled, Overloaded
from hymt.languages import resolve

GREEDY = Sampling(greedy=True)


def idle(translator) -> bool:
    now = translator.snapshot()
    return now.in_flight == 0 and now.kv_used_tokens == 0 and now.queue_depth == 0


EN, DE = resolve("en"), resolve("de")


def test_a_job_cancelled_during_its_step_leaves_the_others_whole(translator, monkeypatch):
    expected = translator.submit([("Keep translating me.", EN)], DE, GREEDY).wait(60)
    real, victim = translator.engine.runner.launch, {}

    def decode_while_a_client_leaves(seqs):
        # The client of one job in this very step disconnects: its rows must stay valid until the step is over.
        if "job" in victim and not victim["job"].ended and any(s.request.group == victim["job"].id for s in seqs):
            translator.cancel(victim["job"])
        return real(seqs)

    monkeypatch.setattr(translator.engine.runner, "launch", decode_while_a_client_leaves)
    keep = translator.submit([("Keep translating me.", EN)], DE, GREEDY)
    victim["job"] = translator.submit([("This one is cancelled. " * 3, EN)], DE, GREEDY)
    assert keep.wait(60) == expected
    assert victim["job"].done.wait(60) and isinstance(victim["job"].error, Cancelled)
    monkeypatch.undo()
    assert translator.alive and idle(translator)


def test_a_listener_that_raises_does_not_lose_its_job_or_others(translator):
    heard = []

    def broken(event):
        heard.append(event.kind)
        raise RuntimeError("listener bug")

    expected = translator.submit([("One. Two.", EN)], DE, GREEDY).wait(60)
    broken_job = translator.submit([("One. Two.", EN)], DE, GREEDY, listener=broken, stream=True)
    other = translator.submit([("One. Two.", EN)], DE, GREEDY)
    assert broken_job.wait(60) == expected and other.wait(60) == expected
    assert heard[-1] == "done" and "segment" in heard and "token" in heard
    assert translator.alive


def test_admission_refuses_at_once_when_the_expected_wait_is_too_long(translator, monkeypatch):
    admission = translator.engine.admission
    monkeypatch.setattr(admission, "max_wait_s", 0.5)
    monkeypatch.setattr(admission, "tokens_per_s", 1.0)  # as if measured under load: one token a second
    monkeypatch.setattr(admission, "measured", True)
    monkeypatch.setattr(translator.engine.scheduler, "max_in_flight", 1)  # the rest waits
    refused_before = admission.refused
    first = translator.submit([("Long text here. " * 10, EN), ("More long text. " * 10, EN)], DE, GREEDY)
    with pytest.raises(Overloaded) as refused:
        translator.submit([("Hello.", EN)], DE, GREEDY)
    assert refused.value.retry_after_s >= 1 and "would wait about" in refused.value.message
    assert admission.refused == refused_before + 1 and admission.expected_wait_s > 0.5
    translator.cancel(first)
    assert first.done.wait(60)
    monkeypatch.undo()
    assert translator.submit([("Hello.", EN)], DE, GREEDY).wait(60)


def test_documents_are_accepted_whatever_the_interactive_load(translator, monkeypatch):
    from hymt.engine.requests import Priority

    admission = translator.engine.admission
    monkeypatch.setattr(admission, "max_wait_s", 0.5)
    monkeypatch.setattr(admission, "tokens_per_s", 1.0)
    monkeypatch.setattr(admission, "measured", True)
    monkeypatch.setattr(translator.engine.scheduler, "max_in_flight", 1)
    first = translator.submit([("Long text here. " * 10, EN), ("More long text. " * 10, EN)], DE, GREEDY)
    with pytest.raises(Overloaded):
        translator.submit([("Hello.", EN)], DE, GREEDY)
    document = translator.submit([("Hello.", EN)], DE, GREEDY, priority=Priority.BATCH, client="someone")
    translator.cancel(first)
    assert document.wait(60) and first.done.wait(60)


def test_a_sentence_overtakes_a_long_document_and_two_documents_advance_together(cpu_settings):
    from hymt.engine.requests import Priority
    from hymt.planner.decide import decision_for
    from hymt.translation.translator import start

    settings = cpu_settings.replace(max_in_flight=2, max_new_tokens=6)
    translator = start(settings, decision_for(settings))
    try:
        done_order = []

        def heard(name):
            return lambda event: event.kind == "segment" and done_order.append(name)

        lines = [(f"Line {i} of a document.", EN) for i in range(30)]
        a = translator.submit(lines, DE, GREEDY, heard("a"), priority=Priority.BATCH, client="a")
        b = translator.submit(lines, DE, GREEDY, heard("b"), priority=Priority.BATCH, client="b")
        sentence = translator.submit([("Hello there.", EN)], DE, GREEDY, heard("person"), client="person")
        assert sentence.wait(60) and a.wait(120) and b.wait(120)
        # The sentence came third, behind 60 segments, and took the next free row.
        assert done_order.index("person") <= 4, done_order
        # The two documents took turns: when the first was half done, so was the second, about.
        half = [n for n, who in enumerate(done_order) if who == "a"][14]
        assert 10 <= done_order[:half].count("b") <= 20, done_order
    finally:
        translator.stop()


def test_a_request_of_many_segments_is_batch_work(translator):
    from hymt.engine.requests import Priority

    limit = translator.settings.interactive_max_segments
    short = translator.submit([("One. Two.", EN)], DE, GREEDY)
    long = translator.submit([("\n".join(f"Line {i}." for i in range(limit + 1)), EN)], DE, GREEDY)
    assert short.priority is Priority.INTERACTIVE and long.num_segments > limit
    assert long.priority is Priority.BATCH and {r.priority for r in long.requests} == {Priority.BATCH}
    translator.cancel(long)
    assert short.wait(60) and long.done.wait(60)
