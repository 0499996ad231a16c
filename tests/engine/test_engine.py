"""The real engine on the tiny test model: continuous batching that gives exactly `generate`'s greedy tokens
(mixed lengths, joining a running batch, chunked prefill, preempted and resumed), streaming, cancellation, and
recovery from injected out-of-memory errors."""

import threading
import time

import pytest
import torch

from hymt.errors import GenerationError, NotReady, Overloaded
from hymt.languages import resolve
from hymt.prompts import Sampling

GREEDY = Sampling(greedy=True)
EN = resolve("en")
TEXTS = [
    "Hello world.",
    "How are you doing today, my dear friend? I hope all is well.",
    "Good morning.",
    "The quick brown fox jumps over the lazy dog.",
    "Thank you!",
]


@pytest.fixture(scope="module")
def tight_engine(cpu_settings):
    """Few rows, small prefill steps: segments queue, join a running batch and are prefilled in chunks."""
    from hymt.engine.startup import start
    from hymt.planner.decide import decision_for

    settings = cpu_settings.replace(max_in_flight=3, prefill_tokens=16, max_new_tokens=24)
    eng = start(settings, decision_for(settings))
    yield eng
    eng.stop()


def reference(engine, seq) -> list[int]:
    """transformers' greedy `generate` for one prompt, with the repetition penalty the engine applies."""
    loaded = engine.runner.loaded
    ids = torch.tensor([seq.prompt_ids])
    out = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=seq.max_new_tokens,
        do_sample=False,
        repetition_penalty=GREEDY.repetition_penalty,
        eos_token_id=loaded.stop_ids,
        pad_token_id=loaded.pad_id,
    )
    tokens = out[0, ids.shape[1] :].tolist()
    return [t for t in tokens if t not in loaded.stop_ids and t != loaded.pad_id]


def assert_like_generate(engine, jobs):
    for job in jobs:
        job.wait(120)
        for seq in job.sequences:
            assert seq.output_ids == reference(engine, seq)


def test_engine_runs_on_cpu_profile(engine):
    assert engine.decision.profile == "cpu" and engine.attention == "dense" and engine.alive
    assert engine.decision.kv_cache_tokens > engine.decision.max_seq_tokens


def test_mixed_lengths_submitted_together_match_generate(tight_engine):
    jobs = [tight_engine.submit([(t, EN)], resolve("zh"), GREEDY) for t in TEXTS]
    assert_like_generate(tight_engine, jobs)
    assert tight_engine.runner.stats.max_in_flight_seen == 3


def test_segments_joining_a_running_batch_match_generate(tight_engine):
    first = tight_engine.submit([(TEXTS[1], EN)], resolve("de"), GREEDY)
    deadline = time.monotonic() + 60
    while len(first.sequences[0].output_ids) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert 3 <= len(first.sequences[0].output_ids) < first.sequences[0].max_new_tokens
    later = [tight_engine.submit([(t, EN)], resolve("fr"), GREEDY) for t in TEXTS[2:]]
    assert_like_generate(tight_engine, [first] + later)


def test_preempted_and_resumed_segments_match_generate(tight_engine, monkeypatch):
    runner = tight_engine.runner
    real, calls = runner.launch, {"n": 0}

    def decode_with_oom(seqs):
        calls["n"] += 1
        if calls["n"] in (4, 9):
            raise torch.OutOfMemoryError("injected")
        return real(seqs)

    monkeypatch.setattr(runner, "launch", decode_with_oom)
    before = runner.stats.preemptions
    jobs = [tight_engine.submit([(t, EN)], resolve("ja"), GREEDY) for t in TEXTS]
    assert_like_generate(tight_engine, jobs)
    assert runner.stats.oom_events >= 2 and runner.stats.preemptions > before
    assert tight_engine.scheduler.max_in_flight < 3  # the budget shrank
    monkeypatch.undo()
    tight_engine.scheduler.max_in_flight = 3


def test_results_come_back_in_order_and_deterministic(engine):
    texts = ["Hello world.", "How are you?", "Good morning, friend."]
    first = engine.submit([(t, EN) for t in texts], resolve("zh"), GREEDY).wait(120)
    alone = [engine.submit([(t, EN)], resolve("zh"), GREEDY).wait(120)[0] for t in texts]
    assert first == alone and len(set(first)) == 3


def test_line_structure_survives_translation(engine):
    text = "First line. Second sentence.\n\n  Indented third.\n\t\nLast line without newline"
    (out,) = engine.submit([(text, EN)], resolve("de"), GREEDY).wait(120)
    assert out.count("\n") == text.count("\n")
    lines_out = out.split("\n")
    assert lines_out[1] == "" and lines_out[3] == "\t" and lines_out[2].startswith("  ")


