#!/usr/bin/env bash
# Where a served engine's time goes under the teams scenarios (bench/mixed.py) on the GPU machine: the document and
# mixed scenarios on one card run as bench/run.py runs them, while beside them the server's step counters are read
# from /metrics every second (metrics.txt) and py-spy samples its threads in turns of 10 s, what each thread runs
# and, every other turn, only the thread holding the GIL (spy.tar.gz, collapsed stacks per turn).
#
#   bash bench/carry.sh && cp py_spy-*.whl .whl/          # here
#   bash bench/spy.sh "$OUT" 12                          # there, with carry [".whl"]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/spy.sh OUT_DIR CARD_GB}
card=${2:-12}
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
[ -d /tmp/hymt-7b ] || python3 bench/run.py build > "$out/build.json"
python3 bench/run.py standard --scenarios document,mixed --cards "$card" --engines hymt --out "$out/teams.json" \
  --budget-s 500 > "$out/run.txt" 2>&1 &
run=$!
url=http://127.0.0.1:8100
mkdir -p /tmp/spy
(
  while kill -0 "$run" 2>/dev/null; do
    if text=$(curl -sf --max-time 2 "$url/metrics"); then
      echo "t=$(date +%s.%N) $(grep -E '^hymt_(prefill|decode)_(steps|seconds)|^hymt_class_(in_flight|queue_depth|tokens_out)' <<< "$text" | tr '\n' ' ')"
    fi
    sleep 1
  done
) > "$out/metrics.txt" &
turn=0
while kill -0 "$run" 2>/dev/null; do
  pid=$(pgrep -f "hymt serve" | head -1 || true)
  if [ -z "$pid" ] || ! curl -sf --max-time 2 "$url/health" > /dev/null; then sleep 1; continue; fi
  mode=(); [ $((turn % 2)) = 1 ] && mode=(--gil)
  /tmp/site/bin/py-spy record -p "$pid" -d 10 -r 100 --threads --nonblocking --format raw "${mode[@]}" \
    -o "/tmp/spy/$(date +%s)-${mode[*]:-all}.txt" > /dev/null 2>> /tmp/spy/errors.txt || sleep 1
  turn=$((turn + 1))
done
wait "$run" || true
tar czf "$out/spy.tar.gz" -C /tmp spy
tail -5 "$out/run.txt"
