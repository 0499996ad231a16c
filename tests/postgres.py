"""A throwaway PostgreSQL server for the tests of replicas sharing one database: Debian's binaries (tests/run.sh
installs them), a cluster in a temporary folder on a free port, removed after. PostgreSQL refuses to run as root, so
as root the cluster is the postgres user's."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from servers import free_port


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class Postgres:
    def __init__(self):
        bin_dir = _binaries()
        if bin_dir is None:
            pytest.skip("PostgreSQL is not installed (tests/run.sh installs Debian's postgresql as root)")
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="hymt-postgres-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.getuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "hymt", "-E", "UTF8", "--no-sync")
        self.start()

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin / program), *args], check=True, capture_output=True, text=True, timeout=120
        )

    def start(self) -> None:
        # fsync off: a test cluster need not survive a power cut, and the CI machine's disk is shared.
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "-t", "120", "start"
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "120", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://hymt@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        path = self.root / "log"
        return path.read_text() if path.exists() else ""

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "60", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def postgres():
    server = Postgres()
    try:
        yield server
    finally:
        server.remove()
