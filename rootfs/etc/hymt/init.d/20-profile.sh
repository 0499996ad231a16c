# Read the GPU (NVML, then nvidia-smi) and choose the memory profile; the server and /health read the decision.
# HYMT_PROFILE forces a profile, HYMT_GPU_MEMORY_GB simulates a card of that size.
set -eu
rm -f "$HYMT_DECISION_FILE"
if ! decision=$("$HYMT_PYTHON" -m hymt profile --output "$HYMT_DECISION_FILE.tmp" 2>&1); then
  echo "hymt: cannot start: $(printf '%s\n' "$decision" | grep '^hymt: error' | tail -n 1 | sed 's/^hymt: error: //')" >&2
  exit 1
fi
mv "$HYMT_DECISION_FILE.tmp" "$HYMT_DECISION_FILE"
profile=$("$HYMT_PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["profile"], d["kv_cache_tokens"], d["reason"], sep="|")' "$HYMT_DECISION_FILE")
echo "hymt: profile ${profile%%|*}, $(echo "$profile" | cut -d'|' -f2) KV cache tokens ($(echo "$profile" | cut -d'|' -f3))"
case "$profile" in
  cpu*) echo "hymt: warning: no usable NVIDIA GPU found; translating on the CPU will be slow" >&2 ;;
esac
