#!/usr/bin/env bash
# The trade between the documents' rate and people's latency on one card: hymt's `mixed` scenario (bench/mixed.py)
# once per HYMT_BATCH_MAX_SHARE (the share of rows documents may hold while interactive work is in flight), each on
# a fresh server, warm from the first one's compile cache. One JSON file per share (trade-CARD-SHARE.json) and one
# summary line each as it ends, so that a cut-off run still returns what it measured. Longer than one device call
# for more than two shares: start it detached from a copy of the tree and read OUT in the next call.
#
#   bash bench/carry.sh                                    # here: .whl/
#   bash bench/trade.sh "$OUT" 12 1.0 0.5 0.25             # there, with carry [".whl"]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/trade.sh OUT_DIR CARD_GB SHARE...}
card=${2:?usage: bench/trade.sh OUT_DIR CARD_GB SHARE...}
shift 2
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
mkdir -p "$out"
[ -d /tmp/hymt-7b ] || python3 bench/run.py build > "$out/build.json"
for share in "$@"; do
  file="$out/trade-$card-$share.json"
  HYMT_BATCH_MAX_SHARE=$share python3 bench/run.py standard --scenarios mixed --cards "$card" --engines hymt \
    --out "$file" --budget-s 600 --mixed-alone "${ALONE_S:-15}" --mixed-window "${WINDOW_S:-30}" \
    > "$out/trade-$card-$share.log" 2>&1 || true
  python3 - "$file" "$share" <<'EOF'
import json, sys
try:
    records = json.load(open(sys.argv[1]))["records"]
except (OSError, ValueError, KeyError) as exc:
    print(f"share {sys.argv[2]}: no records ({exc})")
    sys.exit()
for r in records:
    keys = ("p50_s", "p95_s", "interactive_429", "documents_tok_s", "documents_alone_tok_s", "documents_share",
            "startup_s", "oom_events", "error")
    print(f"share {sys.argv[2]}:", json.dumps({k: r.get(k) for k in keys}))
EOF
done
