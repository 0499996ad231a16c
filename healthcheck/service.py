"""The health service (a supervisord program): samples GPU memory through NVML and the server's /health, serves
what it saw on its own port, and restarts the inference program through supervisord's XML-RPC interface when it
stays unhealthy (hung, or crashing in a loop), with exponential back-off between restarts. When supervisord gives up
on the server (FATAL: it kept failing to start), it reports "failed" with the last lines of the server's log, on
its /health and once in the container's log."""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
import xmlrpc.client
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from hymt.planner.gpu import GIB, process_gpu_memory_bytes, read_gpu
from hymt.settings import Settings

log = logging.getLogger("hymt.health")

PROGRAM = "hymt-server"
LOG_TAIL_LINES = 20
# A server that dies after supervisord's startsecs (a load that fails late) is restarted by supervisord without end
# and never FATAL; this many new processes without one healthy answer between them mean it cannot start either.
STARTS_BEFORE_FAILED = 3


def supervisor_rpc(settings: Settings):
    from supervisor.xmlrpc import SupervisorTransport

    transport = SupervisorTransport(None, None, serverurl=settings.supervisor_url)
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)


def server_health(settings: Settings) -> tuple[int | None, dict]:
    """(HTTP status, body) of the server's /health; (None, {"error": ...}) when it does not answer in time."""
    return _get_health(f"http://127.0.0.1:{settings.port}/health", settings)


def monitor_health(settings: Settings) -> dict:
    """What this service last saw ({"error": ...} when it does not answer)."""
    return _get_health(f"http://127.0.0.1:{settings.health_port}/health", settings)[1]


def _get_health(url: str, settings: Settings) -> tuple[int | None, dict]:
    try:
        with urllib.request.urlopen(url, timeout=min(5.0, settings.health_interval_s * 2)) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError) as exc:
        return None, {"error": f"no answer from {url}: {type(exc).__name__}"}


