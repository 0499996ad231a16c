"""The appliance's durable state under HYMT_DATA_DIR: document jobs, stored glossaries and usage.

`hymt.db` (database.py) holds the rows, `jobs/<id>/` the files they point at (jobs.py). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .database import Database
from .glossaries import GlossaryRecord, GlossaryStore
from .jobs import JobRecord, JobState, JobStore
from .usage import UsageStore

__all__ = [
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

    database: Database
    jobs: JobStore
    glossaries: GlossaryStore
    usage: UsageStore


def open_store(data_dir: str, retention_s: float) -> Store:
    """Open (create) the data folder's database and its stores; ConfigError when the folder cannot be used."""
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
