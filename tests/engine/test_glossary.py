"""Terminology and context: which glossary entries apply to a segment, the check of the output, the glossary files
read again when they change, and the engine's prompts on the HY-MT1.5 and Hunyuan-MT-7B test models."""

from __future__ import annotations

import os

import pytest

from hymt.errors import BadRequest, ConfigError
from hymt.glossary import Glossaries, Term, applicable, missing, occurs, parse_request
from hymt.languages import resolve

EN, DE, ZH, FR = resolve("en"), resolve("de"), resolve("zh"), resolve("fr")


def test_terms_match_whole_words_in_spaced_scripts_and_inside_words_in_unspaced_ones():
    assert occurs("GPU", "The gpu is fast.") and occurs("GPU", "(GPU)")
    assert not occurs("GPU", "GPUs are fast.") and not occurs("card", "discarded")
    assert occurs("显卡", "这块显卡很快。") and occurs("ＧＰＵ", "a GPU")
    assert occurs("グラフィック", "高性能なグラフィックカード")


def test_only_terms_in_the_segment_apply_once_each_and_misses_are_found():
    terms = [Term("GPU", "Grafikkarte"), Term("gpu", "GPU-Chip"), Term("driver", "Treiber"), Term("CPU", "Prozessor")]
    found = applicable(terms, "The GPU needs a driver.")
    assert found == [Term("GPU", "Grafikkarte"), Term("driver", "Treiber")]
    assert missing(found, "Die Grafikkarte braucht einen Fahrer.") == [Term("driver", "Treiber")]
    assert missing(found, "Die grafikkarte braucht einen Treiber.") == []


@pytest.mark.parametrize(
    "value,error_type",
    [
        ("GPU=Grafikkarte", "invalid_type"),
        ([{"source": "GPU"}], "invalid_type"),
        ([{"source": " ", "target": "x"}], "invalid_value"),
        ([{"source": "x" * 201, "target": "y"}], "invalid_value"),
        ([{"source": "a", "target": "b"}] * 501, "too_many_terms"),
    ],
)
def test_bad_request_glossaries_are_refused(value, error_type):
    with pytest.raises(BadRequest) as err:
        parse_request(value)
    assert err.value.error_type == error_type


def test_glossary_files_are_read_again_when_they_change(tmp_path):
    folder = tmp_path / "glossaries"
    folder.mkdir()
    (folder / "tech.tsv").write_text("en\tde\tfr\nGPU\tGrafikkarte\tcarte graphique\ndriver\tTreiber\t\n")
    store = Glossaries(str(folder))
    assert store.terms(EN, DE) == [Term("GPU", "Grafikkarte"), Term("driver", "Treiber")]
    assert store.terms(EN, FR) == [Term("GPU", "carte graphique")]
    assert store.terms(None, DE) == [
        Term("GPU", "Grafikkarte"),
        Term("driver", "Treiber"),
        Term("carte graphique", "Grafikkarte"),
    ]
    assert store.terms(EN, ZH) == []

    (folder / "more.csv").write_text('en,zh\n"CPU, the chip",处理器\n')
    assert store.terms(EN, ZH) == [Term("CPU, the chip", "处理器")]
    path = folder / "tech.tsv"
    path.write_text("en\tde\nGPU\tGPU-Karte\n")
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert store.terms(EN, DE) == [Term("GPU", "GPU-Karte")]

    path.write_text("qq\tde\nGPU\tKaputt\n")  # a bad edit keeps the last good version and is reported
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 2 * 10**9))
    assert store.terms(EN, DE) == [Term("GPU", "GPU-Karte")]
    assert "tech.tsv" in next(iter(store.status()["errors"]))


