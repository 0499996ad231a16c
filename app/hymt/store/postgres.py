"""PostgreSQL, when HYMT_DATABASE_URL is set: the one database every replica shares, so that any replica answers any
job, glossary or usage, and a job accepted by one is translated by whichever has room (jobs.py's claim()).

psycopg is imported here only, and this module only when the setting is set: a replica on SQLite needs neither.

One connection per process, one transaction at a time under a lock, as for SQLite: the stores' transactions are
short. A connection that breaks is dropped and opened again at the next transaction, no more often than every
RECONNECT_S; meanwhile `error` says why, and the stores' callers get StoreUnavailable (503 with Retry-After).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import ConfigError, StoreUnavailable
from . import database as sqlite

log = logging.getLogger("hymt.store")

# A replica's files (originals, results) are rows here, so that no replica needs a volume the others mount.
JOB_FILES = """
    CREATE TABLE job_files (
        job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (job_id, name)
    );
"""

# SQLite's scripts are plain SQL PostgreSQL runs as they are; named one by one, so that a script added there later
# is added here on purpose (and numbered after JOB_FILES). Append; never edit a released one.
MIGRATIONS: tuple[str, ...] = (*sqlite.MIGRATIONS[:3], JOB_FILES)

# Every replica starting at once migrates under this advisory lock: one runs the scripts, the others then find them run.
MIGRATION_LOCK = 0x68796D74  # "hymt"
CONNECT_TIMEOUT_S = 5
RECONNECT_S = 2.0
# A database host that vanishes (no reset, no answer) is noticed within about this long, not the kernel's hours.
_CONNECTION = {
    "connect_timeout": str(CONNECT_TIMEOUT_S),
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
    "application_name": "hymt",
}


def _line(exc: BaseException) -> str:
    """libpq's message on one line (it spreads hints over several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


class _Cursor:
    """psycopg's cursor with the stores' `?` placeholders (DB-API qmark, SQLite's) as psycopg's `%s`. The stores'
    SQL has no `?` or `%` of its own."""

    def __init__(self, cursor: psycopg.Cursor):
        self._cursor = cursor

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        self._cursor.execute(sql.replace("?", "%s"), tuple(params))
        return self

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> _Cursor:
        self._cursor.executemany(sql.replace("?", "%s"), rows)
        return self

    def fetchone(self) -> tuple | None:
        return self._cursor.fetchone()

    def fetchall(self) -> list[tuple]:
        return self._cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount


class PostgresDatabase:
    name = "postgresql"
    shared = True
    lock_rows = " FOR UPDATE SKIP LOCKED"

    def __init__(self, url: str, migrations: tuple[str, ...] = MIGRATIONS):
        try:
            given = conninfo_to_dict(url)
        except psycopg.ProgrammingError as e:
            raise ConfigError(f"HYMT_DATABASE_URL is not a PostgreSQL URL: {_line(e)}") from None
        self._conninfo = make_conninfo("", **{**_CONNECTION, **given})  # what the URL says wins
        self.where = f"{given.get('host', 'localhost')}:{given.get('port', 5432)}/{given.get('dbname', '')}"
        self.error: str | None = None
        self._failed_at = 0.0
        self._lock = threading.Lock()
        self._holder: int | None = None
        try:
            self._connection: psycopg.Connection | None = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as e:
            raise ConfigError(f"cannot reach the database at {self.where}: {_line(e)}") from None
        try:
            self.version = self._migrate(migrations)
        except BaseException:
            self.close()
            raise

    def _migrate(self, migrations: tuple[str, ...]) -> int:
        assert self._connection is not None
        try:
            with self._connection.transaction(), self._connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                cursor.execute("CREATE TABLE IF NOT EXISTS hymt_schema (version INTEGER NOT NULL)")
                row = cursor.execute("SELECT version FROM hymt_schema").fetchone()
                if row is None:
                    cursor.execute("INSERT INTO hymt_schema (version) VALUES (0)")
                version = 0 if row is None else int(row[0])
                if version > len(migrations):
                    raise ConfigError(
                        f"the database at {self.where} has schema version {version}, newer than the "
                        f"{len(migrations)} this hymt knows: it was written by a newer hymt"
                    )
                # One transaction for every script: a failed one leaves the version the database had.
                for number in range(version + 1, len(migrations) + 1):
                    cursor.execute(migrations[number - 1])
                    cursor.execute("UPDATE hymt_schema SET version = %s", (number,))
        except psycopg.Error as e:
            raise ConfigError(f"cannot bring the database at {self.where} to the current schema: {_line(e)}") from None
        return len(migrations)

    def _connected(self) -> psycopg.Connection:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        if self.error is not None and time.monotonic() - self._failed_at < RECONNECT_S:
            raise StoreUnavailable(self._unavailable())
        try:
            self._connection = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as e:
            self._lost(e)
            raise StoreUnavailable(self._unavailable()) from None
        log.info("the database at %s answers again", self.where)
        return self._connection

    def _lost(self, exc: BaseException) -> None:
        if self.error is None:
            log.error("the database at %s is unreachable: %s", self.where, _line(exc))
        self.error = f"the database at {self.where} is unreachable: {_line(exc)}"
        self._failed_at = time.monotonic()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _unavailable(self) -> str:
        return f"{self.error}; try again shortly"

    @contextmanager
    def transaction(self) -> Iterator[_Cursor]:
        """A cursor inside one transaction; StoreUnavailable when the database cannot be reached. Not reentrant."""
        if self._holder == threading.get_ident():
            raise RuntimeError("a transaction is already open on this thread")
        with self._lock:
            self._holder = threading.get_ident()
            try:
                connection = self._connected()
                try:
                    with connection.transaction(), connection.cursor() as cursor:
                        yield _Cursor(cursor)
                except (psycopg.OperationalError, psycopg.InterfaceError) as e:
                    self._lost(e)
                    raise StoreUnavailable(self._unavailable()) from None
                self.error = None
            finally:
                self._holder = None

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
