"""Continuous batching bookkeeping without a model: admission, arena ranges, alternation, chunks, preemption."""

import pytest

from hymt.engine.allocator import RangeAllocator
from hymt.engine.scheduler import PAD_TOKENS, Scheduler, Sequence, State
from hymt.errors import Overloaded, PayloadTooLarge


def seq(job=1, index=0, prompt=10, new=10, adapter=None):
    return Sequence(prompt_ids=[7] * prompt, max_new_tokens=new, adapter=adapter, job_id=job, index=index)


def run_prefill(step):
    """What the engine does after a prefill step: the chunks are cached, and a chunk that ends samples a token."""
    for chunk in step.chunks:
        chunk.seq.num_cached += chunk.length
        if chunk.samples:
            chunk.seq.output_ids.append(1)


def test_allocator_first_fit_and_merging_neighbours():
    a = RangeAllocator(100, reserved_tokens=1)
    starts = [a.allocate(30) for _ in range(3)]
    assert starts == [1, 31, 61] and a.allocate(10) is None and a.free_tokens == 9
    a.free(31, 30)
    assert a.allocate(40) is None and a.largest_free == 30
    a.free(1, 30)
    a.free(61, 30)
    assert a.free_tokens == 99 and a.largest_free == 99 and a.used_tokens == 0
    with pytest.raises(ValueError, match="freed twice"):
        a.free(1, 10)


def test_segments_are_admitted_in_order_while_rows_and_ranges_last():
    s = Scheduler(kv_tokens=PAD_TOKENS + 60, max_in_flight=8, prefill_tokens=1000, max_queue=100)
    s.add([seq(index=i) for i in range(4)])  # each needs 20 tokens: 3 fit
    step = s.schedule()
    assert step.kind == "prefill" and [c.seq.index for c in step.chunks] == [0, 1, 2]
    assert s.num_waiting == 1 and len({c.seq.row for c in step.chunks}) == 3
    assert [c.seq.kv_start for c in step.chunks] == [1, 21, 41]


def test_a_segment_joins_at_the_next_step_and_leaves_the_step_it_ends():
    s = Scheduler(kv_tokens=1000, max_in_flight=8, prefill_tokens=1000, max_queue=100)
    first = seq(index=0)
    s.add([first])
    run_prefill(s.schedule())
    assert s.schedule().kind == "decode"
    s.add([seq(job=2)])
    newcomer = s.schedule()  # alternation: the newcomer is prefilled after one decoding step
    assert newcomer.kind == "prefill" and newcomer.chunks[0].seq.job_id == 2
    rider = newcomer.chunks[1]  # the running segment decodes its next token in the same step
    assert (rider.seq, rider.start, rider.length, rider.decoding, rider.samples) == (first, 10, 1, True, True)
    run_prefill(newcomer)
    assert [q.job_id for q in s.schedule().seqs] == [1, 2]
    s.finish(first)
    assert first.state is State.FINISHED and [q.job_id for q in s.schedule().seqs] == [2]
    assert s.allocator.used_tokens == 20


def test_prefill_and_decoding_alternate_so_newcomers_never_stall_the_batch_for_long():
    s = Scheduler(kv_tokens=10_000, max_in_flight=64, prefill_tokens=25, max_queue=100)
    s.add([seq(index=0)])
    run_prefill(s.schedule())
    s.add([seq(job=2, index=i) for i in range(4)])
    kinds = []
    for _ in range(6):
        step = s.schedule()
        kinds.append(step.kind)
        if step.kind == "prefill":
            assert sum(c.length for c in step.chunks if not c.decoding) <= 25
            run_prefill(step)
        else:
            for q in step.seqs:
                q.num_cached += 1
                q.output_ids.append(1)
    assert kinds == ["decode", "prefill", "decode", "prefill", "decode", "decode"]


def kinds_until_prefill(s, limit=20):
    """Steps until the next prefill, decoding the ready ones meanwhile; the prefill step is run too."""
    kinds = []
    for _ in range(limit):
        step = s.schedule()
        kinds.append(step.kind)
        if step.kind == "prefill":
            run_prefill(step)
            return kinds
        for q in step.seqs:
            q.num_cached += 1
            q.output_ids.append(1)
    return kinds


