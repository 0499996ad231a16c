"""Kept prompt prefixes (engine/prefixes.py) and how the scheduler uses them: a prefix is copied aside by the step
that completes it, copied into each later newcomer's range before its step (which then prefills from the prefix's
end), keyed by its tokens and adapter, given up oldest first for room, and forgotten when its step fails."""

import itertools

import pytest

from hymt.engine import prefixes as prefixes_module
from hymt.engine.allocator import RangeAllocator
from hymt.engine.prefixes import MIN_PREFIX_TOKENS, Prefixes
from hymt.engine.requests import Request
from hymt.engine.sampling_params import Sampling
from hymt.engine.scheduler import PAD_TOKENS, Scheduler
from hymt.engine.sequence import Sequence

IDS = itertools.count(1)
INSTRUCTION = list(range(100, 112))  # 12 tokens every prompt to one target starts with
SHARED = len(INSTRUCTION)


def seq(text=(5, 6, 7), shared=SHARED, instruction=INSTRUCTION, adapter=None, new=4) -> Sequence:
    return Sequence(
        Request(
            id=next(IDS),
            prompt_ids=[*instruction, *text],
            max_new_tokens=new,
            sampling=Sampling(greedy=True),
            adapter=adapter,
            prefix_tokens=shared,
        )
    )


def placed(s: Sequence, start: int, cached: int = 0) -> Sequence:
    s.kv_start, s.num_cached = start, cached
    return s


def test_the_allocator_takes_a_kept_range_from_the_end():
    allocator = RangeAllocator(100, 1)
    assert allocator.allocate(10, from_end=True) == 90
    assert allocator.allocate(20) == 1
    assert allocator.allocate(69, from_end=True) == 21 and allocator.free_tokens == 0
    assert allocator.allocate(1, from_end=True) is None
    allocator.free(90, 10)
    allocator.free(21, 69)
    assert allocator.largest_free == 79


def test_a_prefix_is_kept_by_the_step_that_completes_it_and_copied_into_later_newcomers():
    allocator = RangeAllocator(1000, 1)
    kept = Prefixes(allocator)
    first = placed(seq(), allocator.allocate(19))
    assert kept.keep(first, prefilled_to=8) is None  # its chunk stops short of the prefix
    save = kept.keep(first, prefilled_to=15)
    assert save == (first.kv_start, 1000 - 12, 12) and len(kept) == 1 and kept.kept_tokens == 12
    assert kept.keep(placed(seq(), 300), prefilled_to=15) is None  # kept once
    later = placed(seq(text=(9, 9, 9, 9)), allocator.allocate(20))
    assert kept.reuse(later) == (1000 - 12, later.kv_start, 12)
    assert kept.hits == 1 and kept.tokens_reused == 12


@pytest.mark.parametrize(
    "other",
    [
        dict(instruction=[*INSTRUCTION[:-1], 999]),  # another target's instruction
        dict(adapter="de-en"),  # a LoRA adapter's keys differ
        dict(shared=MIN_PREFIX_TOKENS - 1, instruction=INSTRUCTION[: MIN_PREFIX_TOKENS - 1]),  # too short to bother
        dict(shared=0),  # a prompt whose start is its own (glossary, context)
    ],
)
def test_only_the_same_tokens_under_the_same_adapter_are_reused(other):
    allocator = RangeAllocator(1000, 1)
    kept = Prefixes(allocator)
    assert kept.keep(placed(seq(), 1), prefilled_to=15)
    assert kept.reuse(placed(seq(**other), 100)) is None


def test_a_prompt_gets_at_least_its_last_two_tokens_prefilled():
    kept = Prefixes(RangeAllocator(1000, 1))
    assert kept.keep(placed(seq(text=(5,)), 1), prefilled_to=13) is None  # 12 shared of 13: nothing left to sample
    assert kept.keep(placed(seq(text=(5, 6)), 1), prefilled_to=14)


def test_room_is_made_by_giving_up_the_oldest_used_prefixes(monkeypatch):
    allocator = RangeAllocator(101, 1)
    kept = Prefixes(allocator)
    for n in range(3):
        assert kept.keep(placed(seq(instruction=[n] * 12), 1), prefilled_to=15)
    assert kept.reuse(placed(seq(instruction=[0] * 12), 1))  # the first is now the latest used
    assert allocator.largest_free == 64
    # The second went first, then the third, whose range joins the free space; the first stays.
    assert kept.make_room(70) and len(kept) == 1 and allocator.largest_free == 88 and kept.kept_tokens == 12
    assert kept.reuse(placed(seq(instruction=[0] * 12), 1))
    assert not kept.make_room(101) and len(kept) == 0
    monkeypatch.setattr(prefixes_module, "MAX_PREFIXES", 2)
    for n in range(3):
        kept.keep(placed(seq(instruction=[n] * 12), 1), prefilled_to=15)
    assert len(kept) == 2 and kept.reuse(placed(seq(instruction=[0] * 12), 1)) is None


