"""Real `hymt serve` processes on localhost for the API, browser and appliance tests."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def sse_events(response: httpx.Response):
    """(event, data) pairs of a Server-Sent Events response, as they arrive."""
    kind = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            yield kind, json.loads(line[6:])


def wait_until(predicate, timeout: float, log, what: str = "condition", interval: float = 0.5):
    """predicate()'s first true value, asked every interval seconds; past timeout, TimeoutError with the end of
    log() (the log of what was waited for)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not met in {timeout} s; log:\n{log()[-3000:]}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`hymt serve` on the model; its document jobs are kept beside its log (a restart with the same log path
    finds them) unless HYMT_DATA_DIR says where."""

    def __init__(self, model: Path, log_path: Path, **env: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        environ = {
            **os.environ,
            "HYMT_GREEDY": "1",
            "HYMT_MAX_NEW_TOKENS": "12",
            "HYMT_PROFILE": "cpu",
            "HYMT_LOG_LEVEL": "info",
            "HYMT_DATA_DIR": str(log_path.with_suffix(".data")),
            **env,
        }
        self.log = open(log_path, "w")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hymt",
                "serve",
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            env=environ,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_healthy(self, timeout: float = 120) -> dict:
        def health():
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}: {self.log_path.read_text()}")
            try:
                response = httpx.get(f"{self.url}/health", timeout=2)
            except httpx.HTTPError:
                return None
            return response.status_code == 200 and response.json()

        return wait_until(health, timeout, self.log_path.read_text, "server healthy", interval=0.3)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@contextlib.contextmanager
def serving(model: Path, log_path: Path, **env: str):
    """A healthy server for the block (a module fixture's body), stopped after it."""
    srv = Server(model, log_path, **env)
    try:
        srv.wait_healthy()
        yield srv
    finally:
        srv.stop()
