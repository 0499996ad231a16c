# Expandable segments let torch's allocator grow blocks instead of fragmenting a small card under varying batch
# sizes; a value set by the user wins.
set -eu
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"
