#!/usr/bin/env bash
# The test command: sets up everything it needs on a fresh machine (venv, pinned packages, Chromium), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# The CPU build of torch (on this machine's disk), then the project with its pinned test dependencies.
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/pip install -q --disable-pip-version-check -e ".[test]"

# The browser tests drive Debian's Chromium; install it when missing and we may.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is not installed and cannot be installed here: the browser tests will be skipped" >&2
  fi
fi

exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
