#!/usr/bin/env bash
# The test command: sets up everything it needs on a fresh machine (venv, pinned packages, Chromium, podman), then
# ruff, mypy and pytest.
#   bash tests/run.sh            everything, as CI runs it: the test files side by side (pytest-xdist), then the
#                                tests that compare latencies with nothing beside them, then `hymt quantize`'s tests
#   bash tests/run.sh --fast     the unit and engine tiers side by side, for everyday work (a few minutes)
#   bash tests/run.sh ARGS...    pytest with those arguments (a tier, a file, -k ...), one test at a time
set -euo pipefail
cd "$(dirname "$0")/.."

mode=all
if [ "${1:-}" = --fast ]; then
  mode=fast
  shift
elif [ $# -gt 0 ]; then
  mode=some
fi
# One worker more than cores: the server and browser tests wait on their servers about as much as they compute.
workers=${HYMT_TEST_WORKERS:-$(($(nproc) + 1))}
mkdir -p tests/artifacts

# `hymt quantize` needs gptqmodel, which imports torchvision; PyPI's torchvision does not import beside the CPU
# torch 2.13.0 build, so its tests run in a second venv with torch 2.14.1 and torchvision 0.29.1 (on this disk),
# made while the other tests run.
quantize_venv() {
  if [ ! -x .venv-quantize/bin/python ]; then
    python3 -m venv .venv-quantize
  fi
  .venv-quantize/bin/pip install -q --disable-pip-version-check torch==2.14.1 torchvision==0.29.1
  .venv-quantize/bin/pip install -q --disable-pip-version-check -e ".[quantize]" pytest==9.2.0 pytest-timeout==2.4.0
}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# The CPU build of torch (on this machine's disk), then the project with its pinned test dependencies; pip runs again
# only when pyproject.toml changes (its check alone takes half a minute).
stamp="torch 2.13.0 $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat .venv/.hymt-test-installed 2>/dev/null)" != "$stamp" ]; then
  .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
  .venv/bin/pip install -q --disable-pip-version-check -e ".[test]"
  echo "$stamp" >.venv/.hymt-test-installed
fi
# This venv holds what start.sh --native installs on a machine without a GPU (torch's CPU build, hymt editable): its
# stamp says so (start.sh's install_venv), so that its tests do not reinstall hymt into the venv that the other test
# files' servers are starting from (a fresh clone's CI once lost a module's server to that moment: "No module named
# hymt").
echo "torch 2.13.0 gpu=0 $(sha256sum pyproject.toml | cut -d' ' -f1)" >.venv/.hymt-installed
# After the first venv's install: both would write the project's egg-info.
quantize_pid=
if [ "$mode" = all ] && [ -z "${HYMT_SKIP_QUANTIZE_TESTS:-}" ]; then
  quantize_venv >tests/artifacts/quantize-venv.log 2>&1 &
  quantize_pid=$!
fi

# The browser tests drive Debian's Chromium; install it when missing and we may.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is not installed and cannot be installed here: the browser tests will be skipped" >&2
  fi
fi

# A translated PDF is drawn in the Noto fonts and Droid's CJK fallback (as in the image); install them when missing.
if [ ! -f /usr/share/fonts/truetype/noto/NotoSerifTibetan-Regular.ttf ] \
    || [ ! -f /usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-core fonts-droid-fallback \
      >/dev/null
  else
    echo "the Noto fonts are not installed and cannot be installed here: the PDF tests will fail" >&2
  fi
fi

# The image tests build the Dockerfile and run the container under podman (no Docker daemon here); mmdebstrap
# makes the local Debian base that stands in for the CUDA base image.
if ! command -v podman >/dev/null 2>&1 || ! command -v mmdebstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc mmdebstrap >/dev/null
  else
    echo "podman cannot be installed here (needs root and apt-get): the image tests will be skipped" >&2
  fi
fi

# The replica tests start a PostgreSQL of their own (tests/postgres.py) from Debian's binaries.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL is not installed and cannot be installed here: the replica tests will be skipped" >&2
  fi
fi

# Lint, format and types first: a finding fails the run before the tests start.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

# One test model for every worker (each would otherwise make its own).
if [ -z "${HYMT_TEST_MODEL:-}" ]; then
  HYMT_TEST_MODEL=$(mktemp -d)/tiny-hunyuan-mt
  trap 'rm -rf "$(dirname "$HYMT_TEST_MODEL")"' EXIT
  .venv/bin/hymt make-test-model "$HYMT_TEST_MODEL" >/dev/null
  export HYMT_TEST_MODEL
fi

pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider)
# A file's tests stay on one worker: its module fixtures (a server, a browser) start once. The files go to the
# workers in the order collected, the longest first (tests/conftest.py's LONG_FILES), not xdist's default of the
# files with the most tests first.
parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
case "$mode" in
  fast) "${pytest[@]}" "${parallel[@]}" tests/unit tests/engine "$@" ;;
  some) "${pytest[@]}" "$@" ;;
  all)
    # The slowest tests of each phase are listed at its end (--durations), so that CI's log shows where time goes.
    "${pytest[@]}" "${parallel[@]}" --durations=40 -m "not alone" tests/system tests/server tests/engine tests/unit
    "${pytest[@]}" --durations=10 -m alone
    if [ -n "$quantize_pid" ]; then
      wait "$quantize_pid" || { cat tests/artifacts/quantize-venv.log >&2; exit 1; }
      .venv-quantize/bin/python -m pytest -q -p no:cacheprovider --durations=10 -m quantize tests/engine/test_quantize.py
    fi
    ;;
esac
