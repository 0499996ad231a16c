#!/usr/bin/env bash
# The GPU's correctness checks (issue #33's third item; skipped in CI, which has no GPU), on the GPU machine with
# the carried wheels (`bash bench/carry.sh` here, then a device call with carry [".whl"]), about 6 minutes:
#   1. every Triton kernel against torch on the GPU (tests/engine/test_kernels.py cuda: the matvecs, 16-bit and
#      e4m3, the grouped experts' matmuls, 16-bit and 4-bit, attention, norms, sampling);
#   2. a decoding step with the kernels against torch's path, on the tiny 7B and Mixture-of-Experts test models;
#   3. a captured prefill step against the eager one, and an engine prefilling through its graphs, on both;
#   4. the 7B's real shape with random weights (`bench/run.py build`): each quantized profile in-process
#      (`bench/run.py check`, its start-up, greedy tokens and logits where transformers can run the same weights,
#      and decoding speed by rows), into OUT/check-PROFILE.json;
#   5. with MOE=1, the MoE kernels timed on the 30B-A3B's shapes (bench/moe_kernels.py), Hy-MT2-30B-A3B's int4
#      check on 24 GB (SKIP=check-30b-a3b leaves it out: its start takes 3-4 minutes) and its one-row step
#      profiled on 8 layers (bench/profile_step.py).
# Each step prints its result as it goes, so that a cut-off call still returns what ran. A device call's machine
# goes back 30 s after the call, so one call runs what a session needs: a second pays another start.
#
#   bash bench/gpu_checks.sh OUT [PROFILE:CARD ...]    # default: fp8:16 fp8-int8kv:12 int4:12
#   SKIP="kernels tiny" bash bench/gpu_checks.sh OUT   # without steps 1 (kernels) and 2-3 (tiny); "7b": 4
#   LAYERS=2 bash bench/gpu_checks.sh OUT fp8:16       # step 4 on the 7B's first 2 layers
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/gpu_checks.sh OUT [PROFILE:CARD ...]}
shift
profiles=("${@:-fp8:16 fp8-int8kv:12 int4:12}")
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=app:/tmp/site
mkdir -p "$out"
skipped() { [[ " ${SKIP:-} " == *" $1 "* ]]; }
step() {  # name, command...: run one check, its output in OUT/NAME.log, its outcome on one line
  local name=$1 began=$SECONDS
  shift
  if "$@" >"$out/$name.log" 2>&1; then
    echo "PASS $name ($((SECONDS - began)) s)"
  else
    echo "FAIL $name ($((SECONDS - began)) s)"
    tail -25 "$out/$name.log"
  fi
}
skipped kernels || step kernels python3 tests/engine/test_kernels.py cuda
for family in hunyuan-mt-7b hy-mt2-30b-a3b; do
  skipped tiny && continue
  [ -d "/tmp/tiny-$family" ] || step "make-$family" python3 -m hymt make-test-model "/tmp/tiny-$family" --family "$family"
  step "decoding-step-$family" python3 tests/engine/test_kernels.py cuda bfloat16 decoding_step "/tmp/tiny-$family"
  step "prefill-graphs-$family" python3 tests/engine/test_prefill_graphs.py "/tmp/tiny-$family"
done
# A model folder of the same weights with fewer layers (its config's count changed, the files linked).
shallow() {  # model folder, layers -> the shallow folder's path
  local to="$1-$2l"
  mkdir -p "$to" && ln -sf "$1"/* "$to"/ && rm "$to/config.json"
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['num_hidden_layers']=int(sys.argv[3]); \
json.dump(c, open(sys.argv[2], 'w'))" "$1/config.json" "$to/config.json" "$2"
  echo "$to"
}
summary() {  # check.json: its one line
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r.get(k) for k in \
('profile','startup_s','load_s','graphs_s','host_peak_gb','greedy_vs_generate','logits_vs_transformers','logits_vs_weights_only','w8a8_rounding_floor','speed_by_rows','peak_reserved_gb')}))" \
    "$1" 2>/dev/null
}
skipped 7b && profiles=()
[ ${#profiles[@]} -eq 0 ] || [ -d /tmp/hymt-7b ] || step build python3 bench/run.py build
model=/tmp/hymt-7b
# LAYERS=N: the checks on the first N layers, where random weights have not yet amplified the rounding.
[ -n "${LAYERS:-}" ] && [ ${#profiles[@]} -gt 0 ] && model=$(shallow /tmp/hymt-7b "$LAYERS")
for pair in ${profiles[*]}; do
  profile=${pair%%:*} card=${pair##*:}
  step "check-$profile" python3 bench/run.py check --model-dir "$model" --profile "$profile" --card "$card" \
    --identity --rows 1,64 --out "$out/check-$profile.json"
  summary "$out/check-$profile.json"
done
# MOE=1: Hy-MT2-30B-A3B in 4 bits on a 24 GB card (weights generated at load), then its one-row step profiled on
# its first 8 layers.
if [ -n "${MOE:-}" ]; then
  step moe-kernels python3 bench/moe_kernels.py --out "$out/moe-kernels.json"
  cat "$out/moe-kernels.log"
  [ -d /tmp/hymt-30b-a3b ] || step build-30b-a3b python3 bench/run.py build --family hy-mt2-30b-a3b
  if ! skipped check-30b-a3b; then
    step check-30b-a3b python3 bench/run.py check --family hy-mt2-30b-a3b --card 24 --rows 1,16 \
      --out "$out/check-30b-a3b.json"
    summary "$out/check-30b-a3b.json"
  fi
  step profile-30b-a3b python3 bench/profile_step.py --model-dir "$(shallow /tmp/hymt-30b-a3b 8)" --card 24 \
    --profile int4 --tokens 64 --out "$out/profile-30b-a3b-8layers.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps(r['job'])); \
[print(k) for k in r['kernels_by_device_time'][:20]]" "$out/profile-30b-a3b-8layers.json" 2>/dev/null
fi
