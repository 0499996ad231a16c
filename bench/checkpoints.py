"""The benchmark's checkpoints (`bench/run.py build`): a model's real architecture with random weights, saved as a
Hugging Face checkpoint with a tokenizer that has the model's real special tokens, ids and chat template.

Each number has one source: the size's published shape is the planner's built-in one (hymt.planner.shapes), the
fields every member shares and the vocabulary's ids are the test model's (hymt.testmodel)."""

from __future__ import annotations

import time
from pathlib import Path

from hymt.family import HUNYUAN_MT_7B, Family
from hymt.planner.shapes import HUNYUAN_MT_7B_SHAPE, HY_MT_1_8B_SHAPE
from hymt.testmodel import TINY_CONFIG, VOCABULARIES, build_tokenizer, name_checkpoint


def real_config(family: Family = HUNYUAN_MT_7B, **smaller: int):
    """The real config of the family's size; `smaller` replaces dimensions (hidden_size, num_hidden_layers, ...)
    for a build that fits a test on the CPU, the ids and the rest kept."""
    from transformers import HunYuanDenseV1Config

    shape = HY_MT_1_8B_SHAPE if family.small else HUNYUAN_MT_7B_SHAPE
    vocabulary = VOCABULARIES[family.chat.key]
    dimensions = dict(
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
    )
    return HunYuanDenseV1Config(
        **{**TINY_CONFIG, **dimensions, **smaller},
        vocab_size=shape.vocab_size,
        bos_token_id=vocabulary.bos_id,
        eos_token_id=vocabulary.eos_id,
        pad_token_id=vocabulary.pad_id,
        **vocabulary.config,
        tie_word_embeddings=shape.tied_embeddings,
        dtype="bfloat16",
    )


def build(model_dir: Path, family: Family = HUNYUAN_MT_7B, device: str = "cuda", **smaller: int) -> dict:
    """The family's architecture with random weights (initialised on `device`: on the GPU, seconds), saved with its
    tokenizer. hymt serves an unnamed checkpoint of the 7B vocabulary as Hunyuan-MT-7B, as the 7B's build always
    was; any other model is named as its hub repository is, so that hymt serves it as that model (an unnamed one of
    the 1.8B vocabulary would be HY-MT1.5-1.8B)."""
    import torch
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(real_config(family, **smaller), dtype=torch.bfloat16)
    model.save_pretrained(model_dir, max_shard_size="4GB")
    if family is not HUNYUAN_MT_7B:
        name_checkpoint(model_dir, family)
    build_tokenizer(VOCABULARIES[family.chat.key]).save_pretrained(model_dir)
    return {"params": sum(p.numel() for p in model.parameters()), "build_s": round(time.perf_counter() - started, 1)}
