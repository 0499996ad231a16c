import dataclasses

import pytest
from transformers import AutoTokenizer

from hymt import prompts
from hymt.engine.sampling_params import Sampling
from hymt.family import HY_MT15_7B
from hymt.languages import resolve
from hymt.translation.jobs import Options

CASES = [
    ("zh", "en", "你好，世界。", "<|startoftext|>把下面的文本翻译成英语，不要额外解释。\n\n你好，世界。<|extra_0|>"),
    ("en", "zh", "Hello, world.", "<|startoftext|>把下面的文本翻译成中文，不要额外解释。\n\nHello, world.<|extra_0|>"),
    (
        "fr",
        "de",
        "Bonjour le monde.",
        "<|startoftext|>Translate the following segment into German, without additional explanation.\n\n"
        "Bonjour le monde.<|extra_0|>",
    ),
    ("ug", "zh", "ياخشىمۇسىز", "<|startoftext|>把下面的文本翻译成中文，不要额外解释。\n\nياخشىمۇسىز<|extra_0|>"),
]


@pytest.fixture(scope="module")
def tokenizer(test_model):
    return AutoTokenizer.from_pretrained(test_model)


@pytest.mark.parametrize("source,target,text,expected", CASES)
def test_rendered_prompt_equals_official_template(tokenizer, source, target, text, expected):
    message = prompts.user_message(resolve(source), resolve(target), text)
    assert prompts.render(tokenizer, message) == expected


def test_prompt_tokens_start_with_bos_and_end_the_user_turn(tokenizer):
    rendered = prompts.render(tokenizer, prompts.user_message(resolve("en"), resolve("de"), "Hi"))
    ids = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    assert ids[0] == 127958
    assert ids[-1] == 127962
    assert tokenizer.convert_tokens_to_ids("<|eos|>") == 127960


def test_system_turn_rendering(tokenizer):
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}, {"role": "assistant", "content": "A"}],
        tokenize=False,
    )
    assert text == "<|startoftext|>S<|extra_4|>U<|extra_0|>A<|eos|>"


def test_unknown_source_uses_english_template_unless_target_is_chinese():
    assert prompts.user_message(None, resolve("de"), "x").startswith("Translate the following segment into German")
    assert prompts.user_message(None, resolve("zh"), "x").startswith("把下面的文本翻译成中文")


def test_sampling_defaults_are_the_recommended_ones():
    assert dataclasses.asdict(Sampling()) == {
        "greedy": False,
        "top_k": 20,
        "top_p": 0.6,
        "temperature": 0.7,
        "repetition_penalty": 1.05,
    }


def test_formatted_prompt_only_for_segments_with_markers():
    de, zh, en = resolve("de"), resolve("zh"), resolve("en")
    assert prompts.formatted_message(en, de, "Plain words.") == prompts.user_message(en, de, "Plain words.")
    marked = prompts.formatted_message(en, de, "Press <s1>Save</s1> now<s2/>")
    assert marked.startswith("Translate the following segment into German, without additional explanation. Tags")
    assert marked.endswith("\n\nPress <s1>Save</s1> now<s2/>")
    chinese = prompts.formatted_message(en, zh, "Press <s1>Save</s1>")
    assert chinese.startswith("把下面的文本翻译成中文，不要额外解释。原文中的<s1></s1>") and chinese.endswith(
        "\n\nPress <s1>Save</s1>"
    )


def test_engine_uses_the_formatted_prompt_when_asked(translator):
    job = translator.submit(
        [("Press <s1>Save</s1> now.", resolve("en"))],
        resolve("de"),
        Sampling(greedy=True),
        options=Options(formatted=True),
    )
    job.wait(120)
    prompt = translator.tokenizer.decode(job.requests[0].prompt_ids)
    assert "keep every tag" in prompt and "<s1>Save</s1>" in prompt


def test_hy_mt15_gets_its_official_formatted_prompt_for_marked_segments():
    en, de = resolve("en"), resolve("de")
    marked = "Press <s1>Save</s1> now<s2/>"
    assert prompts.formatted_message(en, de, marked, HY_MT15_7B) == prompts.hy_mt15_formatted_message(de, marked)
    assert prompts.segment_message(HY_MT15_7B, en, de, marked, [], formatted=True) == prompts.hy_mt15_formatted_message(
        de, marked
    )
    assert prompts.formatted_message(en, de, "Plain.", HY_MT15_7B) == prompts.user_message(en, de, "Plain.", HY_MT15_7B)


def test_the_stricter_formatted_prompt_lists_the_tags_and_reaches_the_model(translator):
    en, de, zh = resolve("en"), resolve("de"), resolve("zh")
    assert (
        prompts.strict("  Press <s1>Save</s1>\nplain\r\n<s2/>x") == "  <s0/>Press <s1>Save</s1>\nplain\r\n<s0/><s2/>x"
    )
    strict = prompts.formatted_message(en, de, prompts.strict("Press <s1>Save</s1> now<s2/>"))
    assert "these tags, which mark formatting: <s1> </s1> <s2/>." in strict and "<s0/>" not in strict
    assert strict.endswith("\n\nPress <s1>Save</s1> now<s2/>")
    assert "标签<s1> </s1>表示格式信息" in prompts.formatted_message(en, zh, "<s0/>Press <s1>Save</s1>")
    official = prompts.formatted_message(en, de, "<s0/>Hi <s1>x</s1>", HY_MT15_7B)
    assert "必须保留每一个标签（<s1> </s1>）" in official and official.endswith("<source>Hi <s1>x</s1></source>")
    assert prompts.formatted_message(en, de, "<s0/>Plain.") == prompts.user_message(en, de, "Plain.")
    # Through the engine, which builds prompts from the text alone.
    job = translator.submit(
        [(prompts.strict("Press <s1>Save</s1> now."), en)],
        de,
        Sampling(greedy=True),
        options=Options(formatted=True),
    )
    job.wait(120)
    prompt = translator.tokenizer.decode(job.requests[0].prompt_ids)
    assert "exactly once" in prompt and "<s0/>" not in prompt
