"""`hymt make-test-model`: a tiny random-weight model of one model of the family (HunYuanDenseV1ForCausalLM, or
HYV3ForCausalLM for Hy-MT2-30B-A3B), with its real vocabulary size, special tokens and ids, chat template and
embedding tying, saved in Hugging Face format so it loads through exactly the real model's code path. transformers
saves the Mixture of Experts in the published checkpoint's layout (each expert's projections apart, the router under
`mlp.router.gate`, the selection bias as `mlp.expert_bias`, the shared expert as `mlp.shared_mlp`), so loading it
goes through the same conversion as the real one. With `fp8` (a dense model), in the layout of Tencent's FP8
checkpoints."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .chat import (
    MOE_CHAT,
    MOE_REASONING,
    MOE_STOP,
    MOE_THINK,
    MOE_THINK_END,
    MOE_VOCAB_SIZE,
    SEVEN_B_CHAT,
    SMALL_ASSISTANT,
    SMALL_BOS,
    SMALL_CHAT,
    SMALL_STOP,
    SMALL_SYSTEM_END,
    SMALL_USER,
    SMALL_VOCAB_SIZE,
    ChatFormat,
)
from .errors import ConfigError
from .family import FAMILIES, HUNYUAN_MT_7B, Family
from .languages import LANGUAGES
from .prompts import XX_TEMPLATE, ZH_TEMPLATE


@dataclass(frozen=True)
class Vocabulary:
    """A tokenizer family's vocabulary: its size, its special tokens (by id) and the ids the config names."""

    chat: ChatFormat
    size: int
    first_special_id: int
    special: dict[str, int]
    bos_id: int
    eos_id: int
    pad_id: int
    tied_embeddings: bool
    config: dict = field(default_factory=dict)  # further config fields of the real checkpoint

    @property
    def pad_token(self) -> str:
        return next(t for t, i in self.special.items() if i == self.pad_id)


def _seven_b() -> Vocabulary:
    special = {
        "<|endoftext|>": 127957,
        "<|startoftext|>": 127958,
        "<|bos|>": 127959,
        "<|eos|>": 127960,
        "<|pad|>": 127961,
    }
    special.update({f"<|extra_{i}|>": 127962 + i for i in range(128167 - 127962)})
    return Vocabulary(
        SEVEN_B_CHAT,
        128167,
        127957,
        special,
        bos_id=127958,
        eos_id=127960,
        pad_id=127961,
        tied_embeddings=False,
        config={"eod_token_id": 127967},
    )


def _small() -> Vocabulary:
    """The 1.8B vocabulary. bos 120000, pad 120002 and the stop token at 120020 are the published config's ids; the
    other tokens' ids, and the pad and end-of-sentence tokens' names, are not published: they are placed here in
    the special range, and the appliance finds them by name (the chat tokens) or through the tokenizer (pad). The
    config's eod is the stop token: llama.cpp's converter writes eod_token_id as the GGUF's eos, and left out it
    is transformers' default, 3."""
    special = _filled(
        {
            SMALL_BOS: 120000,
            "<｜hy_end▁of▁sentence｜>": 120001,
            "<｜hy_pad｜>": 120002,
            SMALL_USER: 120006,
            SMALL_ASSISTANT: 120007,
            SMALL_STOP: 120020,
            SMALL_SYSTEM_END: 120021,
        },
        SMALL_VOCAB_SIZE,
    )
    return Vocabulary(
        SMALL_CHAT,
        SMALL_VOCAB_SIZE,
        120000,
        special,
        bos_id=120000,
        eos_id=120020,
        pad_id=120002,
        tied_embeddings=True,
        config={"eod_token_id": 120020},
    )


def _moe() -> Vocabulary:
    """Hy-MT2-30B-A3B's vocabulary: 120,832 entries, its special tokens by the published GGUF's names and ids (the
    1.8B's beginning, pad, user and assistant ids; its own stop token, think pair and reasoning mode); the config's
    eod 120026 (the Hugging Face config's, as a third party read it) and sep 120007 (the GGUF's separator)."""
    special = _filled(
        {
            SMALL_BOS: 120000,
            "<｜hy_end▁of▁sentence｜>": 120001,
            "<｜hy_▁pad▁｜>": 120002,
            SMALL_USER: 120006,
            SMALL_ASSISTANT: 120007,
            "<｜hy_EOT｜>": 120008,
            MOE_STOP: 120025,
            MOE_THINK: 120029,
            MOE_THINK_END: 120030,
            MOE_REASONING: 120044,
        },
        MOE_VOCAB_SIZE,
    )
    return Vocabulary(
        MOE_CHAT,
        MOE_VOCAB_SIZE,
        120000,
        special,
        bos_id=120000,
        eos_id=120025,
        pad_id=120002,
        tied_embeddings=False,
        config={"eod_token_id": 120026, "sep_token_id": 120007},
    )


