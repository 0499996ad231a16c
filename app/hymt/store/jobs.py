"""Document jobs that outlive the process: an accepted upload becomes a row in `jobs` and a folder of files
(`<folder>/<id>/original`, later `result`); the worker checkpoints the texts it has translated in `job_texts`, so a
job resumed after a restart or a kill -9 keeps them, and drops them when the job ends. Ended jobs are deleted
`retention_s` after they ended.

A file is written (temporary name, fsync, rename) before the row that points at it, so no row points at a missing
file; a kill in between leaves at most a folder without a row, which expire() sweeps.

State changes that do not apply (finish a cancelled job, start a done one) change nothing and say so in their return
value instead of raising: an owner cancelling a job while its last text finishes is an ordinary race.

Workers claim jobs (claim()): a claim is a lease, the replica's id and a time, which its worker renews while the job
runs (renew()). A replica that dies stops renewing, and once the lease has run out another claims the job and resumes
it from its checkpointed texts. On SQLite (one appliance per file) the leases left in the file at open are a dead
process's, so they are released at once and a restart resumes without waiting them out.
"""

from __future__ import annotations

import builtins
import hmac
import os
import re
import secrets
import shutil
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path

from .backend import Backend

# A folder without a row is swept only after this long: create() writes the folder before it inserts the row.
ORPHAN_GRACE_S = 3600.0

_ID = re.compile(r"[0-9a-f]{32}")


class JobState(StrEnum):
    QUEUED = "queued"
    TRANSLATING = "translating"
    DONE = "done"
    ERROR = "error"
    CANCELLED = "cancelled"


UNFINISHED = (JobState.QUEUED, JobState.TRANSLATING)
_UNFINISHED_SQL = "state IN ('queued', 'translating')"
_CLAIMABLE_SQL = f"{_UNFINISHED_SQL} AND (lease_owner IS NULL OR lease_until < ?)"


@dataclass(frozen=True)
class JobRecord:
    """A job as its row holds it; the fields are the table's columns, in order."""

    id: str  # 32 lowercase hex characters
    key: str = field(repr=False)  # 64 hex characters: DeepL's document_key; compare with JobStore.key_matches
    owner: str | None  # a hash of the caller's API key; None when keys are off
    client: str  # whom the job counts against for fair sharing: a key's hash or a client address
    api: str  # the endpoint that made it: "libre", "page", "jobs" or "deepl"
    name: str  # the name offered for the translated file
    ext: str  # the format, as a file extension: ".docx"
    media_type: str
    source: str | None  # a language code; None: detected
    target: str
    options: str  # JSON written and read by the caller
    billed_characters: int
    original_bytes: int
    state: JobState
    segments_done: int
    segments_total: int  # 0 until known
    error: str | None
    report: str | None  # once done: a JSON text the caller writes (what the translation of the file reports)
    created_at: float  # unix seconds
    started_at: float | None  # the first start: a resumed job keeps it
    finished_at: float | None

    @property
    def finished(self) -> bool:
        return self.state not in UNFINISHED


_COLUMNS = tuple(f.name for f in fields(JobRecord))
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM jobs"


def _record(row: tuple) -> JobRecord:
    values = dict(zip(_COLUMNS, row))
    values["state"] = JobState(values["state"])
    return JobRecord(**values)