class Monitor:
    def __init__(self, settings: Settings, rpc=None):
        self.settings = settings
        self.rpc = rpc if rpc is not None else supervisor_rpc(settings)
        self.failures = 0
        self.restarts = 0
        self.started_at = time.monotonic()  # of the server, as far as this monitor knows
        self.next_restart_at = 0.0
        self.backoff_s = settings.health_interval_s
        self.latest: dict = {"status": "starting"}
        self.failure: dict | None = None  # why the server could not start, until it is healthy again
        self.last_pid: int | None = None
        self.unhealthy_starts = 0  # server processes seen since its last healthy answer

    def check(self) -> dict:
        status, body = server_health(self.settings)
        info = self._process_info()
        pid = info.get("pid") or None
        gpu = read_gpu()
        used = process_gpu_memory_bytes(pid) if (gpu and pid) else None
        sample = {
            "status": body.get("status", "unreachable") if status else "unreachable",
            "server_http_status": status,
            "server_state": info.get("statename"),
            "server_pid": pid,
            "gpu_memory_used_gb": round((used or 0) / GIB, 3),
            "gpu_memory_total_gb": round(gpu.total_bytes / GIB, 3) if gpu else None,
            "gpu_memory_card_used_gb": round((gpu.total_bytes - gpu.free_bytes) / GIB, 3) if gpu else None,
            "restarts": self.restarts,
            "consecutive_failures": self.failures,
            "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if gpu is None:
            sample["note"] = "no GPU visible to NVML: gpu_memory_used_gb is 0"
        if "error" in body:
            sample["error"] = body["error"]
        if body.get("database_error"):
            sample["database_error"] = body["database_error"]
        self._count_starts(status, pid)
        self._note_failure(status, info)
        if self.failure is not None:
            sample.update(status="failed", **self.failure)
        self._judge(status, sample, info)
        self.latest = sample
        return sample

    def _count_starts(self, status: int | None, pid: int | None) -> None:
        if status == 200:
            self.unhealthy_starts = 0
        elif pid and pid != self.last_pid and self.last_pid is not None:
            self.unhealthy_starts += 1
        self.last_pid = pid or self.last_pid

    def _note_failure(self, status: int | None, info: dict) -> None:
        if status == 200:
            self.failure = None
            return
        if self.failure is not None:
            return
        if info.get("statename") == "FATAL":
            why = "supervisord gave up"
        elif self.unhealthy_starts >= STARTS_BEFORE_FAILED:
            why = f"it was restarted {self.unhealthy_starts} times without becoming healthy"
        else:
            return
        tail = server_log_tail(self.settings)
        self.failure = {
            "error": f"{PROGRAM} could not start and {why}: {failure_reason(info, tail)}",
            "server_log_tail": tail,
        }
        log.error(
            "%s\nlast lines of %s:\n%s",
            self.failure["error"],
            server_log(self.settings),
            "\n".join(f"  {line}" for line in tail),
        )

    def _process_info(self) -> dict:
        try:
            return self.rpc.supervisor.getProcessInfo(PROGRAM)
        except (OSError, xmlrpc.client.Fault) as exc:
            log.warning("supervisord did not answer: %s", exc)
            return {}

    def _judge(self, status: int | None, sample: dict, info: dict) -> None:
        now = time.monotonic()
        healthy = status == 200
        loading = sample["status"] == "loading" and now - self.started_at < self.settings.health_grace_s
        if sample["status"] == "draining":
            return  # stopping on its own, within HYMT_DRAIN_GRACE_S: a restart would cut its requests short
        if "database_error" in sample and info.get("statename") == "RUNNING":
            return  # a restart cannot bring the database back, and would stop text translation meanwhile
        gave_up = info.get("statename") == "FATAL"  # supervisord stopped retrying a crash loop
        if healthy or loading:
            self.failures = 0
            if healthy:
                self.backoff_s = self.settings.health_interval_s
            return
        if info.get("statename") in ("STARTING", "BACKOFF"):
            return  # supervisord is (re)starting it already, and ends it FATAL when the tries run out
        self.failures += 1
        if (self.failures >= self.settings.health_failures or gave_up) and now >= self.next_restart_at:
            why = f"{sample['status']} for {self.failures} checks (state {info.get('statename')})"
            self.restart(why, hung=status is None and info.get("statename") == "RUNNING")

    def restart(self, why: str, hung: bool) -> None:
        """A hung server (no answer at all) gets SIGKILL, since it cannot shut down gracefully, and supervisord's
        autorestart brings it back; one that answers unhealthy is stopped and started; a FATAL one is started."""
        log.warning("restarting %s: %s (next restart allowed in %.0f s)", PROGRAM, why, self.backoff_s)
        try:
            state = self.rpc.supervisor.getProcessInfo(PROGRAM)["statename"]
            if hung:
                self.rpc.supervisor.signalProcess(PROGRAM, "KILL")
            else:
                if state in ("RUNNING", "STARTING", "BACKOFF"):
                    self.rpc.supervisor.stopProcess(PROGRAM, True)
                self.rpc.supervisor.startProcess(PROGRAM, False)
        except (OSError, xmlrpc.client.Fault) as exc:
            log.error("restart through supervisord failed: %s", exc)
        self.restarts += 1
        self.failures = 0
        now = time.monotonic()
        self.started_at = now
        self.next_restart_at = now + self.backoff_s
        self.backoff_s = min(self.settings.health_backoff_max_s, self.backoff_s * 2)


def server_log(settings: Settings) -> Path:
    return Path(settings.log_dir) / "server.log"


def server_log_tail(settings: Settings) -> list[str]:
    try:
        with open(server_log(settings), encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n") for line in deque(f, maxlen=LOG_TAIL_LINES)]
    except OSError as exc:
        return [f"(cannot read {server_log(settings)}: {exc.strerror})"]


def failure_reason(info: dict, tail: list[str]) -> str:
    """The server's own last error line ("hymt: error: ..." or a traceback's last line); else supervisord's."""
    for line in reversed(tail):
        if line.startswith("hymt: error: "):
            return line.removeprefix("hymt: error: ")
    for line in reversed(tail):
        if "Error: " in line or "[Errno " in line:
            return line.strip()
    return info.get("spawnerr") or info.get("description") or "no error line in its log"


def serve(settings: Settings) -> None:
    monitor = Monitor(settings)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # the http.server API
            if self.path not in ("/", "/health"):
                self._send(404, {"error": "not found", "error_type": "not_found"})
                return
            sample = monitor.latest
            self._send(200 if sample.get("server_http_status") == 200 else 503, sample)

        def _send(self, code: int, body: dict):
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    # Loopback only: it is for the probe and operators inside the container, not for the network.
    http = ThreadingHTTPServer(("127.0.0.1", settings.health_port), Handler)
    threading.Thread(target=http.serve_forever, name="health-http", daemon=True).start()
    log.info(
        "health service on :%d watching :%d every %.1f s",
        settings.health_port,
        settings.port,
        settings.health_interval_s,
    )
    while True:
        monitor.check()
        time.sleep(settings.health_interval_s)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    serve(Settings.from_env())


if __name__ == "__main__":
    main()