def _filled(special: dict[str, int], size: int) -> dict[str, int]:
    """The named special tokens, and the rest of the special range (from 120000) under the published pattern's
    names (120026 is `<｜hy_place▁holder▁no▁8｜>` in both vocabularies)."""
    taken = set(special.values())
    return special | {
        f"<｜hy_place▁holder▁no▁{i - 120018}｜>" if i >= 120018 else f"<｜hy_reserved▁{i}｜>": i
        for i in range(120000, size)
        if i not in taken
    }


VOCABULARIES = {v.chat.key: v for v in (_seven_b(), _small(), _moe())}

# The real checkpoints' fields, with the dimensions shrunk; the 1.8B's four query heads per KV head kept (16 over 4
# in the real one; the 7B's test model has two, its real one four).
TINY_CONFIG: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=32768,
    rms_norm_eps=1e-5,
    hidden_act="silu",
    rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
    attention_bias=False,
)
_KV_HEADS = {"7b": 2, "1.8b": 1}
# Hy-MT2-30B-A3B shrunk (hy_v3; NeMo's HyMT2Config gives the real values): layer 0 dense, the others a Mixture of
# Experts whose routing is not trivial (4 of 8 experts, with a selection bias), a shared expert; eight query heads
# over one KV head (32 over 4 in the real one), so the queries are wider than the hidden state, as there (4096 from
# 2048). The keys transformers does not read are the real config's, kept as it has them.
TINY_MOE_CONFIG: dict[str, Any] = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=3,
    num_attention_heads=8,
    num_key_value_heads=1,
    head_dim=16,
    num_experts=8,
    num_experts_per_tok=4,
    num_shared_experts=1,
    moe_intermediate_size=32,
    router_scaling_factor=2.826,
    enable_moe_fp32_combine=False,
    max_position_embeddings=32768,
    rms_norm_eps=1e-5,
    hidden_act="silu",
    rope_parameters={"rope_type": "default", "rope_theta": 11158840.0},
    attention_bias=False,
    initializer_range=0.02,
    expert_hidden_dim=32,
    first_k_dense_replace=1,
    moe_router_use_sigmoid=True,
    moe_router_enable_expert_bias=True,
    route_norm=True,
    qk_norm=True,
    enable_lm_head_fp32=True,
    enable_attention_fp32_softmax=False,
)
# The selection bias's spread: about the spread of the tiny router's sigmoid scores, so that it changes some choices.
_EXPERT_BIAS = 0.05

_SAMPLE_TEXT = [
    "The quick brown fox jumps over the lazy dog. How are you today? I am fine, thank you!",
    "敏捷的棕色狐狸跳过了懒狗。你今天好吗？我很好，谢谢！",
    "Le renard brun rapide saute par-dessus le chien paresseux. Wie geht es dir heute?",
    "素早い茶色の狐が怠け者の犬を飛び越える。สวัสดีครับ ยินดีที่ได้รู้จัก",
    "བཀྲ་ཤིས་བདེ་ལེགས། ياخشىمۇسىز؟ Сәлеметсіз бе? مرحبا كيف حالك",
    "Привет, как дела? 안녕하세요. नमस्ते, आप कैसे हैं? Xin chào, bạn khỏe không?",
]


def _corpus() -> list[str]:
    lines = list(_SAMPLE_TEXT)
    for lang in LANGUAGES:
        lines.append(ZH_TEMPLATE.format(target=lang.chinese, text=lang.native))
        lines.append(XX_TEMPLATE.format(target=lang.english, text=lang.native))
    return lines


