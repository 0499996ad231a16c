"""`hymt quantize` on the test model: an INT4 GPTQ checkpoint that the same loader serves and the planner sizes as a
4-bit tier. Runs where gptqmodel is installed (tests/run.sh makes a second venv for it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HAS_GPTQMODEL = importlib.util.find_spec("gptqmodel") is not None


def hymt(*args, stdin=None, env=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "hymt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "HYMT_MAX_NEW_TOKENS": "6", **(env or {})},
        cwd=cwd,
    )


@pytest.mark.skipif(HAS_GPTQMODEL, reason="gptqmodel is installed here")
def test_without_gptqmodel_quantize_says_what_to_install(test_model, tmp_path):
    result = hymt("quantize", "--model", str(test_model), "--out", str(tmp_path / "q"))
    assert result.returncode == 1
    assert result.stderr.strip().startswith("hymt: error: hymt quantize needs gptqmodel")
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_mixture_of_experts_is_refused_before_anything_loads(family_model, tmp_path):
    result = hymt("quantize", "--model", str(family_model("hy-mt2-30b-a3b")), "--out", str(tmp_path / "q"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert (
        "is a Mixture of Experts (Hy-MT2-30B-A3B): hymt quantize makes GPTQ checkpoints of the dense" in result.stderr
    )
    assert not (tmp_path / "q").exists()


def test_calibration_covers_the_minority_languages(test_model):
    from transformers import AutoTokenizer

    from hymt.engine.quantize import calibration_texts

    texts = calibration_texts(AutoTokenizer.from_pretrained(test_model))
    assert len(texts) >= 30
    assert all(t.startswith("<|startoftext|>") and t.endswith("<|extra_0|>") for t in texts)
    for marker in ("བཀྲ་ཤིས", "ياخشىمۇسىز", "ᠰᠠᠢᠨ", "你食咗飯未", "سالەمەتسىز"):
        assert any(marker in t for t in texts)


@pytest.fixture(scope="module")
def quantized(test_model, tmp_path_factory):
    if not HAS_GPTQMODEL:
        pytest.skip("gptqmodel is not installed in this environment")
    started_in = tmp_path_factory.mktemp("cwd")
    result = hymt("quantize", "--model", str(test_model), "--out", "tiny-int4", "--group-size", "32", cwd=started_in)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == str(started_in / "tiny-int4")
    assert sorted(p.name for p in started_in.iterdir()) == ["tiny-int4"]  # no stray logs folder beside it
    return started_in / "tiny-int4"


@pytest.mark.quantize
def test_quantize_writes_an_int4_gptq_checkpoint(quantized):
    config = json.loads((quantized / "config.json").read_text())
    assert config["quantization_config"]["quant_method"] == "gptq"
    assert config["quantization_config"]["bits"] == 4
    assert (quantized / "tokenizer.json").is_file() and (quantized / "chat_template.jinja").is_file()
    assert '"module": "self_attn.q_proj"' in (quantized / "quantize-losses.log").read_text()


@pytest.mark.quantize
def test_quantized_checkpoint_translates_through_the_same_loader(quantized):
    result = hymt(
        "translate",
        "--model",
        str(quantized),
        "--to",
        "zh",
        "--from",
        "en",
        "--greedy",
        "-",
        stdin="First line.\n\nThird line.\n",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("\n") == 3 and result.stdout.split("\n")[1] == ""


@pytest.mark.quantize
def test_planner_serves_a_4bit_checkpoint_as_a_4bit_tier(quantized):
    result = hymt("profile", "--model", str(quantized), "--gpu-memory-gb", "24")
    assert result.returncode == 0, result.stderr
    decision = json.loads(result.stdout)
    assert decision["profile"] in ("int4", "int4-int8kv") and decision["weights"] == "gptq-int4"


@pytest.mark.quantize
def test_quantize_refuses_bad_targets(quantized, test_model):
    again = hymt("quantize", "--model", str(quantized), "--out", str(quantized.parent / "again"))
    assert again.returncode == 2 and "already quantized" in again.stderr
    busy = hymt("quantize", "--model", str(test_model), "--out", str(quantized))
    assert busy.returncode == 2 and "is not empty" in busy.stderr


@pytest.mark.quantize
def test_a_gptq_checkpoint_on_a_gpu_asks_for_the_triton_kernel(quantized):
    # gptqmodel's own choice on Hopper (Machete) downloads CUTLASS while loading; the appliance may be offline.
    from hymt.checkpoint import load_config
    from hymt.engine.loader import _quantization
    from hymt.tiers import CPU_TIER, TIERS_BY_NAME

    config = load_config(quantized)
    on_gpu = _quantization(TIERS_BY_NAME["nf4"], config)
    assert on_gpu.quant_method == "gptq" and on_gpu.backend == "triton" and on_gpu.bits == 4
    assert _quantization(CPU_TIER, config) is None  # the CPU keeps gptqmodel's choice, which runs there