def test_streaming_jobs_hear_every_token_then_each_segment_then_done(engine):
    events, partials, done = [], [], threading.Event()

    def listen(event):
        events.append(event.kind)
        if event.kind == "token":
            partials.append(event.job.settled_texts(engine.decode)[0])
        if event.kind == "done":
            done.set()

    job = engine.submit([("One. Two.", EN)], resolve("ja"), GREEDY, listener=listen, stream=True)
    assert done.wait(120)
    assert events[-1] == "done" and events.count("segment") == job.num_segments
    assert events.count("token") >= job.tokens_out - job.num_segments
    assert len(set(partials)) > job.num_segments  # the text grew token by token, not only per segment
    silent = []
    engine.submit([("One.", EN)], resolve("ja"), GREEDY, listener=lambda e: silent.append(e.kind)).wait(60)
    assert "token" not in silent


def test_empty_text_finishes_at_once(engine):
    assert engine.submit([("\n\n", EN)], resolve("zh"), GREEDY).wait(5) == ["\n\n"]


def test_queue_limit_refuses_at_once(engine, monkeypatch):
    monkeypatch.setattr(engine.scheduler, "max_queue", 1)
    with pytest.raises(Overloaded):
        engine.submit([("A.", EN), ("B.", EN)], resolve("de"), GREEDY)


def test_cancel_ends_the_job_and_frees_its_rows(engine):
    job = engine.submit([("Some text. " * 30, EN)], resolve("de"), GREEDY)
    engine.cancel(job)
    assert job.done.wait(60) and job.cancelled
    deadline = time.monotonic() + 10
    while (engine.in_flight or engine.kv_used_tokens) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.in_flight == 0 and engine.kv_used_tokens == 0 and engine.queue_depth == 0


def test_out_of_memory_in_a_prefill_requeues_and_loses_nothing(engine, monkeypatch):
    real, calls = engine.runner.prefill, {"n": 0}

    def prefill_with_oom(chunks):
        calls["n"] += 1
        if calls["n"] == 1:
            raise torch.OutOfMemoryError("injected")
        return real(chunks)

    expected = engine.submit([("Hello there.", EN)], resolve("de"), GREEDY).wait(60)
    monkeypatch.setattr(engine.runner, "prefill", prefill_with_oom)
    assert engine.submit([("Hello there.", EN)], resolve("de"), GREEDY).wait(60) == expected
    monkeypatch.undo()
    engine.scheduler.max_in_flight, engine.scheduler.prefill_tokens = engine.runner.plan.max_in_flight, 1024


def test_a_segment_out_of_memory_even_alone_fails_with_an_error(engine, monkeypatch):
    def always_oom(seqs):
        raise torch.OutOfMemoryError("injected")

    monkeypatch.setattr(engine.runner, "launch", always_oom)
    job = engine.submit([("Hello.", EN)], resolve("de"), GREEDY)
    with pytest.raises(GenerationError, match="even alone"):
        job.wait(60)
    monkeypatch.undo()
    engine.scheduler.max_in_flight, engine.scheduler.prefill_tokens = engine.runner.plan.max_in_flight, 1024
    assert engine.submit([("Hello.", EN)], resolve("de"), GREEDY).wait(60)


def test_a_failing_step_ends_its_jobs_with_an_error_and_the_engine_goes_on(engine, monkeypatch):
    monkeypatch.setattr(engine.runner, "launch", lambda seqs: 1 / 0)
    with pytest.raises(GenerationError, match="ZeroDivisionError"):
        engine.submit([("Hello.", EN)], resolve("de"), GREEDY).wait(60)
    monkeypatch.undo()
    assert engine.alive and engine.submit([("Hello.", EN)], resolve("de"), GREEDY).wait(60)


def test_stopping_ends_pending_jobs_with_an_error(cpu_settings):
    from hymt.engine.startup import start
    from hymt.planner.decide import decision_for

    eng = start(cpu_settings, decision_for(cpu_settings))
    job = eng.submit([("Some text. " * 20, EN)], resolve("de"), GREEDY)
    eng.stop()
    with pytest.raises(NotReady):
        job.wait(10)
    with pytest.raises(NotReady):
        eng.submit([("Hello.", EN)], resolve("de"), GREEDY)


def test_one_segment_in_flight_serves_them_one_by_one(cpu_settings):
    from hymt.engine.startup import start
    from hymt.planner.decide import decision_for

    settings = cpu_settings.replace(max_in_flight=1, max_new_tokens=6)
    eng = start(settings, decision_for(settings))  # its warm-up sampled two rows once, which one row cannot hold
    try:
        assert eng.scheduler.max_in_flight == 1
        assert len(eng.submit([("One. Two. Three.", EN)], resolve("de"), GREEDY).wait(120)) == 1
        assert eng.runner.stats.max_in_flight_seen == 1
    finally:
        eng.stop()