def test_a_failed_steps_saves_are_forgotten_and_their_ranges_freed():
    allocator = RangeAllocator(1000, 1)
    kept = Prefixes(allocator)
    save = kept.keep(placed(seq(), 1), prefilled_to=15)
    kept.forget([save])
    assert len(kept) == 0 and allocator.free_tokens == 999 and kept.kept_tokens == 0


def test_reuse_off_keeps_nothing():
    kept = Prefixes(RangeAllocator(1000, 1), enabled=False)
    assert kept.keep(placed(seq(), 1), prefilled_to=15) is None


def scheduler(kv_tokens=10_000, reuse=True, prefill_tokens=1000):
    return Scheduler(kv_tokens, 8, prefill_tokens, 0.25, [2], prefix_reuse=reuse)


def run(step):
    for chunk in step.chunks:
        chunk.seq.num_cached += chunk.length
        if chunk.samples:
            chunk.seq.output_ids.append(1)


def test_the_scheduler_keeps_a_prefix_then_prefills_newcomers_from_its_end():
    s = scheduler()
    first = seq()
    s.add([first])
    step = s.schedule()
    assert step.kind == "prefill" and step.copies == []
    assert step.saves == [(first.kv_start, 10_000 - 12, 12)]
    run(step)
    later = seq(text=(8, 8, 8, 8, 8))
    s.add([later])
    copies = []
    while (step := s.schedule()).kind != "prefill":  # the newcomer is admitted with a decoding step first
        copies += step.copies
    assert copies + step.copies == [(10_000 - 12, later.kv_start, 12)] and step.saves == []
    chunk = step.chunks[0]
    assert chunk.seq is later and (chunk.start, chunk.length) == (12, 5) and later.reused == 12


def test_newcomers_sharing_a_prefix_the_step_keeps_wait_one_prefill_step_and_take_it_from_there():
    s = scheduler()
    first, second, other = seq(), seq(text=(9, 9)), seq(instruction=[1] * 12)
    s.add([first, second, other])
    step = s.schedule()
    assert [c.seq for c in step.chunks] == [first, other]  # the second waits for the instruction the first keeps
    assert len(step.saves) == 2 and step.copies == []
    run(step)
    while (step := s.schedule()).kind != "prefill":
        pass
    assert step.copies == [(10_000 - 12, second.kv_start, 12)]
    assert [(c.seq, c.start, c.length) for c in step.chunks if not c.decoding] == [(second, 12, 2)]


def test_a_prefix_is_kept_when_a_chunk_crosses_it_not_before():
    s = scheduler(prefill_tokens=8)
    first = seq()
    s.add([first])
    step = s.schedule()
    assert step.chunks[0].length == 8 and step.saves == []
    run(step)
    step = s.schedule()
    assert step.saves == [(first.kv_start, 10_000 - 12, 12)]


def test_out_of_memory_forgets_the_steps_saves_and_requeues_newcomers_given_a_prefix():
    s = scheduler()
    first = seq(new=20)
    s.add([first])
    run(s.schedule())
    later = seq(text=(8, 8, 8))
    s.add([later])
    while (step := s.schedule()).kind != "prefill":
        pass
    assert step.copies and later.num_cached == 12
    s.recover(step)
    assert later.num_cached == 0 and later.reused == 0 and later not in s.running
    assert len(s.prefixes) == 1  # kept by an earlier step that ran


def test_a_segment_that_needs_the_whole_arena_gets_it_back_from_kept_prefixes():
    s = scheduler(kv_tokens=40)
    first = seq()
    s.add([first])
    run(s.schedule())
    s.finish(first)
    assert s.allocator.largest_free == 40 - PAD_TOKENS - 12
    big = seq(instruction=[1] * 12, text=(1,) * 20, new=40 - PAD_TOKENS - 32)
    s.add([big])
    s.schedule()
    assert big in s.running and len(s.prefixes) == 0


def test_without_reuse_every_prompt_is_prefilled_whole():
    s = scheduler(reuse=False)
    s.add([seq()])
    step = s.schedule()
    run(step)
    later = seq()
    s.add([later])
    while (step := s.schedule()).kind != "prefill":
        assert step.copies == []
    assert step.copies == step.saves == [] and step.chunks[0].start == 0
