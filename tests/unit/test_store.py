from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hymt.errors import ConfigError
from hymt.store import Database, JobState, JobStore, jobs as jobs_module, open_store
from hymt.store.database import MIGRATIONS
from hymt.store.jobs import ORPHAN_GRACE_S, JobRecord

RETENTION_S = 100.0


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def database(tmp_path: Path):
    database = Database(tmp_path / "hymt.db")
    yield database
    database.close()


@pytest.fixture
def store(database: Database, tmp_path: Path, clock: Clock) -> JobStore:
    return JobStore(database, tmp_path / "jobs", RETENTION_S, clock=clock)


def make(store: JobStore, content: bytes = b"Hello, world.", **fields) -> JobRecord:
    values: dict = dict(
        name="report.de.docx",
        ext=".docx",
        media_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        source="en",
        target="de",
        options='{"formality": "more"}',
        owner="owner-hash",
        client="owner-hash",
        api="deepl",
        billed_characters=13,
        segments_total=3,
    )
    values.update(fields)
    record = store.create(content, **values)
    if isinstance(store.clock, Clock):
        store.clock.now += 1  # each job a second after the last: creation order is unambiguous
    return record


def test_create_and_get_round_trip(store: JobStore):
    record = make(store, source=None, owner=None)
    assert len(record.id) == 32 and int(record.id, 16) >= 0 and record.id == record.id.lower()
    assert len(record.key) == 64 and int(record.key, 16) >= 0
    assert record.state is JobState.QUEUED and record.state.value == "queued"
    assert record.segments_done == 0 and record.segments_total == 3 and record.original_bytes == 13
    assert record.started_at is None and record.finished_at is None and record.error is None
    assert store.get(record.id) == record
    assert record.key not in repr(record)
    other = make(store)
    assert other.id != record.id and other.key != record.key


@pytest.mark.parametrize("job_id", ["", "0" * 31, "0" * 33, "G" * 32, "A" * 32, "../" + "0" * 29, "0" * 32 + "\n"])
def test_malformed_ids_are_none_without_asking_the_database(store: JobStore, database: Database, job_id: str):
    database.close()  # a query would raise now
    assert store.get(job_id) is None
    assert store.cancel(job_id) is None
    assert store.queue_position(job_id) is None
    with pytest.raises(FileNotFoundError):
        store.original(job_id)


def test_unknown_id(store: JobStore):
    unknown = "0" * 32
    assert store.get(unknown) is None
    assert store.cancel(unknown) is None
    assert not store.start(unknown) and not store.progress(unknown, 1, 2)
    assert not store.save_texts(unknown, 0, {0: "x"})
    assert not store.finish(unknown, b"x") and not store.fail(unknown, "x")
    assert store.result_path(unknown) is None


def test_key_matches(store: JobStore):
    record = make(store)
    assert store.key_matches(record, record.key)
    assert not store.key_matches(record, record.key[:-1] + ("0" if record.key[-1] != "0" else "1"))
    assert not store.key_matches(record, "")
    assert not store.key_matches(record, "ключ")  # not ASCII: False, not TypeError


def test_original_and_result_are_written_and_read(store: JobStore, tmp_path: Path):
    content = bytes(range(256)) * 1000
    record = make(store, content)
    assert store.original(record.id) == content
    assert (tmp_path / "jobs" / record.id / "original").read_bytes() == content
    assert store.result_path(record.id) is None  # not done yet
    assert store.start(record.id)
    assert store.finish(record.id, b"translated")
    path = store.result_path(record.id)
    assert path is not None and path.read_bytes() == b"translated"
    assert sorted(p.name for p in path.parent.iterdir()) == ["original", "result"]  # no temporary left
    done = store.get(record.id)
    assert done is not None and done.state == JobState.DONE and done.finished_at is not None
    path.unlink()
    assert store.result_path(record.id) is None  # done, but the file is gone


def test_lifecycle_and_timestamps(store: JobStore, clock: Clock):
    record = make(store)
    started = clock.now
    assert store.start(record.id)
    clock.now += 5
    assert store.start(record.id)  # resumed after a restart: still translating, first start kept
    assert store.progress(record.id, 2, 7)
    after = store.get(record.id)
    assert after is not None and after.state == JobState.TRANSLATING
    assert after.started_at == started and (after.segments_done, after.segments_total) == (2, 7)
    clock.now += 5
    assert store.fail(record.id, "the model failed")
    failed = store.get(record.id)
    assert failed is not None and failed.state == JobState.ERROR and failed.error == "the model failed"
    assert failed.finished_at == clock.now
    # Nothing changes an ended job.
    assert not store.start(record.id) and not store.progress(record.id, 7, 7)
    assert not store.finish(record.id, b"late") and store.result_path(record.id) is None
    assert not store.fail(record.id, "again")
    assert store.get(record.id) == failed