def test_bad_glossary_at_start_is_one_line(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        Glossaries(str(tmp_path / "nowhere"))
    bad = tmp_path / "bad.tsv"
    bad.write_text("en\tde\nGPU\tGrafikkarte\textra\n")
    with pytest.raises(ConfigError, match="line 2 has 3 cells"):
        Glossaries(str(bad))


def _prompts(translator, job) -> list[str]:
    return [translator.tokenizer.decode(s.prompt_ids) for s in job.requests]


@pytest.fixture(scope="module")
def hy_mt15_translator(family_model, tmp_path_factory):
    from hymt.planner.decide import decision_for
    from hymt.settings import Settings
    from hymt.translation.translator import start

    folder = tmp_path_factory.mktemp("glossaries")
    (folder / "server.tsv").write_text("en\tde\ndriver\tTreiber\n")
    settings = Settings(
        model=str(family_model("hy-mt1.5-7b")), profile="cpu", greedy=True, max_new_tokens=12, glossaries=str(folder)
    )
    translator = start(settings, decision_for(settings))
    yield translator
    translator.stop()


def test_hy_mt15_document_gets_context_and_terms(hy_mt15_translator):
    from hymt.engine.sampling_params import Sampling
    from hymt.translation.jobs import Options

    text = "The first sentence.\nThe GPU is fast.\nIts driver is new.\nThe end."
    job = hy_mt15_translator.submit(
        [(text, EN)], DE, Sampling(greedy=True), options=Options(glossary=(Term("GPU", "Grafikkarte"),))
    )
    job.wait(120)
    first, gpu, driver, end = [
        p.removeprefix("<|startoftext|>").removesuffix("<|extra_0|>") for p in _prompts(hy_mt15_translator, job)
    ]
    assert (
        first == "Translate the following segment into German, without additional explanation.\n\nThe first sentence."
    )
    assert gpu.endswith(
        "GPU 翻译成 Grafikkarte\n\n将以下文本翻译为德语，注意只需要输出翻译后的结果，不要额外解释：\nThe GPU is fast."
    )
    assert "driver 翻译成 Treiber" in driver  # from the server's glossary file
    assert end == (
        "The first sentence.\nThe GPU is fast.\nIts driver is new.\n"
        "参考上面的信息，把下面的文本翻译成德语，注意不需要翻译上文，也不要额外解释：\nThe end.\n"
    )
    # A random-weight model never writes "Grafikkarte": the miss is retried once with insistence, then reported.
    report = job.glossary_report()
    assert report["terms_applied"] == 2 and report["segments_with_terms"] == 2
    assert {(m["segment"], m["retried"]) for m in report["misses"]} == {(1, True), (2, True)}
    assert gpu.startswith("译文必须严格使用下面的术语译法：")


def test_context_stays_within_its_token_budget_and_can_be_turned_off(hy_mt15_translator):
    from hymt.engine.sampling_params import Sampling
    from hymt.translation.jobs import Options

    text = "\n".join(f"Sentence number {n} of a long document with many words in it." for n in range(40))
    job = hy_mt15_translator.submit([(text, EN)], FR, Sampling(greedy=True))
    job.wait(120)
    last = _prompts(hy_mt15_translator, job)[-1]
    context = last.removeprefix("<|startoftext|>").split("\n参考上面的信息")[0]
    assert context.endswith("Sentence number 38 of a long document with many words in it.")
    assert "Sentence number 0 " not in context
    assert hy_mt15_translator.count_tokens(context) <= hy_mt15_translator.settings.context_tokens + 40
    off = hy_mt15_translator.submit([(text, EN)], FR, Sampling(greedy=True), options=Options(context=False))
    off.wait(120)
    assert not any("参考上面的信息" in p for p in _prompts(hy_mt15_translator, off))


def test_hunyuan_mt_7b_has_no_context_and_its_own_terminology_prompt(translator):
    from hymt.engine.sampling_params import Sampling
    from hymt.translation.jobs import Options

    job = translator.submit(
        [("First line.\nThe GPU.", EN)],
        ZH,
        Sampling(greedy=True),
        options=Options(glossary=(Term("GPU", "图形处理器"),)),
    )
    job.wait(120)
    first, second = _prompts(translator, job)
    assert first == "<|startoftext|>把下面的文本翻译成中文，不要额外解释。\n\nFirst line.<|extra_0|>"
    assert second.endswith("GPU 翻译成 图形处理器\n\n把下面的文本翻译成中文，不要额外解释。\n\nThe GPU.<|extra_0|>")
    assert translator.identified.source == "config.json" and translator.family.name == "Hunyuan-MT-7B"
