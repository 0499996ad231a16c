"""The appliance's database: one SQLite file under HYMT_DATA_DIR, its schema brought up to date at open.

SQLite is the default because the appliance is one process on one machine: nothing to install or run beside it, and
the file lives in the data volume. Several replicas share PostgreSQL instead (postgres.py, HYMT_DATABASE_URL): the
stores send the same plain SQL to both, and what is SQLite's own (the pragmas, the schema version in `user_version`,
how a transaction begins) stays inside this class.

One connection serves every thread (the server's event loop, its thread pool, the document worker), one transaction
at a time under a lock: the stores' transactions are short, and SQLite writes one at a time anyway.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError

# How long a statement waits for another process's write lock (a second appliance on the same file, or the sqlite3
# shell) before it fails.
BUSY_TIMEOUT_MS = 5_000

# The schema, one script per version: version N is what MIGRATIONS[:N] made. Append a script for a change; never edit
# one that has been released, since databases out there already ran it.
MIGRATIONS: tuple[str, ...] = (
    # 1: document jobs and the texts they have translated so far.
    """
    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        key TEXT NOT NULL,
        owner TEXT,
        client TEXT NOT NULL,
        api TEXT NOT NULL,
        name TEXT NOT NULL,
        ext TEXT NOT NULL,
        media_type TEXT NOT NULL,
        source TEXT,
        target TEXT NOT NULL,
        options TEXT NOT NULL,
        billed_characters BIGINT NOT NULL,
        original_bytes BIGINT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('queued', 'translating', 'done', 'error', 'cancelled')),
        segments_done INTEGER NOT NULL,
        segments_total INTEGER NOT NULL,
        error TEXT,
        report TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        started_at DOUBLE PRECISION,
        finished_at DOUBLE PRECISION
    );
    CREATE INDEX jobs_by_state ON jobs (state, created_at);
    CREATE INDEX jobs_by_owner ON jobs (owner, created_at);
    CREATE INDEX jobs_by_finish ON jobs (finished_at);
    CREATE TABLE job_texts (
        job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        phase INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (job_id, phase, idx)
    );
    """,
    # 2: stored glossaries (DeepL's /v2/glossaries) and the characters translated per key and month.
    """
    CREATE TABLE glossaries (
        id TEXT PRIMARY KEY,
        owner TEXT,
        name TEXT NOT NULL,
        source TEXT NOT NULL,
        target TEXT NOT NULL,
        entry_count INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL
    );
    CREATE INDEX glossaries_by_owner ON glossaries (owner, created_at);
    CREATE TABLE glossary_entries (
        glossary_id TEXT NOT NULL REFERENCES glossaries (id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        source TEXT NOT NULL,
        target TEXT NOT NULL,
        PRIMARY KEY (glossary_id, idx)
    );
    CREATE TABLE usage (
        owner TEXT NOT NULL,
        period TEXT NOT NULL,
        characters BIGINT NOT NULL,
        PRIMARY KEY (owner, period)
    );
    """,
    # 3: which replica translates a job, and until when its claim holds without a heartbeat (jobs.py's claim()).
    """
    ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
    ALTER TABLE jobs ADD COLUMN lease_until DOUBLE PRECISION;
    """,
)


class Database:
    """One SQLite file, opened (created when missing) and migrated to the newest schema this code knows."""

    name = "sqlite"
    # One appliance's own file: a lease left in it is a dead process's (jobs.py releases them at open).
    shared = False
    # What a claim adds to lock the row it takes: nothing here, since BEGIN IMMEDIATE holds the whole file.
    lock_rows = ""
    # Why the database cannot be used now; a local file is never "unreachable", so always None.
    error: str | None = None

    def __init__(self, path: str | Path, migrations: tuple[str, ...] = MIGRATIONS):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._holder: int | None = None  # the thread inside transaction(), to refuse a nested one
        try:
            # isolation_level=None: no transactions begun behind our back; transaction() begins and ends each one.
            self._connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as e:
            raise ConfigError(f"cannot open the database {self.path}: {e}") from e
        try:
            self.version = self._migrate(self._configure(), migrations)
        except BaseException:
            self._connection.close()
            raise

    def _configure(self) -> int:
        """Set the connection's pragmas; the file's schema version."""
        try:
            self._connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # WAL: readers do not wait for the writer, and a commit is one append to the log.
            self._connection.execute("PRAGMA journal_mode = WAL")
            # FULL: a commit is on the disk when it returns, so an accepted job outlives a power cut, not only a kill.
            self._connection.execute("PRAGMA synchronous = FULL")
            self._connection.execute("PRAGMA foreign_keys = ON")
            (version,) = self._connection.execute("PRAGMA user_version").fetchone()
        except sqlite3.DatabaseError as e:
            raise ConfigError(f"{self.path} is not a database hymt can use: {e}") from e
        return int(version)

    def _migrate(self, version: int, migrations: tuple[str, ...]) -> int:
        """Run every script past the file's `version`, each in its own transaction; the version reached."""
        if version > len(migrations):
            raise ConfigError(
                f"the database {self.path} has schema version {version}, newer than the {len(migrations)} "
                "this hymt knows: it was written by a newer hymt"
            )
        with self._lock:
            for number in range(version + 1, len(migrations) + 1):
                try:
                    # The version is set inside the script's transaction, so a script runs once or not at all.
                    self._connection.executescript(
                        f"BEGIN IMMEDIATE;\n{migrations[number - 1]}\nPRAGMA user_version = {number};\nCOMMIT;"
                    )
                except sqlite3.Error as e:
                    if self._connection.in_transaction:
                        self._connection.execute("ROLLBACK")
                    raise ConfigError(f"cannot bring the database {self.path} to schema version {number}: {e}") from e
        return len(migrations)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        """A cursor inside one transaction: committed when the block ends, rolled back when it raises. Not
        reentrant: a transaction opened inside another on the same thread raises RuntimeError."""
        if self._holder == threading.get_ident():
            raise RuntimeError("a transaction is already open on this thread")
        with self._lock:
            self._holder = threading.get_ident()
            try:
                # IMMEDIATE takes the write lock at once: a deferred transaction that reads and then writes can fail
                # at once with SQLITE_BUSY, the busy timeout notwithstanding, when another process wrote meanwhile.
                cursor = self._connection.execute("BEGIN IMMEDIATE")
                try:
                    yield cursor
                    self._connection.execute("COMMIT")
                except BaseException:
                    if self._connection.in_transaction:  # a failed COMMIT can leave it open too
                        self._connection.execute("ROLLBACK")
                    raise
                finally:
                    cursor.close()
            finally:
                self._holder = None

    def close(self) -> None:
        """Close the connection (a second close does nothing); the database is not usable afterwards."""
        with self._lock:
            self._connection.close()
