"""Continuous batching bookkeeping without a model: the fair order (classes, clients, requests), arena ranges,
alternation, chunks, postprocessing, preemption and aborts."""

import itertools

import pytest

from hymt.engine.allocator import RangeAllocator
from hymt.engine.requests import Priority, Request
from hymt.engine.sampling_params import Sampling
from hymt.engine.scheduler import PAD_TOKENS, Scheduler, Step
from hymt.engine.sequence import Sequence, State
from hymt.engine.timings import Histogram

STOP = 2
IDS = itertools.count(1)
BATCH, INTERACTIVE = Priority.BATCH, Priority.INTERACTIVE


def seq(group=1, prompt=10, new=10, adapter=None, client="a", priority=INTERACTIVE, stream=False, min_new=0):
    request = Request(
        id=next(IDS),
        prompt_ids=[7] * prompt,
        max_new_tokens=new,
        sampling=Sampling(greedy=True),
        min_new_tokens=min_new,
        adapter=adapter,
        priority=priority,
        client=client,
        group=group,
        stream=stream,
    )
    return Sequence(request)


def scheduler(
    kv_tokens=10_000, max_in_flight=8, prefill_tokens=1000, batch_min_share=0.25, batch_max_share=1.0, **kwargs
):
    return Scheduler(
        kv_tokens, max_in_flight, prefill_tokens, batch_min_share, [STOP], batch_max_share=batch_max_share, **kwargs
    )


def run_prefill(step):
    """What the engine does after a prefill step: the chunks are cached, and a chunk that ends samples a token."""
    for chunk in step.chunks:
        chunk.seq.num_cached += chunk.length
        if chunk.samples:
            chunk.seq.output_ids.append(1)


def admitted(s):
    """The segments the next prefill step takes, in the order they took their rows (decoding steps before it are
    scheduled and left unrun)."""
    for _ in range(10):
        step = s.schedule()
        if step.kind == "prefill":
            return [c.seq for c in step.chunks if not c.decoding]
    raise AssertionError("no prefill step")


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


def test_segments_of_one_request_are_admitted_in_order_while_rows_and_ranges_last():
    s = scheduler(kv_tokens=PAD_TOKENS + 60)
    seqs = [seq() for _ in range(4)]  # each needs 20 tokens: 3 fit
    s.add(seqs)
    assert admitted(s) == seqs[:3]
    assert len(s.waiting) == 1 and len({q.row for q in seqs[:3]}) == 3
    assert [q.kv_start for q in seqs[:3]] == [1, 21, 41]


def test_two_clients_take_turns_however_many_segments_each_queued():
    s = scheduler(max_in_flight=6)
    document = [seq(client="a") for _ in range(100)]
    s.add(document)
    other = [seq(client="b", group=2) for _ in range(3)]
    s.add(other)
    order = [q.request.client for q in admitted(s)]
    assert order == ["a", "b", "a", "b", "a", "b"]


def test_a_newcomer_starts_at_the_current_turn_not_behind_a_long_queue_nor_with_banked_credit():
    s = scheduler(max_in_flight=4)
    s.add([seq(client="heavy") for _ in range(50)])
    run_prefill(s.schedule())  # four of heavy's segments take every row
    sentence = seq(client="person", group=2)
    s.add([sentence])
    s.finish(s.running[0])  # a row frees: the person's sentence takes it, not heavy's next segment
    assert admitted(s) == [sentence]
    s.finish(sentence)
    later = seq(client="person", group=3)  # idle meanwhile: comes back at the turn, with no credit saved up
    s.add([later])
    s.finish(s.running[0])
    s.finish(s.running[0])
    assert [q.request.client for q in admitted(s)] == ["person", "heavy", "heavy"]


def test_one_clients_requests_take_turns_among_themselves():
    s = scheduler(max_in_flight=4)
    s.add([seq(client="a", group=1) for _ in range(10)])
    s.add([seq(client="a", group=2) for _ in range(10)])
    assert [q.request.group for q in admitted(s)] == [1, 2, 1, 2]


