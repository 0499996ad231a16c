"""The real engine on the tiny test model: batching across jobs, order, line structure, errors, OOM recovery."""

import threading

import pytest
import torch

from hymt.engine.kvcache import make_cache
from hymt.engine.scheduler import Work
from hymt.errors import Overloaded
from hymt.languages import resolve
from hymt.prompts import Sampling

GREEDY = Sampling(greedy=True)


def test_engine_runs_on_cpu_profile(engine):
    assert engine.decision.profile == "cpu"
    assert engine.attention == "sdpa"
    assert engine.alive


def test_results_come_back_in_order_and_deterministic(engine):
    texts = ["Hello world.", "How are you?", "Good morning, friend."]
    first = engine.submit([(t, resolve("en")) for t in texts], resolve("zh"), GREEDY).wait(120)
    alone = [engine.submit([(t, resolve("en"))], resolve("zh"), GREEDY).wait(120)[0] for t in texts]
    assert first == alone
    assert len(set(first)) == 3


def test_line_structure_survives_translation(engine):
    text = "First line. Second sentence.\n\n  Indented third.\n\t\nLast line without newline"
    (out,) = engine.submit([(text, resolve("en"))], resolve("de"), GREEDY).wait(120)
    assert out.count("\n") == text.count("\n")
    lines_out = out.split("\n")
    assert lines_out[1] == "" and lines_out[3] == "\t"
    assert lines_out[2].startswith("  ")


def test_concurrent_jobs_share_batches(engine):
    before = engine.runner.stats.batches
    jobs = [engine.submit([(f"Sentence number {i}.", resolve("en"))], resolve("fr"), GREEDY) for i in range(6)]
    for job in jobs:
        job.wait(120)
    assert engine.runner.stats.batches - before < 6


def test_listener_sees_every_segment_then_done(engine):
    events = []
    done = threading.Event()

    def listen(event):
        events.append(event.kind)
        if event.kind == "done":
            done.set()

    engine.submit([("One. Two. Three.", resolve("en"))], resolve("ja"), GREEDY, listener=listen)
    assert done.wait(120)
    assert events[-1] == "done" and events.count("segment") >= 1


def test_empty_text_finishes_at_once(engine):
    assert engine.submit([("\n\n", resolve("en"))], resolve("zh"), GREEDY).wait(5) == ["\n\n"]


def test_queue_limit_refuses_at_once(engine, monkeypatch):
    monkeypatch.setattr(engine.scheduler, "max_queue", 1)
    with pytest.raises(Overloaded):
        engine.submit([("A.", resolve("en")), ("B.", resolve("en"))], resolve("de"), GREEDY)


def test_cancel_ends_the_job(engine):
    job = engine.submit([("Some text. " * 30, resolve("en"))], resolve("de"), GREEDY)
    engine.cancel(job)
    assert job.done.wait(60) and job.cancelled


def test_out_of_memory_splits_the_batch_and_loses_nothing(engine, monkeypatch):
    runner = engine.runner
    real = runner.generate

    def fake_oom(batch, cancelled):
        if len(batch) > 1:
            raise torch.OutOfMemoryError("simulated")
        return real(batch, cancelled)

    monkeypatch.setattr(runner, "generate", fake_oom)
    before = runner.stats.oom_events
    prompt = runner.encode("<|startoftext|>hi<|extra_0|>")
    batch = [Work(job_id=0, index=i, prompt_ids=prompt, max_new_tokens=4, group=(None, GREEDY)) for i in range(4)]
    outputs = runner.run(batch)
    assert len(outputs) == 4 and all(isinstance(o, str) for o in outputs)
    assert runner.stats.oom_events - before == 3


def test_int8_kv_cache_matches_16_bit_cache_under_greedy_decoding(engine):
    model = engine.runner.loaded.model
    tok = engine.runner.loaded.tokenizer
    enc = tok(["<|startoftext|>a longer prompt than the other<|extra_0|>", "<|startoftext|>short<|extra_0|>"],
              add_special_tokens=False, return_tensors="pt", padding=True)
    kwargs = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False)
    plain = model.generate(**enc, past_key_values=make_cache("bf16", 2), **kwargs)
    int8 = model.generate(**enc, past_key_values=make_cache("int8", 2), **kwargs)
    assert torch.equal(plain, int8)
    layer = make_cache("int8", 1).layers[0]
    states = torch.randn(2, 2, 5, 16)
    layer.update(states, states)
    keys, _ = layer.update(states[:, :, :1], states[:, :, :1])
    assert keys.shape == (2, 2, 6, 16)
    assert layer._quantized_keys[0].dtype == torch.int8
    assert torch.allclose(keys[:, :, :5], states, atol=states.abs().max().item() / 100)
