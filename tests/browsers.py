"""Debian's Chromium for the page tests, driven by Playwright: where it is and the flags it runs with."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# hymt.lan stands for the appliance's address on a LAN: plain HTTP that is not localhost, so not a secure context
# (no navigator.clipboard), as a colleague's browser sees it.
LAN_HOST = "hymt.lan"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    f"--host-resolver-rules=MAP {LAN_HOST} 127.0.0.1",
]
