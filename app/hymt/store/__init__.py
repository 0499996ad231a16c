"""The appliance's durable state: document jobs, stored glossaries and usage.

By default under HYMT_DATA_DIR: `hymt.db` (database.py, SQLite) holds the rows, `jobs/<id>/` the files they point at
(jobs.py). With HYMT_DATABASE_URL, PostgreSQL (postgres.py) holds both, rows and files (job_files.py), for every
replica at once. The stores send the same SQL to either (backend.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .backend import Backend
from .database import Database
from .glossaries import GlossaryRecord, GlossaryStore
from .jobs import JobRecord, JobState, JobStore
from .usage import UsageStore

__all__ = [
    "Backend",
    "Database",
    "GlossaryRecord",
    "GlossaryStore",
    "JobRecord",
    "JobState",
    "JobStore",
    "Store",
    "UsageStore",
    "open_store",
]


@dataclass(frozen=True)
class Store:
    """The stores over one database."""

    database: Backend
    jobs: JobStore
    glossaries: GlossaryStore
    usage: UsageStore


def open_store(data_dir: str, retention_s: float, database_url: str | None = None) -> Store:
    """Open (create, migrate) the database and its stores: PostgreSQL's at `database_url` when given, else the
    data folder's SQLite file; ConfigError when it cannot be used (PostgreSQL unreachable, the folder unwritable)."""
    if database_url:
        # Imported here: psycopg is needed only where the setting is set.
        from .job_files import DatabaseJobStore
        from .postgres import PostgresDatabase

        shared = PostgresDatabase(database_url)
        try:
            jobs: JobStore = DatabaseJobStore(shared, None, retention_s)
        except BaseException:
            shared.close()
            raise
        return Store(shared, jobs, GlossaryStore(shared), UsageStore(shared))
    folder = Path(data_dir)
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot create the data folder {folder}: {e}") from e
    database = Database(folder / "hymt.db")
    try:
        jobs = JobStore(database, folder / "jobs", retention_s)
    except OSError as e:
        database.close()
        raise ConfigError(f"cannot create the jobs folder under {folder}: {e}") from e
    return Store(database, jobs, GlossaryStore(database), UsageStore(database))