def test_turns_are_counted_in_tokens_not_segments():
    s = scheduler(max_in_flight=6)
    s.add([seq(client="long", prompt=60, new=40) for _ in range(5)])  # 100 tokens a segment
    s.add([seq(client="short", group=2, prompt=5, new=5) for _ in range(20)])  # 10 tokens a segment
    order = [q.request.client for q in admitted(s)]
    assert order.count("short") == 5 and order.count("long") == 1


def test_interactive_work_goes_first_and_batch_work_keeps_its_minimum_share():
    s = scheduler(max_in_flight=8, batch_min_share=0.25)
    s.add([seq(client="doc", priority=BATCH) for _ in range(50)])
    s.add([seq(client=f"person{i}", group=10 + i) for i in range(20)])
    first = admitted(s)
    assert [q.priority for q in first].count(BATCH) == 2  # a quarter of 8 rows, no more while people wait
    assert s.rows_held == {INTERACTIVE: 6, BATCH: 2}


def test_beside_interactive_work_in_flight_batch_work_holds_at_most_its_ceiling_and_takes_every_row_after():
    s = scheduler(max_in_flight=8, batch_min_share=0.25, batch_max_share=0.5)
    person = seq(client="person", new=3)
    s.add([person])
    s.add([seq(client="doc", priority=BATCH, new=50) for _ in range(50)])
    admitted(s)
    assert s.rows_held == {INTERACTIVE: 1, BATCH: 4}  # half of 8 rows, three left free while the sentence runs
    while person.state is not State.FINISHED:  # the sentence decodes to its end; no batch segment joins meanwhile
        step = s.schedule()
        assert s.rows_held[BATCH] == 4
        s.postprocess(step, [5] * len(step.sequences))
    s.schedule()
    assert s.rows_held == {INTERACTIVE: 0, BATCH: 8}  # alone again: every row


def test_the_ceiling_never_goes_below_the_floor():
    s = scheduler(max_in_flight=8, batch_min_share=0.5, batch_max_share=0.5)
    s.add([seq(client=f"person{i}", group=10 + i) for i in range(20)])
    s.add([seq(client="doc", priority=BATCH) for _ in range(50)])
    admitted(s)
    assert s.rows_held == {INTERACTIVE: 4, BATCH: 4}


def test_batch_work_alone_takes_every_row():
    s = scheduler(max_in_flight=8)
    s.add([seq(client="doc", priority=BATCH) for _ in range(50)])
    assert len(admitted(s)) == 8 and s.rows_held[BATCH] == 8


def test_interactive_chunks_come_first_in_a_prefill_step():
    s = scheduler(max_in_flight=8, prefill_tokens=25)
    s.add([seq(client="doc", priority=BATCH) for _ in range(2)])
    s.add([seq(client="person", group=2)])
    step = s.schedule()
    assert [c.seq.priority for c in step.chunks] == [INTERACTIVE, BATCH, BATCH]
    assert [c.length for c in step.chunks] == [10, 10, 5]  # the step's budget: the person's whole prompt first


def test_a_segment_joins_at_the_next_step_and_leaves_the_step_it_ends():
    s = scheduler()
    first = seq(new=3)
    s.add([first])
    step = s.schedule()
    assert step.kind == "prefill"
    s.postprocess(step, [5])
    assert s.schedule().kind == "decode"
    newcomer = seq(group=2)
    s.add([newcomer])
    step = s.schedule()  # alternation: the newcomer is prefilled after one decoding step
    assert step.kind == "prefill" and step.chunks[0].seq is newcomer
    rider = step.chunks[1]  # the running segment decodes its next token in the same step
    assert (rider.seq, rider.start, rider.length, rider.decoding, rider.samples) == (first, 10, 1, True, True)
    outputs, finished = s.postprocess(step, [8, 6])
    assert finished == [] and outputs == []  # not streaming: nothing until the end
    step = s.schedule()
    assert step.seqs == [first, newcomer]
    outputs, finished = s.postprocess(step, [9, 6])  # first reaches its budget of 3
    assert finished == [first] and first.state is State.FINISHED
    assert [(o.id, o.token_ids, o.finished) for o in outputs] == [(first.id, (5, 6, 9), True)]
    assert s.schedule().seqs == [newcomer] and s.allocator.used_tokens == 20


