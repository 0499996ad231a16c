"""`hymt serve`: plan (or read the entrypoint's decision), then one uvicorn worker: one model copy per GPU."""

from __future__ import annotations

import logging
import sys

import uvicorn

from ..planning import decide
from ..settings import Settings
from .app import create_app

log = logging.getLogger("hymt.server")


def serve(settings: Settings) -> None:
    decision = decide(settings)
    log.info("profile %s (%s)", decision.profile, decision.reason)
    fatal: list[str] = []
    server: uvicorn.Server | None = None

    def on_fatal(message: str) -> None:
        # A model that cannot load ends the process, so supervisord and the health check see it.
        fatal.append(message)
        if server is not None:
            server.should_exit = True

    app = create_app(settings, decision, on_fatal=on_fatal)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, workers=1, log_level=settings.log_level,
                            timeout_graceful_shutdown=10)
    server = uvicorn.Server(config)
    server.run()
    if fatal:
        print(f"hymt: error: {fatal[0]}", file=sys.stderr)
        sys.exit(1)