def test_texts_survive_reopening_the_database(tmp_path: Path):
    database = Database(tmp_path / "hymt.db")
    store = JobStore(database, tmp_path / "jobs", RETENTION_S)
    record = make(store, b"original bytes")
    store.start(record.id)
    assert store.save_texts(record.id, 0, {0: "Hallo", 1: "Welt"})
    database.close()

    database = Database(tmp_path / "hymt.db")
    try:
        store = JobStore(database, tmp_path / "jobs", RETENTION_S)
        assert [job.id for job in store.unfinished()] == [record.id]
        assert store.unfinished()[0].state == JobState.TRANSLATING
        assert store.texts(record.id, 0) == {0: "Hallo", 1: "Welt"}
        assert store.original(record.id) == b"original bytes"
    finally:
        database.close()


_KILLED_CHILD = """
import os, signal, sys
from pathlib import Path
from hymt.store import Database, JobStore
folder = Path(sys.argv[1])
store = JobStore(Database(folder / "hymt.db"), folder / "jobs", 100.0)
record = store.create(b"doc", name="a.txt", ext=".txt", media_type="text/plain", source=None, target="de",
                      options="{}", owner=None, client="1.2.3.4", api="page", billed_characters=3, segments_total=2)
store.start(record.id)
store.save_texts(record.id, 0, {0: "eins"})
print(record.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_job_survives_kill_9(tmp_path: Path):
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_CHILD, str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert child.returncode == -9, child.stderr
    job_id = child.stdout.strip()
    database = Database(tmp_path / "hymt.db")
    try:
        store = JobStore(database, tmp_path / "jobs", RETENTION_S)
        assert [job.id for job in store.unfinished()] == [job_id]
        assert store.texts(job_id, 0) == {0: "eins"}
        assert store.original(job_id) == b"doc"
    finally:
        database.close()


def test_phases_and_jobs_are_kept_apart_and_a_save_replaces(store: JobStore):
    first, second = make(store), make(store)
    assert store.save_texts(first.id, 0, {0: "a0", 1: "a1"})
    assert store.save_texts(first.id, 1, {0: "b0"})
    assert store.save_texts(second.id, 0, {0: "c0"})
    assert store.save_texts(first.id, 0, {1: "a1 again", 2: "a2"})
    assert store.texts(first.id, 0) == {0: "a0", 1: "a1 again", 2: "a2"}
    assert store.texts(first.id, 1) == {0: "b0"}
    assert store.texts(first.id, 2) == {}
    assert store.texts(second.id, 0) == {0: "c0"}


def test_ending_a_job_drops_its_texts(store: JobStore):
    done, failed, cancelled = make(store), make(store), make(store)
    for record in (done, failed, cancelled):
        assert store.save_texts(record.id, 0, {0: "x"})
    assert store.finish(done.id, b"result")
    assert store.fail(failed.id, "broken")
    assert store.cancel(cancelled.id) is not None
    for record in (done, failed, cancelled):
        assert store.texts(record.id, 0) == {}
        assert not store.save_texts(record.id, 0, {0: "late"})  # a worker that has not heard yet saves nothing
        assert store.texts(record.id, 0) == {}


def test_cancel(store: JobStore, clock: Clock):
    queued = make(store)
    cancelled = store.cancel(queued.id)
    assert cancelled is not None and cancelled.state == JobState.CANCELLED and cancelled.finished_at == clock.now
    assert store.get(queued.id) == cancelled
    assert not store.finish(queued.id, b"too late")  # the last text finished as the owner cancelled
    assert store.result_path(queued.id) is None
    assert not (store.folder / queued.id / "result").exists()


def test_a_job_cancelled_while_its_result_is_written_keeps_no_result(store: JobStore, monkeypatch):
    record = make(store)
    store.start(record.id)
    write = jobs_module._write_file

    def write_then_cancel(path: Path, data: bytes) -> None:
        write(path, data)
        store.cancel(record.id)  # the owner, between the file and the row

    monkeypatch.setattr(jobs_module, "_write_file", write_then_cancel)
    assert not store.finish(record.id, b"result")
    after = store.get(record.id)
    assert after is not None and after.state == JobState.CANCELLED
    assert not (store.folder / record.id / "result").exists()


def test_cancel_of_a_finished_job_changes_nothing(store: JobStore, clock: Clock):
    record = make(store)
    assert store.finish(record.id, b"result")
    done = store.get(record.id)
    clock.now += 10
    assert store.cancel(record.id) == done
    assert store.get(record.id) == done
    assert store.result_path(record.id) is not None


def test_list_newest_first_by_owner(store: JobStore):
    alice_1 = make(store, owner="alice")
    bob = make(store, owner="bob")
    alice_2 = make(store, owner="alice")
    assert [job.id for job in store.list("alice")] == [alice_2.id, alice_1.id]
    assert [job.id for job in store.list("bob")] == [bob.id]
    assert store.list("carol") == []
    assert [job.id for job in store.list(None)] == [alice_2.id, bob.id, alice_1.id]


def test_unfinished_in_creation_order(store: JobStore):
    a, b, c, d = make(store), make(store), make(store), make(store)
    store.start(c.id)
    store.finish(b.id, b"r")
    store.cancel(d.id)
    assert [job.id for job in store.unfinished()] == [a.id, c.id]


def test_expire(store: JobStore, clock: Clock, tmp_path: Path):
    old_done, old_cancelled, old_failed = make(store), make(store), make(store)
    store.finish(old_done.id, b"r")
    store.cancel(old_cancelled.id)
    store.fail(old_failed.id, "broken")
    clock.now += RETENTION_S / 2
    recent = make(store)
    store.finish(recent.id, b"r")
    queued, translating = make(store), make(store)
    store.start(translating.id)
    clock.now += RETENTION_S / 2 + 2

    assert store.expire() == 3
    for record in (old_done, old_cancelled, old_failed):
        assert store.get(record.id) is None
        assert not (tmp_path / "jobs" / record.id).exists()
    for record in (recent, queued, translating):
        assert store.get(record.id) is not None
        assert (tmp_path / "jobs" / record.id / "original").is_file()
    assert store.expire() == 0
    assert store.expire(now=clock.now + RETENTION_S) == 1  # now recent is old too
    assert {job.id for job in store.list(None)} == {queued.id, translating.id}


def test_expire_deletes_texts_with_the_job(store: JobStore, database: Database, clock: Clock):
    record = make(store)
    with database.transaction() as cursor:  # an ended job with texts left: the cascade must take them
        cursor.execute("INSERT INTO job_texts VALUES (?, 0, 0, 'x')", (record.id,))
        cursor.execute("UPDATE jobs SET state = 'done', finished_at = 0 WHERE id = ?", (record.id,))
    assert store.expire() == 1
    with database.transaction() as cursor:
        assert cursor.execute("SELECT COUNT(*) FROM job_texts").fetchone() == (0,)


def test_expire_sweeps_old_folders_without_a_row(store: JobStore, clock: Clock):
    clock.now = os.stat(store.folder).st_mtime  # the files' clock
    old, fresh = store.folder / ("a" * 32), store.folder / ("b" * 32)
    for folder in (old, fresh):
        folder.mkdir()
        (folder / "original").write_bytes(b"x")
    os.utime(old, (clock.now - ORPHAN_GRACE_S - 1,) * 2)
    unrelated = store.folder / "not-a-job"
    unrelated.mkdir()
    os.utime(unrelated, (clock.now - ORPHAN_GRACE_S - 1,) * 2)
    job = make(store)
    os.utime(store.folder / job.id, (clock.now - ORPHAN_GRACE_S - 1,) * 2)  # old, but it has a row
    assert store.expire() == 0
    assert not old.exists()
    assert fresh.exists() and unrelated.exists()
    assert store.original(job.id) == b"Hello, world."


def test_queued_totals_and_queue_position(store: JobStore):
    assert store.queued_totals() == (0, 0, 0)
    a = make(store, b"x" * 10, segments_total=4)
    b = make(store, b"y" * 20, segments_total=0)
    c = make(store, b"z" * 30, segments_total=6)
    d = make(store, b"w" * 40, segments_total=8)
    assert store.queued_totals() == (4, 18, 100)
    assert [store.queue_position(job.id) for job in (a, b, c, d)] == [1, 2, 3, 4]
    store.start(a.id)
    store.progress(b.id, 0, 5)
    store.cancel(c.id)
    assert store.queued_totals() == (3, 4 + 5 + 8, 10 + 20 + 40)  # a translating job still counts
    assert [store.queue_position(job.id) for job in (a, b, c, d)] == [None, 1, None, 2]
    store.finish(a.id, b"r")
    assert store.queued_totals() == (2, 13, 60)
    assert store.queue_position("f" * 32) is None
    # Several jobs in one read: the queued ones, as each alone gives it.
    assert store.queue_positions([a.id, b.id, c.id, d.id, "f" * 32, "not an id"]) == {b.id: 1, d.id: 2}


def test_create_leaves_no_folder_when_the_row_fails(store: JobStore, database: Database):
    database.close()
    with pytest.raises(sqlite3.ProgrammingError):
        make(store)
    assert list(store.folder.iterdir()) == []


def test_database_pragmas(database: Database):
    with database.transaction() as cursor:
        assert cursor.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert cursor.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_transaction_rolls_back_on_error(database: Database):
    with database.transaction() as cursor:
        cursor.execute("CREATE TABLE t (x INTEGER)")
    with pytest.raises(ValueError), database.transaction() as cursor:
        cursor.execute("INSERT INTO t VALUES (1)")
        raise ValueError("abandon")
    with database.transaction() as cursor:
        cursor.execute("INSERT INTO t VALUES (2)")
    with database.transaction() as cursor:
        assert cursor.execute("SELECT x FROM t").fetchall() == [(2,)]
    with pytest.raises(RuntimeError), database.transaction(), database.transaction():
        pass


def test_a_fresh_file_gets_the_current_version(tmp_path: Path):
    database = Database(tmp_path / "hymt.db")
    try:
        assert database.version == len(MIGRATIONS) >= 1
        with database.transaction() as cursor:
            assert cursor.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
            tables = {name for (name,) in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"jobs", "job_texts"} <= tables
    finally:
        database.close()


def test_migrations_run_once_each_in_order(tmp_path: Path):
    path = tmp_path / "hymt.db"
    # CREATE TABLE without IF NOT EXISTS: a script run twice fails.
    first = ("CREATE TABLE runs (script INTEGER); INSERT INTO runs VALUES (1);",)
    Database(path, first).close()
    Database(path, first).close()
    both = (*first, "INSERT INTO runs VALUES (2); CREATE TABLE more (x INTEGER);")
    database = Database(path, both)
    database.close()
    database = Database(path, both)
    try:
        assert database.version == 2
        with database.transaction() as cursor:
            assert cursor.execute("SELECT script FROM runs").fetchall() == [(1,), (2,)]
    finally:
        database.close()


def test_a_failed_migration_leaves_the_last_version(tmp_path: Path):
    path = tmp_path / "hymt.db"
    scripts = ("CREATE TABLE a (x INTEGER);", "CREATE TABLE b (x INTEGER); CREATE TABLE a (x INTEGER);")
    with pytest.raises(ConfigError, match="version 2"):
        Database(path, scripts)
    database = Database(path, scripts[:1])
    try:
        with database.transaction() as cursor:
            assert cursor.execute("PRAGMA user_version").fetchone() == (1,)
            tables = {name for (name,) in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {"a"}  # b went with the failed script
    finally:
        database.close()


def test_a_newer_database_is_refused(tmp_path: Path):
    path = tmp_path / "hymt.db"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 3}")
    connection.close()
    with pytest.raises(ConfigError) as refused:
        Database(path)
    assert str(path) in str(refused.value)
    assert str(len(MIGRATIONS) + 3) in str(refused.value) and str(len(MIGRATIONS)) in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path):
    path = tmp_path / "hymt.db"
    path.write_bytes(os.urandom(8192))
    with pytest.raises(ConfigError, match="not a database"):
        Database(path)


def test_threads_saving_at_once_lose_nothing(store: JobStore):
    record = make(store)
    num_threads, saves, per_save = 8, 25, 4
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for save in range(saves):
                base = (thread * saves + save) * per_save
                store.save_texts(record.id, thread % 2, {base + i: f"{thread}-{save}-{i}" for i in range(per_save)})
                store.progress(record.id, save, saves)
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(num_threads)]
    for worker in threads:
        worker.start()
    for worker in threads:
        worker.join()
    assert errors == []
    saved = {**store.texts(record.id, 0), **store.texts(record.id, 1)}
    assert len(saved) == num_threads * saves * per_save
    for thread in range(num_threads):
        for save in range(saves):
            base = (thread * saves + save) * per_save
            assert saved[base] == f"{thread}-{save}-0"


def test_open_store(tmp_path: Path):
    data_dir = tmp_path / "data" / "hymt"
    store = open_store(str(data_dir), RETENTION_S)
    database, jobs = store.database, store.jobs
    try:
        assert (data_dir / "hymt.db").is_file() and (data_dir / "jobs").is_dir()
        assert data_dir.stat().st_mode & 0o077 == 0
        record = make(jobs)
        assert jobs.get(record.id) is not None
        assert jobs.retention_s == RETENTION_S
    finally:
        database.close()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError):
        open_store(str(blocker / "data"), RETENTION_S)
