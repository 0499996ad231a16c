import pytest

from hymt.engine.scheduler import Scheduler, Work, padded_cost
from hymt.errors import Overloaded


def work(job, index, prompt=10, new=10, group="g"):
    return Work(job_id=job, index=index, prompt_ids=[0] * prompt, max_new_tokens=new, group=group)


def test_batches_stay_within_the_padded_token_budget():
    s = Scheduler(batch_tokens=100, max_batch_size=32, max_queue=100)
    s.add([work(1, i) for i in range(12)])
    batch = s.next_batch()
    assert len(batch) == 5 and padded_cost(batch) == 100
    assert s.num_waiting == 7


def test_a_segment_larger_than_the_budget_still_runs_alone():
    s = Scheduler(batch_tokens=10, max_batch_size=32, max_queue=100)
    s.add([work(1, 0, prompt=50)])
    assert len(s.next_batch()) == 1


def test_batches_mix_jobs_but_never_groups():
    s = Scheduler(batch_tokens=1000, max_batch_size=32, max_queue=100)
    s.add([work(1, 0, group="base"), work(1, 1, group="lora")])
    s.add([work(2, 0, group="base")])
    first = s.next_batch()
    assert [(w.job_id, w.group) for w in first] == [(1, "base"), (2, "base")]
    assert [w.group for w in s.next_batch()] == ["lora"]


def test_max_batch_size():
    s = Scheduler(batch_tokens=10**6, max_batch_size=3, max_queue=100)
    s.add([work(1, i) for i in range(7)])
    assert [len(s.next_batch()) for _ in range(3)] == [3, 3, 1]


def test_full_queue_refuses_the_whole_job():
    s = Scheduler(batch_tokens=100, max_batch_size=4, max_queue=5)
    s.add([work(1, i) for i in range(4)])
    with pytest.raises(Overloaded):
        s.add([work(2, 0), work(2, 1)])
    assert s.num_waiting == 4


def test_cancel_drops_only_that_jobs_segments():
    s = Scheduler(batch_tokens=100, max_batch_size=4, max_queue=50)
    s.add([work(1, i) for i in range(3)] + [work(2, i) for i in range(2)])
    assert s.cancel(1) == 3
    assert {w.job_id for w in s.waiting} == {2}
