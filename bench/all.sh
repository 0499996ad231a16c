#!/usr/bin/env bash
# The whole benchmark: hymt, the engine at a3db12e and the seed-style server on simulated 8, 12, 16 and 24 GB cards,
# plus the engine checks (greedy and logits against transformers, decoding speed by batch size, INT8 KV both ways).
# With two GPUs the engines run on separate GPUs at once (hymt on GPU 0, a3db12e on GPU 1, the seed-style server
# split between them); with one, everything runs on it in turn.
#
#   git archive a3db12e app | tar -x -C bench/.a3db12e      # the previous engine, once
#   bash bench/all.sh [OUT_DIR]                              # then: python bench/report.py OUT_DIR
set -u
cd "$(dirname "$0")/.."
out=${1:-bench/results}
model=${HYMT_BENCH_MODEL:-/tmp/hymt-7b}
mkdir -p "$out"
[ -f "$model/config.json" ] || python3 bench/run.py build --model-dir "$model"
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")

serve() {  # GPU, engines, cards, name
  CUDA_VISIBLE_DEVICES=$1 python3 bench/run.py serve --model-dir "$model" --engines "$2" --cards "$3" \
    --out "$out/serve-$4.json" --document-deadline 45
}
check() {  # GPU, card, profile, name, extra
  CUDA_VISIBLE_DEVICES=$1 timeout 300 python3 bench/run.py check --model-dir "$model" --card "$2" --profile "$3" \
    --out "$out/check-$4.json" ${5:-} > "$out/check-$4.log" 2>&1
}

first() {
  serve 0 hymt 8,12,16,24 hymt
  check 0 24 auto bf16-24gb --identity
  check 0 8 nf4 nf4-8gb
  check 0 8 nf4-int8kv nf4-int8kv-8gb
  serve 0 seed 8,12 seed-small
}
second() {
  local gpu=$(( gpus > 1 ? 1 : 0 ))
  serve $gpu a3db12e 8,12,16,24 a3db12e
  serve $gpu seed 16,24 seed-large
}
if [ "$gpus" -gt 1 ]; then
  first & second & wait
else
  first; second
fi
