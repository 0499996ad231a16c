"""Each model of the family on its own test model, through the real engine on the CPU: the loader finds the member's
stop token and template, the prompt the translator sends is the member's official one, decoding matches transformers'
`generate`, and the member's stop token ends a segment."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from hymt.engine.sampling_params import Sampling
from hymt.errors import BadRequest
from hymt.family import FAMILIES, HUNYUAN_MT_7B, HY_MT2_1_8B, HY_MT2_30B_A3B
from hymt.languages import resolve
from hymt.settings import Settings
from hymt.translation.jobs import Options

GREEDY = Sampling(greedy=True)
EN, DE = resolve("en"), resolve("de")
TEXT = "Hello world. How are you?"
STOP_IDS = {"7b": 127960, "1.8b": 120020, "30b-a3b": 120025}


def start_translator(checkpoint, **changes):
    from hymt.planner.decide import decision_for
    from hymt.translation.translator import start

    settings = Settings(model=str(checkpoint), profile="cpu", greedy=True, max_new_tokens=12).replace(**changes)
    return start(settings, decision_for(settings))


def generated(translator, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """transformers' greedy `generate`, stopping where the engine stops."""
    loaded = translator.engine.runner.loaded
    ids = torch.tensor([prompt_ids])
    out = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        repetition_penalty=GREEDY.repetition_penalty,
        eos_token_id=loaded.stop_ids,
        pad_token_id=loaded.pad_id,
    )
    return [t for t in out[0, ids.shape[1] :].tolist() if t not in loaded.stop_ids]


def official_prompt(family) -> str:
    """The member's rendered prompt for TEXT into German, written out here, not taken from hymt."""
    if family.line == "hy-mt2":
        message = (
            "Translate the following text into German. Note that you should only output the translated result "
            f"without any additional explanation:\n\n{TEXT}"
        )
    else:
        message = f"Translate the following segment into German, without additional explanation.\n\n{TEXT}"
    if family.size == "30b-a3b":
        return (
            "<｜hy_begin▁of▁sentence｜><｜reasoning_mode｜>reasoning_effort:no_think"
            f"<｜hy_User｜>{message}<｜hy_Assistant｜><think></think>"
        )
    if family.small:
        return f"<｜hy_begin▁of▁sentence｜><｜hy_User｜>{message}<｜hy_Assistant｜>"
    return f"<|startoftext|>{message}<|extra_0|>"


@pytest.mark.parametrize("family", list(FAMILIES.values()), ids=list(FAMILIES))
def test_each_member_is_served_with_its_prompt_and_stop_token_as_generate_decodes(family_model, family):
    translator = start_translator(family_model(family.key))
    try:
        loaded = translator.engine.runner.loaded
        assert translator.family is family and loaded.stop_ids[0] == STOP_IDS[family.size]
        job = translator.submit([(TEXT, EN)], DE, GREEDY)
        (translated,) = job.wait(120)
        request = job.requests[0]
        assert loaded.tokenizer.decode(request.prompt_ids) == official_prompt(family)
        assert job.tokens[0] == generated(translator, request.prompt_ids, request.max_new_tokens)
        assert translated.strip()  # random weights, but text: the 1.8B's answers are not its own marker repeated
    finally:
        translator.stop()


@pytest.mark.parametrize("key", [HUNYUAN_MT_7B.key, HY_MT2_1_8B.key, HY_MT2_30B_A3B.key])
def test_the_members_stop_token_ends_a_segment(family_model, tmp_path, key):
    """A copy of the test model whose output row for the stop token is ten times that of the token it would
    choose first: greedy decoding then answers with the stop token at once, and the segment ends empty."""
    from transformers import AutoModelForCausalLM

    checkpoint = tmp_path / "stopping"
    shutil.copytree(family_model(key), checkpoint)
    translator = start_translator(checkpoint)
    try:
        first = translator.submit([(TEXT, EN)], DE, GREEDY)
        first.wait(120)
        chosen = first.tokens[0][0]
    finally:
        translator.stop()
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16)
    stop = STOP_IDS[FAMILIES[key].size]
    with torch.no_grad():
        head = model.get_output_embeddings().weight  # the embeddings themselves where they are tied
        head[stop] = 10 * head[chosen]
    model.save_pretrained(checkpoint)
    translator = start_translator(checkpoint)
    try:
        job = translator.submit([(TEXT, EN)], DE, GREEDY)
        assert job.wait(120) == [""] and job.tokens[0] == []
        assert generated(translator, job.requests[0].prompt_ids, 12) == []
    finally:
        translator.stop()


def test_the_small_models_eod_is_its_stop_token(family_model):
    """llama.cpp's converter writes the config's eod_token_id as the GGUF's eos: the 1.8B's must be its stop token,
    not transformers' default (3)."""
    config = json.loads((family_model(HY_MT2_1_8B.key) / "config.json").read_text())
    assert config["eod_token_id"] == STOP_IDS["1.8b"]


def test_style_and_background_go_into_the_prompt_or_are_refused(family_model):
    translator = start_translator(family_model(HY_MT2_1_8B.key))
    try:
        job = translator.submit([(TEXT, EN)], DE, GREEDY, options=Options(style="formal"))
        job.wait(120)
        prompt = translator.tokenizer.decode(job.requests[0].prompt_ids)
        assert "the translation style must strictly conform to [formal]:\n\n" + TEXT in prompt
        # The instruction with its style is the prefix every segment in that style shares (engine/prefixes.py).
        shared = translator.tokenizer.decode(job.requests[0].prompt_ids[: job.requests[0].prefix_tokens])
        assert "conform to [formal]" in shared and TEXT[:5] not in shared
        with pytest.raises(BadRequest, match="cannot be combined") as both:
            translator.submit([(TEXT, EN)], DE, GREEDY, options=Options(style="formal", background="A letter."))
        assert both.value.status == 422
    finally:
        translator.stop()
    translator = start_translator(family_model(HUNYUAN_MT_7B.key))
    try:
        with pytest.raises(BadRequest, match="official style prompt.*Hunyuan-MT-7B") as refused:
            translator.submit([(TEXT, EN)], DE, GREEDY, options=Options(style="formal"))
        assert refused.value.status == 422 and refused.value.error_type == "unsupported_style"
    finally:
        translator.stop()


def test_the_output_cap_of_hy_mt2_bounds_the_setting(family_model):
    translator = start_translator(family_model(HY_MT2_1_8B.key), max_new_tokens=8000, max_segment_tokens=4096)
    try:
        text = "word " * 500
        job = translator.submit([(text, EN)], DE, GREEDY)
        translator.cancel(job)
        (seq,) = job.requests
        # The setting (8000) and the source (three times its tokens and 16) allowed more.
        assert seq.max_new_tokens == 4096 < 3 * translator.count_tokens(text) + 16
    finally:
        translator.stop()