def build_tokenizer(vocabulary: Vocabulary | None = None):
    """A byte-level BPE (so any text encodes) trained on a few sentences, padded to the real vocabulary with
    unreachable filler entries so that every special token keeps its real id."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    vocabulary = vocabulary or VOCABULARIES["7b"]
    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    base.train_from_iterator(_corpus(), trainer=trainer)
    vocab = base.get_vocab()
    merges = [tuple(m) for m in json.loads(base.to_str())["model"]["merges"]]
    for i in range(len(vocab), vocabulary.first_special_id):
        vocab[f"<unused_{i}>"] = i
    vocab.update(vocabulary.special)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(vocabulary.special))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=vocabulary.chat.bos,
        eos_token=vocabulary.chat.stop,
        pad_token=vocabulary.pad_token,
        padding_side="left",
        chat_template=vocabulary.chat.template,
        model_max_length=32768,
    )


def make_test_model(directory: str | Path, seed: int = 0, family: str = HUNYUAN_MT_7B.key, fp8: bool = False) -> Path:
    """A tiny model of one model of the family: its vocabulary and template, and its hub id recorded in its
    config; with `fp8`, its projections stored as Tencent's FP8 checkpoints store them (as_published_fp8)."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, HunYuanDenseV1Config, HYV3Config

    chosen = FAMILIES[family]
    vocabulary = VOCABULARIES[chosen.size]
    moe = chosen.size == MOE_CHAT.key
    if fp8 and moe:
        raise ConfigError(f"--fp8 writes a dense model in Tencent's FP8 layout; {chosen.name} has no FP8 test model")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    ids: dict[str, Any] = dict(
        bos_token_id=vocabulary.bos_id, eos_token_id=vocabulary.eos_id, pad_token_id=vocabulary.pad_id
    )
    common = dict(
        **ids,
        **vocabulary.config,
        vocab_size=vocabulary.size,
        tie_word_embeddings=vocabulary.tied_embeddings,
        dtype="bfloat16",
    )
    config: HYV3Config | HunYuanDenseV1Config
    if moe:
        config = HYV3Config(**TINY_MOE_CONFIG, **common)
    else:
        config = HunYuanDenseV1Config(**{**TINY_CONFIG, "num_key_value_heads": _KV_HEADS[chosen.size]}, **common)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    with torch.no_grad():
        if vocabulary.tied_embeddings:
            # Tied to the output head, random embeddings make the hidden state mostly the token just read, so greedy
            # decoding repeats the assistant marker (a special token: an empty answer). Drawn smaller, the layers
            # decide.
            model.get_input_embeddings().weight.mul_(0.3)
        for layer in model.model.layers if moe else ():
            # Drawn where initialisation gives ones: a rotation keeps a vector's length, so with unit weights
            # normalising before or after the rotary embedding would agree, and a test could not tell the order.
            for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
                norm.weight.uniform_(0.5, 1.5)
            if hasattr(layer.mlp, "experts"):
                # Zeros at initialisation (the bias is learned): drawn, so that it changes which experts are chosen;
                # in float32, as transformers keeps it.
                bias = layer.mlp.e_score_correction_bias
                bias.data = torch.empty(bias.shape, dtype=torch.float32).uniform_(-_EXPERT_BIAS, _EXPERT_BIAS)
    # The recommended decoding of each model card (Hy-MT2's README: 0.7 and top-p 1.0, no top-k and no repetition
    # penalty for the 30B-A3B).
    sampling = (
        dict(top_k=0, top_p=1.0, temperature=0.7, repetition_penalty=1.0)
        if moe
        else dict(top_k=20, top_p=0.6, temperature=0.7, repetition_penalty=1.05)
    )
    model.generation_config = GenerationConfig(**ids, do_sample=True, **sampling)
    model.save_pretrained(out)
    name_checkpoint(out, chosen)
    if fp8:
        as_published_fp8(out)
    build_tokenizer(vocabulary).save_pretrained(out)
    _readable_by_all(out)
    return out


# Tencent's FP8 checkpoints' quantization_config as AngelSlim exported them (Hunyuan-MT-7B-fp8, HY-MT1.5-*-FP8, whose
# README asks to rename ignored_layers for transformers); reconstructed from AngelSlim's code, no published
# config.json having been read here (docs/profiles.md).
TENCENT_FP8_CONFIG: dict[str, Any] = {
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "strategy": "tensor", "dynamic": False, "type": "float"},
            "input_activations": {"num_bits": 8, "strategy": "tensor", "dynamic": False, "type": "float"},
            "output_activations": None,
        }
    },
    "format": "naive-quantized",
    "ignored_layers": ["lm_head"],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}
_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def as_published_fp8(directory: Path) -> None:
    """Rewrite a saved 16-bit checkpoint as AngelSlim writes FP8 ones: each projection's weight in float8_e4m3fn
    scaled by one float32 `weight_scale` [1] (amax / 448), a static `input_scale` [1] beside it, the embeddings,
    norms and head as they were; TENCENT_FP8_CONFIG in config.json."""
    import torch
    from safetensors.torch import load_file, save_file

    for file in directory.glob("*.safetensors"):
        tensors = load_file(file)
        for name in [n for n in tensors if n.endswith(".weight") and n.split(".")[-2] in _PROJECTIONS]:
            weight = tensors[name].float()
            scale = weight.abs().amax().reshape(1) / 448
            module = name.removesuffix(".weight")
            tensors[name] = (weight / scale).clamp(-448, 448).to(torch.float8_e4m3fn)
            tensors[f"{module}.weight_scale"] = scale
            # What a calibration of unit-sized activations would give; hymt does not read it.
            tensors[f"{module}.input_scale"] = torch.tensor([4.0 / 448])
        save_file(tensors, str(file), metadata={"format": "pt"})
    config_path = directory / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "quantization_config": TENCENT_FP8_CONFIG}, indent=2) + "\n")


def name_checkpoint(directory: Path, family: Family) -> None:
    """Records the model's hub id as `_name_or_path` in the saved config, where hymt.family looks for it
    (transformers 5.23 does not write it on saving): each model's hub repository is tencent/ and its own name."""
    config_path = directory / "config.json"
    saved = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({"_name_or_path": f"tencent/{family.name}", **saved}, indent=2) + "\n")


def _readable_by_all(directory: Path) -> None:
    """safetensors writes the weights through a private temporary file (mode 0600); the appliance's user (another
    uid in the image) must read them, so every file gets the mode the umask gives a new file."""
    umask = os.umask(0)
    os.umask(umask)
    for path in directory.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~umask)