def test_postprocess_stops_at_a_stop_token_after_min_new_tokens_and_streams_every_token():
    s = scheduler()
    streamed, early = seq(stream=True, min_new=2), seq(group=2)
    s.add([streamed, early])
    step = s.schedule()
    outputs, finished = s.postprocess(step, [STOP, STOP])  # the stop ends `early` (never emitted as text)
    assert finished == [early]
    # Before min_new_tokens a stop token is an ordinary token, streamed as any other.
    assert [(o.id, o.token_ids, o.finished) for o in outputs] == [(streamed.id, (STOP,), False), (early.id, (), True)]
    assert streamed.output_ids == [STOP]
    outputs, finished = s.postprocess(s.schedule(), [4])
    assert [(o.token_ids, o.finished) for o in outputs] == [((4,), False)]
    outputs, finished = s.postprocess(s.schedule(), [STOP])
    assert finished == [streamed] and [(o.token_ids, o.finished) for o in outputs] == [((), True)]
    assert s.tokens_out == {INTERACTIVE: 2, BATCH: 0} and s.segments_done == 2


def test_segments_times_by_class_as_each_ends_a_stop_token_counted_as_a_step():
    now = [10.0]
    s = scheduler(clock=lambda: now[0])
    person, document = seq(new=3), seq(group=2, new=2, priority=BATCH)
    person.submitted, document.submitted = 9.0, 9.5
    s.add([person])
    s.add([document])
    step = s.schedule()  # both take a row at 10.0
    now[0] = 10.2
    s.postprocess(step, [5, 5])  # their first tokens
    now[0] = 10.3
    assert s.postprocess(s.schedule(), [6, 6])[1] == [document]  # its budget of 2
    now[0] = 10.5
    assert s.postprocess(s.schedule(), [STOP])[1] == [person]  # a stop token: 3 sampled, 2 gaps after the first
    times = s.figures()["timings"]
    expected = {
        "interactive": {"queue": 1.0, "first_token": 1.2, "token": 0.15, "segment": 1.5},
        "batch": {"queue": 0.5, "first_token": 0.7, "token": 0.1, "segment": 0.8},
    }
    for cls, phases in expected.items():
        for phase, seconds in phases.items():
            histogram = times[phase, cls]
            assert histogram.count == 1 and histogram.total == pytest.approx(seconds), (phase, cls)
    # A snapshot is a copy: what ends later is not in it.
    s.add([late := seq(group=3)])
    s.postprocess(s.schedule(), [STOP])
    assert late.state is State.FINISHED and times["segment", "interactive"].count == 1
    assert s.figures()["timings"]["segment", "interactive"].count == 2


def test_timings_histogram_buckets_are_cumulative_with_the_bound_itself_inside():
    h = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 2.0):
        h.observe(value)
    assert h.cumulative() == [("0.1", 2), ("1.0", 3), ("+Inf", 4)] and h.total == pytest.approx(2.65)


def test_prefill_and_decoding_alternate_so_newcomers_never_stall_the_batch_for_long():
    s = scheduler(max_in_flight=64, prefill_tokens=25)
    s.add([seq()])
    run_prefill(s.schedule())
    s.add([seq(group=2) for _ in range(4)])
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


@pytest.mark.parametrize("priority", [INTERACTIVE, BATCH])
def test_in_a_large_batch_newcomers_gather_so_one_prefill_step_takes_several(priority):
    s = scheduler(max_in_flight=64, prefill_tokens=200)
    s.add([seq(priority=priority) for _ in range(16)])
    run_prefill(s.schedule())
    s.add([seq(group=2, priority=priority)])
    kinds = [s.schedule().kind]  # 16 decoding: a newcomer waits two decoding steps
    s.add([seq(group=3, priority=priority)])
    kinds += kinds_until_prefill(s)
    assert kinds == ["decode", "decode", "prefill"]
    assert {q.request.group for q in s.running if q.num_cached == 10} == {2, 3}
    s.add([seq(group=4, prompt=80, priority=priority) for _ in range(3)])  # a full prefill step's worth goes at once
    assert kinds_until_prefill(s) == ["decode", "prefill"]  # (right after a prefill, one decoding step first)