def replica_id() -> str:
    """This process's name in the leases it takes: its host and pid (for whoever reads the table), and a random part
    so that a pid reused after a restart is not taken for the dead process."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class JobStore:
    """The jobs, with their files in `folder` (jobs/<id>/); job_files.py keeps them in the database instead."""

    def __init__(
        self,
        database: Backend,
        folder: Path | None,
        retention_s: float,
        *,
        clock: Callable[[], float] = time.time,
        replica: str | None = None,
    ):
        self.database = database
        self.retention_s = retention_s
        self.clock = clock
        self.replica = replica or replica_id()
        if folder is not None:
            self.folder = Path(folder)
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not database.shared:
            with database.transaction() as cursor:
                cursor.execute("UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner IS NOT NULL")

    @staticmethod
    def key_matches(record: JobRecord, key: str) -> bool:
        """Whether `key` is the job's key, compared in constant time."""
        return hmac.compare_digest(record.key.encode(), key.encode())

    def create(
        self,
        content: bytes,
        *,
        name: str,
        ext: str,
        media_type: str,
        source: str | None,
        target: str,
        options: str,
        owner: str | None,
        client: str,
        api: str,
        billed_characters: int,
        segments_total: int = 0,
    ) -> JobRecord:
        """A new queued job holding `content` as its original."""
        record = self._new(
            content,
            name=name,
            ext=ext,
            media_type=media_type,
            source=source,
            target=target,
            options=options,
            owner=owner,
            client=client,
            api=api,
            billed_characters=billed_characters,
            segments_total=segments_total,
        )
        folder = self.folder / record.id
        folder.mkdir(mode=0o700)
        try:
            _fsync_dir(self.folder)
            _write_file(folder / "original", content)
            with self.database.transaction() as cursor:
                self._insert(cursor, record)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return record

    def _new(self, content: bytes, **fields) -> JobRecord:
        return JobRecord(
            id=secrets.token_hex(16),
            key=secrets.token_hex(32),
            original_bytes=len(content),
            state=JobState.QUEUED,
            segments_done=0,
            error=None,
            report=None,
            created_at=self.clock(),
            started_at=None,
            finished_at=None,
            **fields,
        )

    @staticmethod
    def _insert(cursor, record: JobRecord) -> None:
        cursor.execute(
            f"INSERT INTO jobs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
            [getattr(record, column) for column in _COLUMNS],
        )

    def get(self, job_id: str) -> JobRecord | None:
        """The job, or None when there is none of that id (a malformed id included: the database is not asked)."""
        if not _valid(job_id):
            return None
        with self.database.transaction() as cursor:
            row = cursor.execute(f"{_SELECT} WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else _record(row)

    def list(self, owner: str | None) -> builtins.list[JobRecord]:
        """The owner's jobs (every job when `owner` is None), newest first."""
        with self.database.transaction() as cursor:
            if owner is None:
                rows = cursor.execute(f"{_SELECT} ORDER BY created_at DESC, id DESC").fetchall()
            else:
                rows = cursor.execute(
                    f"{_SELECT} WHERE owner = ? ORDER BY created_at DESC, id DESC", (owner,)
                ).fetchall()
        return [_record(row) for row in rows]

    def unfinished(self) -> builtins.list[JobRecord]:
        """The queued and translating jobs, oldest first: what resumes after a restart."""
        with self.database.transaction() as cursor:
            rows = cursor.execute(f"{_SELECT} WHERE {_UNFINISHED_SQL} ORDER BY created_at, id").fetchall()
        return [_record(row) for row in rows]

    def start(self, job_id: str) -> bool:
        """Mark the job translating; True unless it has ended or does not exist. A job resumed after a restart
        (translating already) keeps its first started_at."""
        with self.database.transaction() as cursor:
            cursor.execute(
                f"UPDATE jobs SET state = 'translating', started_at = COALESCE(started_at, ?) "
                f"WHERE id = ? AND {_UNFINISHED_SQL}",
                (self.clock(), job_id),
            )
            return cursor.rowcount == 1

    def claim(self, running: Counter[str], exclude: Set[str], lease_s: float) -> JobRecord | None:
        """Take an unfinished job no live lease holds (not one of `exclude`, this worker's own), for lease_s
        seconds: the oldest of the client with the fewest `running` here (fair shares hold per replica). None when
        there is none. Where replicas share the database, a row another is claiming at this moment is skipped
        (FOR UPDATE SKIP LOCKED), not waited for."""
        now = self.clock()
        with self.database.transaction() as cursor:
            rows = cursor.execute(f"{_SELECT} WHERE {_CLAIMABLE_SQL} ORDER BY created_at, id", (now,)).fetchall()
            waiting = [record for record in map(_record, rows) if record.id not in exclude]
            for record in sorted(waiting, key=lambda r: running[r.client]):  # stable: oldest first within a count
                held = cursor.execute(
                    f"SELECT id FROM jobs WHERE id = ? AND {_CLAIMABLE_SQL}{self.database.lock_rows}", (record.id, now)
                ).fetchone()
                if held is not None:
                    cursor.execute(
                        "UPDATE jobs SET lease_owner = ?, lease_until = ? WHERE id = ?",
                        (self.replica, now + lease_s, record.id),
                    )
                    return record
        return None

    def renew(self, job_ids: Iterable[str], lease_s: float) -> set[str]:
        """Extend this replica's leases on the jobs; the ids it no longer holds (ended, cancelled, or taken by
        another replica after the lease ran out), which it should stop translating."""
        lost = set()
        until = self.clock() + lease_s
        with self.database.transaction() as cursor:
            for job_id in job_ids:
                cursor.execute(
                    f"UPDATE jobs SET lease_until = ? WHERE id = ? AND lease_owner = ? AND {_UNFINISHED_SQL}",
                    (until, job_id, self.replica),
                )
                if cursor.rowcount != 1:
                    lost.add(job_id)
        return lost

    def release(self, job_ids: Iterable[str]) -> None:
        """Give up this replica's leases on the jobs (a drain): another replica may take them at once."""
        with self.database.transaction() as cursor:
            cursor.executemany(
                "UPDATE jobs SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?",
                [(job_id, self.replica) for job_id in job_ids],
            )

    def progress(self, job_id: str, segments_done: int, segments_total: int) -> bool:
        """Record how far the job is; False (nothing changed) when it has ended or does not exist."""
        with self.database.transaction() as cursor:
            cursor.execute(
                f"UPDATE jobs SET segments_done = ?, segments_total = ? WHERE id = ? AND {_UNFINISHED_SQL}",
                (segments_done, segments_total, job_id),
            )
            return cursor.rowcount == 1

    def save_texts(self, job_id: str, phase: int, texts: dict[int, str]) -> bool:
        """Checkpoint translated texts (segment index -> text) of one phase of the job; a text saved again for the
        same phase and index replaces the first. False (nothing saved) when the job has ended or does not exist."""
        with self.database.transaction() as cursor:
            if cursor.execute(f"SELECT 1 FROM jobs WHERE id = ? AND {_UNFINISHED_SQL}", (job_id,)).fetchone() is None:
                return False
            cursor.executemany(
                "INSERT INTO job_texts (job_id, phase, idx, text) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (job_id, phase, idx) DO UPDATE SET text = excluded.text",
                [(job_id, phase, index, text) for index, text in texts.items()],
            )
            return True

    def texts(self, job_id: str, phase: int) -> dict[int, str]:
        """The texts checkpointed for one phase of the job (empty once it has ended)."""
        with self.database.transaction() as cursor:
            rows = cursor.execute(
                "SELECT idx, text FROM job_texts WHERE job_id = ? AND phase = ?", (job_id, phase)
            ).fetchall()
        return dict(rows)

    def finish(self, job_id: str, data: bytes, report: str | None = None) -> bool:
        """Store `data` as the job's result (and `report` beside it) and mark it done; False (nothing stored) when
        the job has ended (cancelled meanwhile, say) or does not exist."""
        record = self.get(job_id)
        if record is None or record.finished:
            return False
        path = self.folder / job_id / "result"
        _write_file(path, data)
        with self.database.transaction() as cursor:
            done = self._end_in(cursor, job_id, JobState.DONE, None, report)
        if done:
            return True
        # Ended while the file was written: the file goes unless another finish() made the job done with it.
        after = self.get(job_id)
        if after is None or after.state != JobState.DONE:
            path.unlink(missing_ok=True)
        return False

    def fail(self, job_id: str, message: str) -> bool:
        """Mark the job failed with `message`; False (nothing changed) when it has ended or does not exist."""
        return self._end(job_id, JobState.ERROR, message)

    def cancel(self, job_id: str) -> JobRecord | None:
        """Cancel the job unless it has ended already (then it is left as it is); the job as it is afterwards, or
        None when there is no such job."""
        if not _valid(job_id):
            return None
        self._end(job_id, JobState.CANCELLED, None)
        return self.get(job_id)

    def _end(self, job_id: str, state: JobState, error: str | None) -> bool:
        with self.database.transaction() as cursor:
            return self._end_in(cursor, job_id, state, error)

    def _end_in(self, cursor, job_id: str, state: JobState, error: str | None, report: str | None = None) -> bool:
        cursor.execute(
            f"UPDATE jobs SET state = ?, error = ?, report = ?, finished_at = ?, lease_owner = NULL, "
            f"lease_until = NULL WHERE id = ? AND {_UNFINISHED_SQL}",
            (state.value, error, report, self.clock(), job_id),
        )
        if cursor.rowcount != 1:
            return False
        cursor.execute("DELETE FROM job_texts WHERE job_id = ?", (job_id,))
        return True

    def original(self, job_id: str) -> bytes:
        """The uploaded file; FileNotFoundError when the job does not exist (or has expired)."""
        if not _valid(job_id):
            raise FileNotFoundError(f"no job {job_id!r}")
        return (self.folder / job_id / "original").read_bytes()

    def result(self, job_id: str) -> Path | bytes | None:
        """The translated file, where it is (a path here, its bytes where the database keeps it); None unless the
        job is done and the file is there."""
        return self.result_path(job_id)

    def result_path(self, job_id: str) -> Path | None:
        """Where the translated file is; None unless the job is done and the file is there."""
        record = self.get(job_id)
        if record is None or record.state != JobState.DONE:
            return None
        path = self.folder / job_id / "result"
        return path if path.is_file() else None

    def expire(self, now: float | None = None) -> int:
        """Delete the jobs that ended more than retention_s before `now` (default: the clock), rows and folders,
        and folders left without a row by a kill during create(); how many jobs were deleted."""
        now = self.clock() if now is None else now
        ids, known = self._expire_rows(now)
        # Rows first, then folders: a kill in between leaves folders without rows, swept the next time.
        for job_id in ids:
            shutil.rmtree(self.folder / job_id, ignore_errors=True)
        for path in self.folder.iterdir():
            if not _valid(path.name) or path.name in known:
                continue
            try:
                orphaned = path.stat().st_mtime < now - ORPHAN_GRACE_S
            except FileNotFoundError:  # removed meanwhile
                continue
            if orphaned:
                shutil.rmtree(path, ignore_errors=True)
        return len(ids)

    def _expire_rows(self, now: float) -> tuple[builtins.list[str], set[str]]:
        """Delete the rows of the jobs ended more than retention_s before `now`; their ids, and those left."""
        with self.database.transaction() as cursor:
            rows = cursor.execute(
                f"SELECT id FROM jobs WHERE finished_at < ? AND NOT {_UNFINISHED_SQL}", (now - self.retention_s,)
            ).fetchall()
            ids = [job_id for (job_id,) in rows]
            # The texts (and files kept in the database) go with their job (ON DELETE CASCADE).
            cursor.executemany("DELETE FROM jobs WHERE id = ?", [(job_id,) for job_id in ids])
            known = {job_id for (job_id,) in cursor.execute("SELECT id FROM jobs").fetchall()}
        return ids, known

    def queued_totals(self) -> tuple[int, int, int]:
        """The unfinished jobs' count, their segments_total summed and their originals' bytes summed."""
        with self.database.transaction() as cursor:
            count, segments, size = cursor.execute(
                f"SELECT COUNT(*), COALESCE(SUM(segments_total), 0), COALESCE(SUM(original_bytes), 0) "
                f"FROM jobs WHERE {_UNFINISHED_SQL}"
            ).fetchone()
        return int(count), int(segments), int(size)

    def queue_position(self, job_id: str) -> int | None:
        """1 for the oldest queued job, 2 for the next, and so on; None unless the job is queued."""
        return self.queue_positions([job_id]).get(job_id)

    def queue_positions(self, job_ids: Iterable[str]) -> dict[str, int]:
        """The queue position of each of these jobs that is queued, in one read (a list of jobs needs several)."""
        wanted = {job_id for job_id in job_ids if _valid(job_id)}
        if not wanted:
            return {}
        with self.database.transaction() as cursor:
            rows = cursor.execute("SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, id").fetchall()
        return {row[0]: place for place, row in enumerate(rows, 1) if row[0] in wanted}


def _valid(job_id: object) -> bool:
    return isinstance(job_id, str) and _ID.fullmatch(job_id) is not None


def _write_file(path: Path, data: bytes) -> None:
    """Write `data` at `path` so that the path holds either nothing or all of it, on the disk when this returns."""
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    # A new name in a folder is durable once the folder itself is synced.
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
