"""`hymt make-test-model`: a tiny random-weight HunYuanDenseV1ForCausalLM with the real vocabulary size, special
token ids and chat template, saved in Hugging Face format so it loads through exactly the real model's code path."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .family import FAMILIES, HUNYUAN_MT_7B
from .languages import LANGUAGES
from .prompts import CHAT_TEMPLATE, XX_TEMPLATE, ZH_TEMPLATE

VOCAB_SIZE = 128167
FIRST_SPECIAL_ID = 127957
SPECIAL_TOKENS = {
    "<|endoftext|>": 127957,
    "<|startoftext|>": 127958,
    "<|bos|>": 127959,
    "<|eos|>": 127960,
    "<|pad|>": 127961,
}
SPECIAL_TOKENS.update({f"<|extra_{i}|>": 127962 + i for i in range(VOCAB_SIZE - 127962)})

# The real checkpoint's fields, with the dimensions shrunk.
TINY_CONFIG = dict(
    vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, head_dim=16, max_position_embeddings=32768, rms_norm_eps=1e-5, hidden_act="silu",
    rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
    bos_token_id=127958, eos_token_id=127960, pad_token_id=127961, eod_token_id=127967,
    tie_word_embeddings=False, attention_bias=False,
)

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


def build_tokenizer():
    """A byte-level BPE (so any text encodes) trained on a few sentences, padded to the real vocabulary with
    unreachable filler entries so that every special token keeps its real id."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    base = Tokenizer(models.BPE())
    base.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    base.train_from_iterator(_corpus(), trainer=trainer)
    vocab = base.get_vocab()
    merges = [tuple(m) for m in json.loads(base.to_str())["model"]["merges"]]
    for i in range(len(vocab), FIRST_SPECIAL_ID):
        vocab[f"<unused_{i}>"] = i
    vocab.update(SPECIAL_TOKENS)

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|startoftext|>", eos_token="<|eos|>", pad_token="<|pad|>",
        padding_side="left", chat_template=CHAT_TEMPLATE, model_max_length=32768,
    )


def make_test_model(directory: str | Path, seed: int = 0, family: str = HUNYUAN_MT_7B.key) -> Path:
    """A tiny model of one family of the Hunyuan-MT models: the family's hub id is recorded in its config."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, HunYuanDenseV1Config

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = HunYuanDenseV1Config(**TINY_CONFIG, dtype="bfloat16")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.generation_config = GenerationConfig(
        bos_token_id=127958, eos_token_id=127960, pad_token_id=127961,
        do_sample=True, top_k=20, top_p=0.6, temperature=0.7, repetition_penalty=1.05,
    )
    model.save_pretrained(out)
    config_path = out / "config.json"  # each model's hub repository is tencent/ and its own name
    saved = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({"_name_or_path": f"tencent/{FAMILIES[family].name}", **saved}, indent=2) + "\n")
    build_tokenizer().save_pretrained(out)
    _readable_by_all(out)
    return out


def _readable_by_all(directory: Path) -> None:
    """safetensors writes the weights through a private temporary file (mode 0600); the appliance's user (another
    uid in the image) must read them, so every file gets the mode the umask gives a new file."""
    umask = os.umask(0)
    os.umask(umask)
    for path in directory.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~umask)
