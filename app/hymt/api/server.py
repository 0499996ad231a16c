"""`hymt serve`: plan (or read the entrypoint's decision), then one uvicorn worker: one model copy per GPU.

SIGTERM (docker stop, supervisord) drains: new requests get 503 with Retry-After and /health says "draining", so a
load balancer moves on; the document jobs stop where they are, kept unfinished in the store for the next start to
resume (whoever waits on one gets a 503 that says so); the other requests in flight finish within
HYMT_DRAIN_GRACE_S (those still unfinished then end with an explicit 503), and the process exits 0. A second signal
stops at once."""

from __future__ import annotations

import logging
import re
import sys
import threading
import time

import uvicorn

from ..planner.decide import decision_for
from ..settings import Settings
from .app import create_app
from .service import Service
from .worker import JobWorker

log = logging.getLogger("hymt.server")

_KEY_IN_QUERY = re.compile(r"(api_key=)[^&\s]*", re.IGNORECASE)


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: Service, worker: JobWorker):
        super().__init__(config)
        self.service, self.worker = service, worker

    def handle_exit(self, sig, frame) -> None:
        # uvicorn's own handler would stop listening at once and re-raise the signal after shutting down (ending
        # the process by the signal, not with 0); draining first keeps every accepted request's answer.
        if self.service.draining or self.service.translator is None:
            self.should_exit = True
            self.force_exit = self.service.draining
            return
        self.service.draining = True
        log.info("signal %d: draining (at most %.0f s); new requests get 503", sig, self.service.settings.drain_grace_s)
        threading.Thread(target=self._drain, name="hymt-drain", daemon=True).start()

    def _drain(self) -> None:
        deadline = time.monotonic() + self.service.settings.drain_grace_s
        try:
            self.worker.stop_from_thread(timeout=self.service.settings.drain_grace_s)
        except Exception:
            log.exception("stopping the document jobs failed")
        while self.service.busy() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.service.busy():
            log.warning("drain grace over: ending the requests still in flight with an error")
            self.service.stop_translators()
        else:
            log.info("drained: every request in flight has its answer")
        self.should_exit = True


class _RedactKeys(logging.Filter):
    """API keys sent in a query string never reach the access log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_KEY_IN_QUERY.sub(r"\1***", a) if isinstance(a, str) else a for a in record.args)
        return True


def serve(settings: Settings) -> None:
    decision = decision_for(settings)
    log.info("profile %s (%s)", decision.profile, decision.reason)
    fatal: list[str] = []
    server: DrainingServer | None = None

    def on_fatal(message: str) -> None:
        # A model that cannot load ends the process, so supervisord and the health check see it.
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    app = create_app(settings, decision, on_fatal=on_fatal)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        workers=1,
        log_level=settings.log_level,
        timeout_graceful_shutdown=10,
    )
    logging.getLogger("uvicorn.access").addFilter(_RedactKeys())
    server = DrainingServer(config, app.state.service, app.state.worker)
    server.run()
    if fatal:
        print(f"hymt: error: {fatal[0]}", file=sys.stderr)
        sys.exit(1)
