"""Jobs whose files (the original, the result) are rows of `job_files` beside the job's row: the store of replicas
sharing PostgreSQL, so that any replica reads a file another wrote without a volume they all mount.

A file is bounded by HYMT_MAX_FILE_BYTES (20 MB by default) and the unfinished ones by HYMT_MAX_QUEUED_JOB_BYTES,
so every file is small enough to be a bytea (PostgreSQL keeps a large value out of line, compressed). Each is written
in the transaction of the row change it goes with, so no row points at a missing file and no file outlives its row.
"""

from __future__ import annotations

from pathlib import Path

from .jobs import JobRecord, JobState, JobStore, _valid


class DatabaseJobStore(JobStore):
    """JobStore with no folder (pass None): its files are in the database."""

    def create(self, content: bytes, **fields) -> JobRecord:
        """A new queued job holding `content` as its original."""
        record = self._new(content, **fields)
        with self.database.transaction() as cursor:
            self._insert(cursor, record)
            cursor.execute("INSERT INTO job_files (job_id, name, data) VALUES (?, 'original', ?)", (record.id, content))
        return record

    def original(self, job_id: str) -> bytes:
        """The uploaded file; FileNotFoundError when the job does not exist (or has expired)."""
        data = self._file(job_id, "original")
        if data is None:
            raise FileNotFoundError(f"no job {job_id!r}")
        return data

    def finish(self, job_id: str, data: bytes, report: str | None = None) -> bool:
        """Store `data` as the job's result and mark it done, in one transaction; False (nothing stored) when the
        job has ended or does not exist."""
        with self.database.transaction() as cursor:
            if not self._end_in(cursor, job_id, JobState.DONE, None, report):
                return False
            cursor.execute("INSERT INTO job_files (job_id, name, data) VALUES (?, 'result', ?)", (job_id, data))
            return True

    def result(self, job_id: str) -> Path | bytes | None:
        record = self.get(job_id)
        if record is None or record.state != JobState.DONE:
            return None
        return self._file(job_id, "result")

    def expire(self, now: float | None = None) -> int:
        """Delete the jobs that ended more than retention_s before `now`; their files go with their rows."""
        ids, _ = self._expire_rows(self.clock() if now is None else now)
        return len(ids)

    def _file(self, job_id: str, name: str) -> bytes | None:
        if not _valid(job_id):
            return None
        with self.database.transaction() as cursor:
            row = cursor.execute("SELECT data FROM job_files WHERE job_id = ? AND name = ?", (job_id, name)).fetchone()
        return None if row is None else bytes(row[0])
