#!/usr/bin/env bash
# The GPU's correctness checks (issue #33's third item; skipped in CI, which has no GPU), on the GPU machine with
# the carried wheels (`bash bench/carry.sh` here, then a device call with carry [".whl"]), about 6 minutes:
#   1. every Triton kernel against torch on the GPU (tests/engine/test_kernels.py cuda: the matvecs, 16-bit and
#      e4m3, the grouped experts' matmuls, 16-bit and 4-bit, attention, norms, sampling);
#   2. a decoding step with the kernels against torch's path, on the tiny 7B and Mixture-of-Experts test models;
#   3. a captured prefill step against the eager one, and an engine prefilling through its graphs, on both;
#   4. the 7B's real shape with random weights (`bench/run.py build`): each quantized profile in-process
#      (`bench/run.py check`, its start-up, greedy tokens and logits where transformers can run the same weights,
#      and decoding speed by rows), into OUT/check-PROFILE.json.
# Each step prints its result as it goes, so that a cut-off call still returns what ran.
#
#   bash bench/gpu_checks.sh OUT [PROFILE:CARD ...]    # default: fp8:16 fp8-int8kv:12 int4:12
#   SKIP="kernels tiny" bash bench/gpu_checks.sh OUT   # without steps 1 (kernels) and 2-3 (tiny)
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
[ -d /tmp/hymt-7b ] || step build python3 bench/run.py build
for pair in ${profiles[*]}; do
  profile=${pair%%:*} card=${pair##*:}
  step "check-$profile" python3 bench/run.py check --profile "$profile" --card "$card" --identity --rows 1,64 \
    --out "$out/check-$profile.json"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({k: r.get(k) for k in \
('profile','startup_s','load_s','graphs_s','host_peak_gb','greedy_vs_generate','logits_vs_transformers','logits_vs_weights_only','w8a8_rounding_floor','speed_by_rows','peak_reserved_gb')}))" \
    "$out/check-$profile.json" 2>/dev/null
done