def test_a_long_prompt_is_prefilled_in_chunks_and_samples_only_at_its_end():
    s = scheduler(prefill_tokens=16)
    long = seq(prompt=40)
    s.add([long])
    chunks = []
    while long.needs_prefill:
        step = s.schedule()
        chunks += [(c.start, c.length, c.samples) for c in step.chunks]
        run_prefill(step)
    assert chunks == [(0, 16, False), (16, 16, False), (32, 8, True)]


def test_adapters_are_never_mixed_in_flight_and_keep_arrival_order():
    s = scheduler()
    a, b, c = seq(adapter="en-bo"), seq(adapter=None), seq(adapter="en-bo")
    s.add([a, b, c])
    assert admitted(s) == [a]  # c may not overtake b
    s.finish(a)
    assert admitted(s) == [b]


def test_out_of_memory_requeues_the_newest_half_batch_first_with_their_output_and_shrinks():
    s = scheduler(max_in_flight=4)
    person, doc1, doc2 = seq(), seq(client="doc", priority=BATCH), seq(client="doc", priority=BATCH)
    s.add([person, doc1, doc2])
    step = s.schedule()
    run_prefill(step)
    requeued, hopeless = s.recover(Step("decode", seqs=s.running))
    assert requeued == [doc2, doc1] and hopeless == []
    assert all(q.state is State.WAITING and q.row == -1 and q.num_cached == 0 for q in requeued)
    assert doc1.output_ids == [1] and s.running == [person]
    assert s.max_in_flight == 3 and s.prefill_tokens == 500
    assert s.schedule().kind == "decode"  # alternation: the person decodes once first
    step = s.schedule()
    assert [(ch.seq, ch.start, ch.length) for ch in step.chunks] == [(doc1, 0, 11), (doc2, 0, 11), (person, 10, 1)]


def test_a_segment_out_of_memory_alone_too_often_is_given_up():
    s = scheduler(max_in_flight=4)
    alone = seq()
    s.add([alone])
    for _ in range(2):
        step = s.schedule()
        assert s.recover(step) == ([alone], [])
    assert s.recover(s.schedule()) == ([], [alone]) and alone.state is State.FINISHED and not s.waiting


def test_aborting_frees_rows_and_ranges_and_drops_waiting_segments():
    s = scheduler(max_in_flight=4)
    one = [seq(group=1) for _ in range(3)]
    two = [seq(group=2) for _ in range(3)]
    s.add(one + two)
    s.schedule()  # the two requests take turns: two segments of each in flight
    s.abort({q.id for q in one})
    assert all(q.state is State.FINISHED and q.row == -1 for q in one[:2]) and one[2] not in list(s.waiting)
    assert s.running == two[:2] and list(s.waiting) == two[2:]
    assert s.allocator.used_tokens == 40 and sorted(s._free_rows) == sorted({0, 1, 2, 3} - {q.row for q in two[:2]})
    assert s.waiting.segments == {INTERACTIVE: 1, BATCH: 0} and s.waiting.owed_tokens[INTERACTIVE] == 10
    assert sorted(q.id for q in s.drain()) == sorted(q.id for q in two) and not s.running and not s.waiting


@pytest.mark.parametrize("prompt,budget,lengths", [(33, 16, [16, 15, 2]), (17, 16, [15, 2]), (18, 16, [16, 2])])
def test_a_prefill_chunk_never_leaves_a_prompt_one_token_short(prompt, budget, lengths):
    """A segment is decoded once its prompt's last token has been prefilled and sampled: a chunk cut by the step's
    budget one token before the end would leave it decoding from its row's stale state (the row's previous
    segment's token, position and range)."""
    s = scheduler(prefill_tokens=budget)
    a = seq(prompt=prompt)
    s.add([a])
    taken = []
    while not a.output_ids:
        step = s.schedule()
        assert step.kind == "prefill"
        taken += [c.length for c in step.chunks]
        run_prefill(step)
    assert taken == lengths


def test_a_step_whose_budget_would_leave_a_newcomer_one_token_short_leaves_it_for_the_next():
    s = scheduler(prefill_tokens=16)
    a, b = seq(prompt=15), seq(prompt=2)
    s.add([a, b])
    step = s.schedule()
    assert [(c.seq, c.length) for c in step.chunks] == [(a, 15)]  # b's 2 tokens do not fit the 1 left
