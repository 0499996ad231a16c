"""The container probe: exit 0 when the server can translate, 1 when not, with one line that says why. When the
server does not answer 200, the health service says whether supervisord gave up on it ("failed: ...")."""

from __future__ import annotations

import argparse
import sys

from healthcheck.service import monitor_health, server_health, server_log
from hymt.errors import ConfigError
from hymt.settings import Settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hymt-probe", description=__doc__)
    parser.add_argument("--port", type=int, help="the server's port (default HYMT_PORT)")
    parser.add_argument(
        "--log-tail",
        action="store_true",
        help="when failed, also print the server log's last lines as they were when it failed",
    )
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env().replace(port=args.port)
    except ConfigError as exc:
        print(f"unhealthy: {exc.message}")
        return 1
    status, body = server_health(settings)
    state = body.get("status", "unreachable")
    if status == 200:
        print(
            f"{state}: profile {body.get('profile')}, queue {body.get('queue_depth')}, "
            f"GPU {body.get('gpu_memory_used_gb')} GB"
        )
        return 0
    watcher = monitor_health(settings)
    if watcher.get("status") == "failed":
        print(f"failed: {watcher['error']}")
        if args.log_tail:
            print(f"last lines of {server_log(settings)}:")
            print("\n".join(f"  {line}" for line in watcher.get("server_log_tail", [])))
        return 1
    # The first word is the state ("loading", "unhealthy", "unreachable", "failed"); the rest says why.
    why = body.get("error") or (f"starting: {body.get('phase', 'loading')}" if state == "loading" else f"HTTP {status}")
    print(f"{state}: {why}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
