"""The benchmark's checkpoints (`bench/run.py build`): a model's real architecture with random weights, saved as a
Hugging Face checkpoint with a tokenizer that has the model's real special tokens, ids and chat template.

Each number has one source: the size's published shape is the planner's built-in one (hymt.planner.shapes), the
fields every member shares and the vocabulary's ids are the test model's (hymt.testmodel).

Hy-MT2-30B-A3B's weights (60 GB in bf16) are not stored: the GPU machine's 64 GiB disk could not hold them beside
its GGUFs. Its folder holds the config, the tokenizer and a marked weights file of no tensors, and its weights are
generated where they are read (bench/random_weights.py)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import random_weights
from hymt.family import HUNYUAN_MT_7B, HY_MT2_30B_A3B, Family
from hymt.planner.decide import BUILT_IN_SHAPES
from hymt.testmodel import TINY_CONFIG, TINY_MOE_CONFIG, VOCABULARIES, build_tokenizer, name_checkpoint

GENERATED = (HY_MT2_30B_A3B,)  # the families whose weights are generated where read, not stored


def real_config(family: Family = HUNYUAN_MT_7B, **smaller: int):
    """The real config of the family's size (HunYuanDenseV1Config, or HYV3Config for the Mixture of Experts);
    `smaller` replaces dimensions (hidden_size, num_hidden_layers, num_experts, ...) for a build that fits a test
    on the CPU, the ids and the rest kept."""
    from transformers import HunYuanDenseV1Config, HYV3Config

    shape = BUILT_IN_SHAPES[family.size]
    vocabulary = VOCABULARIES[family.size]
    dimensions: dict[str, int | None] = dict(
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
    )
    if shape.num_experts:
        dimensions.update(
            num_experts=shape.num_experts,
            num_experts_per_tok=shape.experts_per_token,
            num_shared_experts=shape.num_shared_experts,
            moe_intermediate_size=shape.expert_intermediate_size,
            first_k_dense_replace=shape.dense_layers,
        )
    fields = {**(TINY_MOE_CONFIG if shape.num_experts else TINY_CONFIG), **dimensions, **smaller}
    if shape.num_experts:
        fields["expert_hidden_dim"] = fields["moe_intermediate_size"]  # the real config's name for it too
    config_class = HYV3Config if shape.num_experts else HunYuanDenseV1Config
    return config_class(
        **fields,
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
    tokenizer; for a family of GENERATED, its config and a marked weights file alone. hymt serves an unnamed
    checkpoint of the 7B vocabulary as Hunyuan-MT-7B, as the 7B's build always was; any other model is named as its
    hub repository is, so that hymt serves it as that model (an unnamed one of the 1.8B vocabulary would be
    HY-MT1.5-1.8B)."""
    import torch
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    config = real_config(family, **smaller)
    if family in GENERATED:
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

        model_dir.mkdir(parents=True, exist_ok=True)
        # What save_pretrained writes of a model, and llama.cpp's converter chooses its model class by.
        config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
        config.save_pretrained(model_dir)
        random_weights.mark(model_dir)
        params = sum(math.prod(shape) for shape, _ in random_weights.layout(model_dir).values())
    else:
        torch.manual_seed(0)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        model.save_pretrained(model_dir, max_shard_size="4GB")
        params = sum(p.numel() for p in model.parameters())
    if family is not HUNYUAN_MT_7B:
        name_checkpoint(model_dir, family)
    build_tokenizer(VOCABULARIES[family.size]).save_pretrained(model_dir)
    return {"params": params, "build_s": round(time.perf_counter() - started, 1)}
