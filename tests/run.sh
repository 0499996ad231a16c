#!/usr/bin/env bash
# The test command: sets up everything it needs on a fresh machine (venv, pinned packages, Chromium), then ruff, mypy and pytest.
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

# Lint, format and types first: a finding fails the run before the tests start.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

.venv/bin/python -m pytest -q -p no:cacheprovider "$@"

# `hymt quantize` needs gptqmodel, which imports torchvision; PyPI's torchvision does not import beside the CPU
# torch 2.13.0 build, so its tests run in a second venv with torch 2.14.1 and torchvision 0.29.1 (on this disk).
if [ -z "${HYMT_SKIP_QUANTIZE_TESTS:-}" ] && [ $# -eq 0 ]; then
  if [ ! -x .venv-quantize/bin/python ]; then
    python3 -m venv .venv-quantize
  fi
  .venv-quantize/bin/pip install -q --disable-pip-version-check torch==2.14.1 torchvision==0.29.1
  .venv-quantize/bin/pip install -q --disable-pip-version-check -e ".[quantize]" pytest==9.2.0 pytest-timeout==2.4.0
  .venv-quantize/bin/python -m pytest -q -p no:cacheprovider -m quantize tests/engine/test_quantize.py
fi
