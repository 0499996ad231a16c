"""The token engine: token ids in, token ids out. Loader, weights, KV cache, LoRA adapters, the fair scheduler, the
model runner and its kernels, and the engine thread."""
