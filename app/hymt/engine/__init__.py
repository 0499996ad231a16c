"""The translation engine: loader, KV cache, LoRA adapters, scheduler, model runner, and the engine thread."""
