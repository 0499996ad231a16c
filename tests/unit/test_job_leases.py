"""Claims on document jobs (store/jobs.py): a lease that keeps other workers off a running job until it runs out,
renewed by its holder, released on a drain; the fair choice among the jobs free to claim. On SQLite, two stores on
one file stand in for two replicas; tests/server/test_replicas.py runs them on PostgreSQL."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from hymt.store import Database, JobStore

LEASE_S = 30.0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def make(store: JobStore, client: str):
    record = store.create(
        b"Hello.",
        name="a.txt",
        ext=".txt",
        media_type="text/plain",
        source="en",
        target="de",
        options="{}",
        owner=None,
        client=client,
        api="jobs",
        billed_characters=6,
        segments_total=1,
    )
    store.clock.now += 1  # each job a second after the last: creation order is unambiguous
    return record


def pair(tmp_path: Path) -> tuple[JobStore, JobStore, Clock]:
    clock = Clock()
    database = Database(tmp_path / "hymt.db")
    first = JobStore(database, tmp_path / "jobs", 100.0, clock=clock, replica="a")
    # The second replica's store is made after the first: on SQLite a new store releases the leases it finds.
    second = JobStore(database, tmp_path / "jobs", 100.0, clock=clock, replica="b")
    return first, second, clock


def test_a_claimed_job_is_no_one_elses_until_its_lease_runs_out(tmp_path: Path):
    a, b, clock = pair(tmp_path)
    job = make(a, "c1")
    assert a.claim(Counter(), set(), LEASE_S) == job
    assert b.claim(Counter(), set(), LEASE_S) is None
    assert a.claim(Counter(), {job.id}, LEASE_S) is None  # its own, running there: not claimed twice
    clock.now += LEASE_S / 2
    assert a.renew([job.id], LEASE_S) == set()
    clock.now += LEASE_S / 2 + 1  # past the first lease, inside the renewed one
    assert b.claim(Counter(), set(), LEASE_S) is None
    clock.now += LEASE_S
    taken = b.claim(Counter(), set(), LEASE_S)
    assert taken is not None and taken.id == job.id
    assert a.renew([job.id], LEASE_S) == {job.id}  # a stops translating it


def test_an_ended_job_is_lost_to_its_holder_and_a_released_one_free_at_once(tmp_path: Path):
    a, b, _ = pair(tmp_path)
    cancelled, released = make(a, "c1"), make(a, "c1")
    assert a.claim(Counter(), set(), LEASE_S) == cancelled
    assert a.claim(Counter(), {cancelled.id}, LEASE_S) == released
    a.cancel(cancelled.id)
    assert a.renew([cancelled.id, released.id], LEASE_S) == {cancelled.id}
    a.release([released.id])
    assert b.claim(Counter(), set(), LEASE_S) == released


def test_the_claim_takes_the_oldest_job_of_the_client_with_fewest_running(tmp_path: Path):
    a, _, _ = pair(tmp_path)
    first, second, other = make(a, "busy"), make(a, "busy"), make(a, "idle")
    assert a.claim(Counter({"busy": 1}), set(), LEASE_S) == other
    assert a.claim(Counter({"busy": 1, "idle": 1}), set(), LEASE_S) == first
    assert a.claim(Counter({"busy": 2, "idle": 1}), set(), LEASE_S) == second


def test_a_new_store_on_sqlite_frees_a_dead_process_s_leases(tmp_path: Path):
    a, _, clock = pair(tmp_path)
    job = make(a, "c1")
    assert a.claim(Counter(), set(), LEASE_S) == job
    restarted = JobStore(a.database, tmp_path / "jobs", 100.0, clock=clock, replica="a2")
    assert restarted.claim(Counter(), set(), LEASE_S) == job  # at once, not after the lease
