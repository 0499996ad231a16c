"""The benchmark's checkpoint (`bench/run.py build`): the real 7B architecture with random weights, saved as a
Hugging Face checkpoint."""

from __future__ import annotations

import time
from pathlib import Path


def real_config():
    from transformers import HunYuanDenseV1Config

    return HunYuanDenseV1Config(
        vocab_size=128167,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
        bos_token_id=127958,
        eos_token_id=127960,
        pad_token_id=127961,
        eod_token_id=127967,
        tie_word_embeddings=False,
        attention_bias=False,
        dtype="bfloat16",
    )


def build(model_dir: Path) -> dict:
    """The 7B architecture from the real config with random weights (initialised on the GPU: seconds), saved as a
    Hugging Face checkpoint with a tokenizer that has the real special tokens and chat template."""
    import torch
    from transformers import AutoModelForCausalLM

    from hymt.testmodel import build_tokenizer

    started = time.perf_counter()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(real_config(), dtype=torch.bfloat16)
    model.save_pretrained(model_dir, max_shard_size="4GB")
    build_tokenizer().save_pretrained(model_dir)
    return {"params": sum(p.numel() for p in model.parameters()), "build_s": round(time.perf_counter() - started, 1)}
