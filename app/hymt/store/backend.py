"""What the stores (jobs, glossaries, usage) need of a database: SQLite's Database (database.py, the default) and
PostgreSQL's (postgres.py, HYMT_DATABASE_URL) both give it, so the stores send one set of SQL to either."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol


class Backend(Protocol):
    name: str  # "sqlite" or "postgresql", for /health
    # Whether other processes (replicas) use the same database at once: then leases left in it may be live.
    shared: bool
    # Appended to a claim's SELECT of one row: PostgreSQL's " FOR UPDATE SKIP LOCKED", or "" where a transaction
    # holds the whole database anyway.
    lock_rows: str
    # Why the database cannot be reached now (None: it can); set by a failed transaction, cleared by the next good one.
    error: str | None
    version: int

    def transaction(self) -> AbstractContextManager[Any]:
        """A cursor (execute, executemany, fetchone, fetchall, rowcount; `?` placeholders) inside one transaction,
        committed when the block ends, rolled back when it raises."""
        ...

    def close(self) -> None: ...


def ping(database: Backend) -> None:
    """One round trip, so that `error` says whether the database answers now."""
    with database.transaction() as cursor:
        cursor.execute("SELECT 1").fetchone()
