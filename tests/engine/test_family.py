"""The model family: which model a checkpoint holds, and every prompt path of each model, compared character for
character with the official templates (written out here, not taken from hymt.prompts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from hymt import prompts
from hymt.engine.sampling_params import Sampling
from hymt.errors import ConfigError
from hymt.family import (
    CHIMERA_7B,
    FAMILIES,
    HUNYUAN_MT_7B,
    HY_MT2_1_8B,
    HY_MT2_7B,
    HY_MT2_30B_A3B,
    HY_MT15_1_8B,
    HY_MT15_7B,
    identify,
)
from hymt.glossary import Term
from hymt.languages import resolve

EN, ZH, DE, FR = resolve("en"), resolve("zh"), resolve("de"), resolve("fr")
FAKE = Path("/nonexistent")


@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=list(FAMILIES))
def test_each_test_model_is_recognized_from_its_config(family_model, family):
    found = identify(family_model(family.key))
    assert found.family is family and found.source == "config.json"


def test_path_names_the_model_when_the_config_does_not(tmp_path):
    snapshot = tmp_path / "models--tencent--HY-MT1.5-7B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    assert identify(snapshot).family is HY_MT15_7B and identify(snapshot).source == "path"
    chimera = tmp_path / "Hunyuan-MT-Chimera-7B-fp8"
    chimera.mkdir()
    assert identify(chimera).family is CHIMERA_7B
    for name, family in (("HY-MT1.5-1.8B", HY_MT15_1_8B), ("Hy-MT2-7B", HY_MT2_7B), ("hy_mt2_1.8b-q4", HY_MT2_1_8B)):
        (tmp_path / name).mkdir()
        assert identify(tmp_path / name).family is family and identify(tmp_path / name).source == "path"


def test_the_config_vocabulary_decides_the_size_over_the_name(tmp_path):
    named_7b = tmp_path / "Hy-MT2-7B"
    named_7b.mkdir()
    (named_7b / "config.json").write_text('{"vocab_size": 120818}')
    assert identify(named_7b).family is HY_MT2_1_8B
    unnamed = tmp_path / "ckpt"
    unnamed.mkdir()
    (unnamed / "config.json").write_text('{"vocab_size": 120818}')
    assert identify(unnamed).family is HY_MT15_1_8B and identify(unnamed).source == "assumed"


def test_the_mixture_of_experts_is_identified_by_name_and_by_its_architecture(tmp_path):
    """By name before its config is read (a hub cache directory, the FP8 repository's too); by its config's
    architecture (hy_v3) where nothing names it, or a name says another size; a dense config named 30B-A3B is a
    dense model."""
    for name in ("Hy-MT2-30B-A3B", "models--tencent--Hy-MT2-30B-A3B-FP8", "hy_mt2_30b_a3b-gguf"):
        (tmp_path / name).mkdir()
        assert identify(tmp_path / name).family is HY_MT2_30B_A3B and identify(tmp_path / name).source == "path"
    unnamed = tmp_path / "ckpt"
    unnamed.mkdir()
    (unnamed / "config.json").write_text('{"model_type": "hy_v3", "vocab_size": 120832}')
    assert identify(unnamed).family is HY_MT2_30B_A3B and identify(unnamed).source == "assumed"
    misnamed = tmp_path / "Hy-MT2-7B"
    misnamed.mkdir()
    (misnamed / "config.json").write_text('{"model_type": "hy_v3", "vocab_size": 120832}')
    assert identify(misnamed).family is HY_MT2_30B_A3B and identify(misnamed).source == "path"
    dense = tmp_path / "dense" / "Hy-MT2-30B-A3B"
    dense.mkdir(parents=True)
    (dense / "config.json").write_text('{"model_type": "hunyuan_v1_dense", "vocab_size": 128167}')
    assert identify(dense).family is HY_MT2_7B
    assert identify(FAKE, "hy-mt2-30b-a3b").family is HY_MT2_30B_A3B


def test_license_and_instructions_are_reported():
    assert identify(FAKE, "hy-mt2-7b").to_json()["license"] == "Apache-2.0"
    moe = identify(FAKE, "hy-mt2-30b-a3b").to_json()
    assert (moe["name"], moe["license"], moe["style_prompt"], moe["terminology_prompt"]) == (
        "Hy-MT2-30B-A3B",
        "Apache-2.0",
        True,
        True,
    )
    hunyuan = identify(FAKE, "hunyuan-mt-7b").to_json()
    assert "not valid in the EU" in hunyuan["license"] and not hunyuan["style_prompt"]
    assert identify(FAKE, "hy-mt1.5-1.8b").to_json()["background_prompt"] is True


def test_unknown_checkpoint_is_assumed_and_the_setting_overrides(tmp_path):
    found = identify(tmp_path)
    assert found.family is HUNYUAN_MT_7B and found.source == "assumed"
    forced = identify(tmp_path, "hy-mt1.5-7b")
    assert forced.family is HY_MT15_7B and forced.source == "HYMT_MODEL_FAMILY"
    with pytest.raises(ConfigError):
        identify(tmp_path, "hy-mt2")
    assert identify(tmp_path, "hy-mt2-1.8b").family is HY_MT2_1_8B


SEVEN_B_TURN = "<|startoftext|>{}<|extra_0|>"
SMALL_TURN = "<｜hy_begin▁of▁sentence｜><｜hy_User｜>{}<｜hy_Assistant｜>"  # full-width bars, U+2581
# Tencent's hy_v3_template.py, no system message, reasoning off (the HF template's rendering as a third party read it)
MOE_TURN = (
    "<｜hy_begin▁of▁sentence｜><｜reasoning_mode｜>reasoning_effort:no_think<｜hy_User｜>{}"
    "<｜hy_Assistant｜><think></think>"
)
TURNS = {"7b": SEVEN_B_TURN, "1.8b": SMALL_TURN, "30b-a3b": MOE_TURN}
HY_MT15_ZH = "将以下文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释：\n\nHello."
HY_MT15_XX = "Translate the following segment into German, without additional explanation.\n\nHello."
HY_MT2_XX = (
    "Translate the following text into German. Note that you should only output the translated result "
    "without any additional explanation:\n\nHello."
)


@pytest.mark.parametrize(
    "family,source,target,expected",
    [
        (HUNYUAN_MT_7B, EN, ZH, "把下面的文本翻译成中文，不要额外解释。\n\nHello."),
        (
            HUNYUAN_MT_7B,
            EN,
            DE,
            "Translate the following segment into German, without additional explanation.\n\nHello.",
        ),
        (CHIMERA_7B, EN, ZH, "把下面的文本翻译成中文，不要额外解释。\n\nHello."),
        (HY_MT15_7B, EN, ZH, HY_MT15_ZH),
        (HY_MT15_7B, ZH, EN, "将以下文本翻译为英语，注意只需要输出翻译后的结果，不要额外解释：\n\nHello."),
        (HY_MT15_7B, FR, DE, HY_MT15_XX),
        (HY_MT15_1_8B, EN, ZH, HY_MT15_ZH),
        (HY_MT15_1_8B, FR, DE, HY_MT15_XX),
        (HY_MT2_7B, EN, ZH, HY_MT15_ZH),
        (HY_MT2_7B, FR, DE, HY_MT2_XX),
        (HY_MT2_1_8B, EN, ZH, HY_MT15_ZH),
        (HY_MT2_1_8B, FR, DE, HY_MT2_XX),
        (HY_MT2_30B_A3B, EN, ZH, HY_MT15_ZH),
        (HY_MT2_30B_A3B, FR, DE, HY_MT2_XX),
    ],
    ids=lambda v: getattr(v, "key", None) or getattr(v, "code", None) or "",
)
def test_translation_prompt_of_each_family(family_model, family, source, target, expected):
    tokenizer = AutoTokenizer.from_pretrained(family_model(family.key))
    message = prompts.user_message(source, target, "Hello.", family)
    assert message == expected
    assert prompts.render(tokenizer, message, family) == TURNS[family.size].format(expected)


def test_hy_mt2_terminology_prompts_are_the_official_ones():
    terms = [Term("GPU", "Grafikkarte"), Term("card", "Karte")]
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HY_MT2_7B) == (
        "Reference the following translations:\nGPU translates to Grafikkarte\ncard translates to Karte\n\n"
        "Translate the following text into German. Note that you must ONLY output the translated result without any "
        "additional explanation:\n\nThe GPU."
    )
    assert prompts.terminology_message(EN, ZH, "The GPU.", [Term("GPU", "显卡")], HY_MT2_1_8B) == (
        "参考下面的翻译：\nGPU 翻译成 显卡\n"
        "将以下文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释：\n\nThe GPU."
    )
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HY_MT2_7B, strict=True).startswith(
        "The translation must use exactly these translations of the terms:\nGPU translates to Grafikkarte\n"
    )


def test_hy_mt2_style_and_background_prompts_are_the_official_ones():
    assert prompts.segment_message(HY_MT2_7B, EN, DE, "Hi.", [], style="formal") == (
        "Please translate the following text into German. Note that the translation style must strictly conform to "
        "[formal]:\n\nHi."
    )
    assert prompts.segment_message(HY_MT2_1_8B, EN, ZH, "Hi.", [], style="正式") == (
        "请将以下文本翻译为中文。\n注意翻译的风格要严格符合【正式】\n\nHi."
    )
    assert prompts.segment_message(HY_MT2_7B, EN, DE, "Hi.", [], background="A letter.") == (
        "[Background Information]\nA letter.\n\nPlease translate the following text into German, taking the "
        "provided background information into consideration.\n\n[Source Text]\nHi."
    )
    assert prompts.segment_message(HY_MT2_1_8B, EN, ZH, "Hi.", [], background="一封信。") == (
        "【背景信息】\n一封信。\n\n请结合背景信息将以下文本翻译为中文。\n\n【待翻译文本】\nHi."
    )
    # HY-MT1.5's background is its contextual translation prompt; terms still come first.
    assert prompts.segment_message(HY_MT15_1_8B, EN, DE, "Hi.", [], background="A letter.") == (
        "A letter.\n参考上面的信息，把下面的文本翻译成德语，注意不需要翻译上文，也不要额外解释：\nHi.\n"
    )
    assert prompts.segment_message(
        HY_MT2_7B, EN, DE, "The GPU.", [Term("GPU", "Grafikkarte")], style="formal"
    ).startswith("Reference the following translations:")


def test_decoding_defaults_are_each_members_published_ones():
    # Hunyuan-MT, HY-MT1.5 and Hy-MT2 (1.8B and 7B) READMEs: the same four values; Hy-MT2 adds max_tokens 4096.
    published = {"top_k": 20, "top_p": 0.6, "repetition_penalty": 1.05, "temperature": 0.7}
    defaults = Sampling()
    assert {k: getattr(defaults, k) for k in published} == published and not defaults.greedy
    assert {f.key: f.max_new_tokens for f in FAMILIES.values() if f.max_new_tokens} == {
        "hy-mt2-7b": 4096,
        "hy-mt2-1.8b": 4096,
        "hy-mt2-30b-a3b": 4096,
    }


def test_hy_mt15_terminology_prompt_is_the_official_one():
    terms = [Term("GPU", "Grafikkarte")]
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HY_MT15_7B) == (
        "参考下面的翻译：\nGPU 翻译成 Grafikkarte\n\n"
        "将以下文本翻译为德语，注意只需要输出翻译后的结果，不要额外解释：\nThe GPU."
    )
    two = [Term("GPU", "Grafikkarte"), Term("card", "Karte")]
    assert prompts.terminology_message(EN, DE, "x", two, HY_MT15_7B).startswith(
        "参考下面的翻译：\nGPU 翻译成 Grafikkarte\ncard 翻译成 Karte\n\n"
    )


def test_hunyuan_mt_terminology_equivalent_in_its_own_instruction():
    terms = [Term("GPU", "图形处理器")]
    assert prompts.terminology_message(EN, ZH, "The GPU.", terms, HUNYUAN_MT_7B) == (
        "参考下面的翻译：\nGPU 翻译成 图形处理器\n\n把下面的文本翻译成中文，不要额外解释。\n\nThe GPU."
    )
    assert prompts.terminology_message(EN, DE, "The GPU.", [Term("GPU", "Grafikkarte")], HUNYUAN_MT_7B) == (
        "Refer to the following translations:\nGPU is translated as Grafikkarte\n\n"
        "Translate the following segment into German, without additional explanation.\n\nThe GPU."
    )


def test_retry_prompt_insists_on_the_terms():
    terms = [Term("GPU", "Grafikkarte")]
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HY_MT15_7B, strict=True).startswith(
        "译文必须严格使用下面的术语译法：\nGPU 翻译成 Grafikkarte\n\n将以下文本翻译为德语"
    )
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HUNYUAN_MT_7B, strict=True).startswith(
        "The translation must use exactly these translations of the terms:\nGPU is translated as Grafikkarte\n\n"
    )


def test_hy_mt15_context_prompt_is_the_official_one():
    assert prompts.context_message(EN, "Zweiter Satz.", "Erster Satz.") == (
        "Erster Satz.\n参考上面的信息，把下面的文本翻译成英语，注意不需要翻译上文，也不要额外解释：\nZweiter Satz.\n"
    )


def test_hy_mt15_formatted_prompt_is_the_official_one():
    assert prompts.hy_mt15_formatted_message(ZH, "Hello <s1>world</s1>") == (
        "将以下<source></source>之间的文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释，"
        "原文中的<sn></sn>标签表示标签内文本包含格式信息，需要在译文中相应的位置尽量保留该标签。"
        "输出格式为：<target>str</target>\n\n<source>Hello <s1>world</s1></source>"
    )


def test_chimera_fusion_prompt_is_the_official_one():
    candidates = [f"Hallo {n}." for n in range(1, 7)]
    assert prompts.fusion_message(EN, DE, "Hello.", candidates) == (
        "Analyze the following multiple German translations of the English segment surrounded in triple backticks "
        "and generate a single refined German translation. Only output the refined translation, do not explain.\n\n"
        "The English segment:\n```Hello.```\n\n"
        "The multiple German translations:\n"
        "1. ```Hallo 1.```\n2. ```Hallo 2.```\n3. ```Hallo 3.```\n4. ```Hallo 4.```\n5. ```Hallo 5.```\n"
        "6. ```Hallo 6.```"
    )
    with pytest.raises(ValueError):
        prompts.fusion_message(EN, DE, "Hello.", candidates[:5])


def test_terms_take_precedence_over_context_and_context_needs_the_prompt():
    terms = [Term("GPU", "Grafikkarte")]
    assert prompts.segment_message(HY_MT15_7B, EN, DE, "The GPU.", terms, "Before.").startswith("参考下面的翻译")
    assert prompts.segment_message(HY_MT15_7B, EN, DE, "Now.", [], "Before.").startswith("Before.\n参考上面的信息")
    assert prompts.segment_message(HUNYUAN_MT_7B, EN, DE, "Now.", [], "Before.") == prompts.user_message(EN, DE, "Now.")


def test_make_test_model_command_makes_each_family(tmp_path):
    import subprocess
    import sys

    for family in (HY_MT15_1_8B, HY_MT2_30B_A3B):
        made = subprocess.run(
            [sys.executable, "-m", "hymt", "make-test-model", str(tmp_path / family.key), "--family", family.key],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert made.returncode == 0, made.stderr
        assert identify(tmp_path / family.key).family is family
    wrong = subprocess.run(
        [sys.executable, "-m", "hymt", "make-test-model", str(tmp_path / "n"), "--family", "hy-mt2"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "hy-mt2" in wrong.stderr


def test_the_small_test_model_has_the_real_vocabulary_tokens_and_tied_embeddings(family_model):
    import json

    checkpoint = family_model(HY_MT2_1_8B.key)
    config = json.loads((checkpoint / "config.json").read_text())
    assert (config["vocab_size"], config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (
        120818,
        120000,
        120020,
        120002,
    )
    assert config["tie_word_embeddings"] is True and config["num_attention_heads"] // config["num_key_value_heads"] == 4
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    assert len(tokenizer) == 120818 and tokenizer.pad_token_id == 120002
    assert tokenizer.convert_tokens_to_ids(["<｜hy_begin▁of▁sentence｜>", "<｜hy_place▁holder▁no▁2｜>"]) == [
        120000,
        120020,
    ]
    # An ASCII look-alike of a special token is text, not the token.
    assert 120020 not in tokenizer("<|hy_place▁holder▁no▁2|>", add_special_tokens=False)["input_ids"]
    assert tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}],
        tokenize=False,
    ) == (
        "<｜hy_begin▁of▁sentence｜>S<｜hy_place▁holder▁no▁3｜><｜hy_User｜>U<｜hy_Assistant｜>A<｜hy_place▁holder▁no▁2｜>"
    )


def test_the_moe_test_model_has_its_real_tokens_template_and_architecture(family_model):
    import json

    checkpoint = family_model(HY_MT2_30B_A3B.key)
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["architectures"] == ["HYV3ForCausalLM"] and config["tie_word_embeddings"] is False
    assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"], config["eod_token_id"]) == (
        120000,
        120025,
        120002,
        120026,
    )
    # Routing that is not trivial: 4 of 8 experts; eight query heads over one KV head, wider than the hidden state.
    assert (config["num_experts"], config["num_experts_per_tok"], config["num_shared_experts"]) == (8, 4, 1)
    assert config["num_attention_heads"] * config["head_dim"] > config["hidden_size"]
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    assert len(tokenizer) == 120832 and tokenizer.pad_token_id == 120002
    names = [
        "<｜hy_begin▁of▁sentence｜>",
        "<｜hy_User｜>",
        "<｜hy_Assistant｜>",
        "<eos:6124c78e>",
        "<think>",
        "</think>",
    ]
    assert tokenizer.convert_tokens_to_ids([*names, "<｜reasoning_mode｜>", "<｜hy_place▁holder▁no▁8｜>"]) == [
        120000,
        120006,
        120007,
        120025,
        120029,
        120030,
        120044,
        120026,
    ]
    assert tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}],
        tokenize=False,
    ) == (
        "<｜hy_begin▁of▁sentence｜>S<｜reasoning_mode｜>reasoning_effort:no_think<｜hy_User｜>U"
        "<｜hy_Assistant｜><think></think>A<eos:6124c78e>"
    )
    # The reasoning effort is a template variable; hymt renders with no_think whatever a checkpoint's default.
    assert "reasoning_effort:high" in tokenizer.apply_chat_template(
        [{"role": "user", "content": "U"}], tokenize=False, reasoning_effort="high"
    )
