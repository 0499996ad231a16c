"""The appliance's durable state under HYMT_DATA_DIR: document jobs now, stored glossaries later.

`hymt.db` (database.py) holds the rows, `jobs/<id>/` the files they point at (jobs.py). Standard library only.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .database import Database
from .jobs import JobRecord, JobState, JobStore

__all__ = ["Database", "JobRecord", "JobState", "JobStore", "open_store"]


def open_store(data_dir: str, retention_s: float) -> tuple[Database, JobStore]:
    """Open (create) the data folder's database and its job store; ConfigError when the folder cannot be used."""
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
    return database, jobs
