#!/usr/bin/env bash
# The standard benchmark on the GPU machine (one H200, about 14 minutes: longer than one device call, so start it
# detached, `setsid nohup bash bench/gpu.sh /tmp/out &`, and read /tmp/out in the next call): the carried wheels
# installed beside the machine's torch, then `bench/run.py standard` into OUT_DIR (results, profiles, the servers'
# log), then its table.
# Arguments after OUT_DIR go to `bench/run.py standard` (`--family hy-mt2-1.8b`: the 1.8B on 4, 6 and 8 GB cards;
# `--family hy-mt2-30b-a3b`: the 30B-A3B on 24 and 80 GB, about 25 minutes, with TIMEOUT_S=1700 BUDGET_S=1380).
#
#   bash bench/carry.sh                                   # here, once: .whl/ and .llama/
#   bash bench/gpu.sh "$OUT"                              # there, with carry [".whl", ".llama"]
#   bash bench/gpu.sh "$OUT" --family hy-mt2-1.8b         # the same for the 1.8B
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu.sh OUT_DIR [bench/run.py standard arguments]}
shift
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
# A server that cannot import fails each card in seconds and the run measures nothing of hymt: stop before it (the
# 30B-A3B's model code too, which carry.sh keeps of transformers' models).
PYTHONPATH=app:/tmp/site python3 -c "import hymt.api.server, hymt.engine.weights, humming, \
transformers.models.hy_v3.modeling_hy_v3"
mkdir -p "$out"
timeout "${TIMEOUT_S:-1100}" python3 bench/run.py standard --out "$out/standard.json" --budget-s "${BUDGET_S:-700}" "$@"
python3 bench/report.py "$out" || true
