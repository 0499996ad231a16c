"""The model family: which model a checkpoint holds, and every prompt path of each model, compared character for
character with the official templates (written out here, not taken from hymt.prompts)."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from hymt import prompts
from hymt.errors import ConfigError
from hymt.family import CHIMERA_7B, HUNYUAN_MT_7B, HY_MT15_7B, identify
from hymt.glossary import Term
from hymt.languages import resolve

EN, ZH, DE, FR = resolve("en"), resolve("zh"), resolve("de"), resolve("fr")


@pytest.fixture(scope="module")
def tokenizer(test_model):
    return AutoTokenizer.from_pretrained(test_model)


def test_each_test_model_is_recognized_from_its_config(family_model):
    for family in (HUNYUAN_MT_7B, CHIMERA_7B, HY_MT15_7B):
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
    small = tmp_path / "HY-MT1.5-1.8B"
    small.mkdir()
    assert identify(small).source == "assumed"


def test_unknown_checkpoint_is_assumed_and_the_setting_overrides(tmp_path):
    found = identify(tmp_path)
    assert found.family is HUNYUAN_MT_7B and found.source == "assumed"
    forced = identify(tmp_path, "hy-mt1.5-7b")
    assert forced.family is HY_MT15_7B and forced.source == "HYMT_MODEL_FAMILY"
    with pytest.raises(ConfigError):
        identify(tmp_path, "hy-mt2")


@pytest.mark.parametrize("family,source,target,expected", [
    (HUNYUAN_MT_7B, EN, ZH, "把下面的文本翻译成中文，不要额外解释。\n\nHello."),
    (HUNYUAN_MT_7B, EN, DE, "Translate the following segment into German, without additional explanation.\n\nHello."),
    (CHIMERA_7B, EN, ZH, "把下面的文本翻译成中文，不要额外解释。\n\nHello."),
    (HY_MT15_7B, EN, ZH, "将以下文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释：\n\nHello."),
    (HY_MT15_7B, ZH, EN, "将以下文本翻译为英语，注意只需要输出翻译后的结果，不要额外解释：\n\nHello."),
    (HY_MT15_7B, FR, DE, "Translate the following segment into German, without additional explanation.\n\nHello."),
])
def test_translation_prompt_of_each_family(tokenizer, family, source, target, expected):
    message = prompts.user_message(source, target, "Hello.", family)
    assert message == expected
    assert prompts.render(tokenizer, message) == f"<|startoftext|>{expected}<|extra_0|>"


def test_hy_mt15_terminology_prompt_is_the_official_one():
    terms = [Term("GPU", "Grafikkarte")]
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HY_MT15_7B) == (
        "参考下面的翻译：\nGPU 翻译成 Grafikkarte\n\n将以下文本翻译为德语，注意只需要输出翻译后的结果，不要额外解释：\nThe GPU.")
    two = [Term("GPU", "Grafikkarte"), Term("card", "Karte")]
    assert prompts.terminology_message(EN, DE, "x", two, HY_MT15_7B).startswith(
        "参考下面的翻译：\nGPU 翻译成 Grafikkarte\ncard 翻译成 Karte\n\n")


def test_hunyuan_mt_terminology_equivalent_in_its_own_instruction():
    terms = [Term("GPU", "图形处理器")]
    assert prompts.terminology_message(EN, ZH, "The GPU.", terms, HUNYUAN_MT_7B) == (
        "参考下面的翻译：\nGPU 翻译成 图形处理器\n\n把下面的文本翻译成中文，不要额外解释。\n\nThe GPU.")
    assert prompts.terminology_message(EN, DE, "The GPU.", [Term("GPU", "Grafikkarte")], HUNYUAN_MT_7B) == (
        "Refer to the following translations:\nGPU is translated as Grafikkarte\n\n"
        "Translate the following segment into German, without additional explanation.\n\nThe GPU.")


def test_retry_prompt_insists_on_the_terms():
    terms = [Term("GPU", "Grafikkarte")]
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HY_MT15_7B, strict=True).startswith(
        "译文必须严格使用下面的术语译法：\nGPU 翻译成 Grafikkarte\n\n将以下文本翻译为德语")
    assert prompts.terminology_message(EN, DE, "The GPU.", terms, HUNYUAN_MT_7B, strict=True).startswith(
        "The translation must use exactly these translations of the terms:\nGPU is translated as Grafikkarte\n\n")


def test_hy_mt15_context_prompt_is_the_official_one():
    assert prompts.context_message(EN, "Zweiter Satz.", "Erster Satz.") == (
        "Erster Satz.\n参考上面的信息，把下面的文本翻译成英语，注意不需要翻译上文，也不要额外解释：\nZweiter Satz.\n")


def test_hy_mt15_formatted_prompt_is_the_official_one():
    assert prompts.hy_mt15_formatted_message(ZH, "Hello <s1>world</s1>") == (
        "将以下<source></source>之间的文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释，原文中的<sn></sn>标签表示标签内文本包含格式"
        "信息，需要在译文中相应的位置尽量保留该标签。输出格式为：<target>str</target>\n\n<source>Hello <s1>world</s1></source>")


def test_chimera_fusion_prompt_is_the_official_one():
    candidates = [f"Hallo {n}." for n in range(1, 7)]
    assert prompts.fusion_message(EN, DE, "Hello.", candidates) == (
        "Analyze the following multiple German translations of the English segment surrounded in triple backticks "
        "and generate a single refined German translation. Only output the refined translation, do not explain.\n\n"
        "The English segment:\n```Hello.```\n\n"
        "The multiple German translations:\n"
        "1. ```Hallo 1.```\n2. ```Hallo 2.```\n3. ```Hallo 3.```\n4. ```Hallo 4.```\n5. ```Hallo 5.```\n"
        "6. ```Hallo 6.```")
    with pytest.raises(ValueError):
        prompts.fusion_message(EN, DE, "Hello.", candidates[:5])


def test_terms_take_precedence_over_context_and_context_needs_the_prompt():
    terms = [Term("GPU", "Grafikkarte")]
    assert prompts.segment_message(HY_MT15_7B, EN, DE, "The GPU.", terms, "Before.").startswith("参考下面的翻译")
    assert prompts.segment_message(HY_MT15_7B, EN, DE, "Now.", [], "Before.").startswith("Before.\n参考上面的信息")
    assert prompts.segment_message(HUNYUAN_MT_7B, EN, DE, "Now.", [], "Before.") == \
        prompts.user_message(EN, DE, "Now.")


def test_make_test_model_command_makes_each_family(tmp_path):
    import subprocess
    import sys

    made = subprocess.run([sys.executable, "-m", "hymt", "make-test-model", str(tmp_path / "m"),
                           "--family", "hy-mt1.5-7b"], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    assert identify(tmp_path / "m").family is HY_MT15_7B
    wrong = subprocess.run([sys.executable, "-m", "hymt", "make-test-model", str(tmp_path / "n"),
                            "--family", "hy-mt2"], capture_output=True, text=True, timeout=300)
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "hy-mt2" in wrong.stderr