def test_in_a_large_batch_newcomers_gather_so_one_prefill_step_takes_several():
    s = Scheduler(kv_tokens=10_000, max_in_flight=64, prefill_tokens=200, max_queue=100)
    s.add([seq(index=i) for i in range(16)])
    run_prefill(s.schedule())
    s.add([seq(job=2)])
    kinds = [s.schedule().kind]  # 16 decoding: a newcomer waits two decoding steps
    s.add([seq(job=3)])
    kinds += kinds_until_prefill(s)
    assert kinds == ["decode", "decode", "prefill"]
    assert {q.job_id for q in s.running if q.num_cached == 10} == {2, 3}
    s.add([seq(job=4, index=i, prompt=80) for i in range(3)])  # a full prefill step's worth goes at once
    assert kinds_until_prefill(s) == ["decode", "prefill"]  # (right after a prefill, one decoding step first)


def test_when_no_one_else_can_join_newcomers_are_prefilled_without_gathering():
    s = Scheduler(kv_tokens=10_000, max_in_flight=17, prefill_tokens=200, max_queue=100)
    s.add([seq(index=i) for i in range(16)])
    run_prefill(s.schedule())
    s.schedule()
    s.add([seq(job=2)])
    assert kinds_until_prefill(s) == ["prefill"]


def test_a_long_prompt_is_prefilled_in_chunks_and_samples_only_at_its_end():
    s = Scheduler(kv_tokens=1000, max_in_flight=8, prefill_tokens=16, max_queue=100)
    long = seq(prompt=40)
    s.add([long])
    chunks = []
    while long.needs_prefill:
        step = s.schedule()
        chunks += [(c.start, c.length, c.samples) for c in step.chunks]
        run_prefill(step)
    assert chunks == [(0, 16, False), (16, 16, False), (32, 8, True)]


def test_adapters_are_never_mixed_in_flight_and_keep_arrival_order():
    s = Scheduler(kv_tokens=1000, max_in_flight=8, prefill_tokens=1000, max_queue=100)
    s.add([seq(index=0, adapter="en-bo"), seq(index=1, adapter=None), seq(index=2, adapter="en-bo")])
    step = s.schedule()
    assert [c.seq.index for c in step.chunks] == [0]  # index 2 may not overtake index 1
    s.finish(step.chunks[0].seq)
    assert [c.seq.index for c in s.schedule().chunks] == [1]


def test_preempted_segments_return_first_with_their_output():
    s = Scheduler(kv_tokens=1000, max_in_flight=4, prefill_tokens=1000, max_queue=100)
    a, b, c = seq(index=0), seq(index=1), seq(index=2)
    s.add([a, b])
    run_prefill(s.schedule())
    s.add([c])
    s.preempt([b])
    assert [q.index for q in s.waiting] == [1, 2] and b.output_ids == [1] and b.num_cached == 0
    assert b.state is State.WAITING and b.row == -1 and s.allocator.used_tokens == 20
    assert s.schedule().seqs == [a]
    step = s.schedule()
    assert [(ch.seq.index, ch.start, ch.length) for ch in step.chunks] == [(1, 0, 11), (2, 0, 10), (0, 10, 1)]
    s.shrink()
    assert s.max_in_flight == 3 and s.prefill_tokens == 500


def test_a_full_queue_refuses_the_whole_job_and_an_oversized_segment_is_refused():
    s = Scheduler(kv_tokens=100, max_in_flight=4, prefill_tokens=100, max_queue=5)
    s.add([seq(index=i) for i in range(4)])
    with pytest.raises(Overloaded):
        s.add([seq(job=2, index=0), seq(job=2, index=1)])
    assert s.num_waiting == 4
    with pytest.raises(PayloadTooLarge, match="KV tokens") as refused:
        s.add([seq(prompt=90, new=20)])
    assert refused.value.status == 413


def test_removing_a_job_frees_its_rows_and_ranges():
    s = Scheduler(kv_tokens=1000, max_in_flight=4, prefill_tokens=1000, max_queue=50)
    s.add([seq(job=1, index=i) for i in range(3)] + [seq(job=2, index=i) for i in range(2)])
    s.schedule()
    gone = s.remove_job(1)
    assert len(gone) == 3 and all(q.state is State.FINISHED for q in gone)
    assert [q.job_id for q in s.running] == [2] and [q.job_id for q in s.waiting] == [2]
    assert s.allocator.used_tokens == 20 and sorted(s._free_rows) == [0, 1, 2]
