"""The standard run (bench/run.py standard) for each model's size, without a GPU: the servers, llama.cpp's programs
and the engine's single stream are stood in for at the process boundary (their output, not their records), so the
benchmark's own code makes every record. Checked: the cards hymt is served on, the card each llama.cpp GGUF type
stands for, the single streams' cards, llama-server's prompts, the family on every record, and the table
bench/report.py makes of the records (and of the committed 7B run, from before records named their family)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hymt.family import FAMILIES
from hymt.languages import resolve
from hymt.prompts import user_message

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {4.0: "int4-int8kv", 6.0: "bf16-int8kv", 8.0: "bf16", 12.0: "int4", 16.0: "int4", 24.0: "bf16"}


@pytest.fixture
def bench(monkeypatch):
    """bench/'s modules by their plain names, as bench/run.py imports them; sys.path and sys.modules as they were
    afterwards."""
    monkeypatch.setattr(sys, "path", [str(ROOT / "bench"), *sys.path])
    yield importlib.import_module
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(ROOT / "bench")):
            del sys.modules[name]


class _Watcher:
    peak_gb, max_in_flight = 1.5, 1

    def __init__(self, url, pid):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


@pytest.fixture
def stand_ins(bench, monkeypatch):
    """The processes the run starts, and what they answer. Returns the llama-server targets the clients used."""
    serving, llama, standard = bench("serving"), bench("llama"), bench("standard")
    targets: list = []

    def popen(cmd, env=None, **kwargs):  # hymt serve (its card in its environment) or llama-server
        card = float(env["HYMT_GPU_MEMORY_GB"]) if env and "HYMT_GPU_MEMORY_GB" in env else None
        return SimpleNamespace(pid=1, card=card)

    def run(cmd, **kwargs):  # llama-bench, or bench/profile_step.py writing its profile
        if str(cmd[0]).endswith("llama-bench"):
            rows = [{"n_prompt": 64, "n_gen": 0, "avg_ts": 5000.0}, {"n_prompt": 0, "n_gen": 128, "avg_ts": 300.0}]
            return subprocess.CompletedProcess(cmd, 0, "\n".join(map(json.dumps, rows)), "")
        card = float(cmd[cmd.index("--card") + 1])
        job = {"greedy": {"decode_tok_s": 400.0, "tok_s": 350.0}, "official": {"decode_tok_s": 380.0}}
        Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps({"profile": PROFILES[card], "job": job}))
        return subprocess.CompletedProcess(cmd, 0)

    def clients(target, count, per_client, deadline):
        targets.append(target)
        done = {"requests": count * per_client, "completed": count * per_client}
        return {"scenario": "clients", "clients": count, **done, "tok_s": 10.0 * count, "p50_s": 0.5, "p95_s": 0.6}

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    for module in (serving, llama):
        monkeypatch.setattr(module, "Watcher", _Watcher)
        monkeypatch.setattr(module, "run_clients", clients)
        monkeypatch.setattr(module, "stop", lambda *args: 0)
    monkeypatch.setattr(serving, "wait_healthy", lambda url, process, timeout: {"profile": PROFILES[process.card]})
    monkeypatch.setattr(llama, "wait_healthy", lambda url, process, timeout: {})
    monkeypatch.setattr(serving, "metric", lambda url, name: 0)
    ggufs = {"BF16": "/llama/model-bf16.gguf", "Q4_K_M": "/llama/model-q4km.gguf"}
    monkeypatch.setattr(llama, "prepare", lambda *args: {"bin": "/llama/bin", "ggufs": ggufs})
    monkeypatch.setattr(standard, "build", lambda model_dir, family: {"built": family.key})
    return targets


@pytest.mark.parametrize(
    "key,hymt_cards,llama_cards,single_stream_cards,stands_for",
    [
        (
            "hunyuan-mt-7b",
            [12.0, 24.0, 8.0, 16.0],
            {"Q4_K_M": [8.0, 12.0, 16.0], "BF16": [24.0]},
            [12.0, 24.0],
            "Q4_K_M stands for 8, 12 and 16 GB, BF16 for 24 GB",
        ),
        (
            "hy-mt2-1.8b",
            [4.0, 6.0, 8.0],
            {"Q4_K_M": [4.0], "BF16": [6.0, 8.0]},
            [4.0, 8.0],
            "Q4_K_M stands for 4 GB, BF16 for 6 and 8 GB",
        ),
    ],
)
def test_the_standard_run_of_each_family(
    bench, stand_ins, tmp_path, key, hymt_cards, llama_cards, single_stream_cards, stands_for
):
    run, standard, report = bench("run"), bench("standard"), bench("report")
    args = run.arguments(["standard", "--family", key, "--out", str(tmp_path / "standard.json"), "--run", "test"])
    assert args.model_dir == Path("/tmp/hymt-7b" if key == "hunyuan-mt-7b" else "/tmp/hymt-1.8b")
    args.model_dir = tmp_path / "model"  # missing: the run builds it
    results = standard.standard(args, standard.STANDARDS[key])
    records = results["records"]

    assert results["model"] == FAMILIES[key].name and all(r["family"] == key for r in records)
    assert records[0] == {"run": "test", "family": key, "scenario": "build", "built": key}
    assert not [r for r in records if "error" in r]
    hymt = [r for r in records if r.get("engine") == "hymt"]
    assert [r["card_gb"] for r in hymt if r["scenario"] == "clients" and r["clients"] == 1] == hymt_cards
    assert all(r["profile"] == PROFILES[r["card_gb"]] for r in hymt)
    assert [r["card_gb"] for r in hymt if r["scenario"] == "single_stream"] == single_stream_cards
    for scenario in ("single_stream", "clients"):
        stood = {}
        for r in records:
            if r.get("engine") == "llama.cpp" and r["scenario"] == scenario and r["clients"] == 1:
                stood.setdefault(r["profile"], []).append(r["card_gb"])
        assert stood == llama_cards
    # llama-server is sent the prompt hymt builds for the same sentence with the family's prompts.
    message = user_message(resolve("en"), resolve("de"), "Hello.", FAMILIES[key])
    assert {t._message("Hello.", "en", "de") for t in stand_ins if hasattr(t, "_message")} == {message}

    table = report.table(results)
    assert f"random weights of the real {FAMILIES[key].name} shape" in table
    assert f"in the same run ({stands_for}):" in table
    for card in hymt_cards:
        streamed = card in single_stream_cards
        assert (
            f"| {card:g} GB | hymt | {PROFILES[card]} | 10 (0.5 s) | 160 | 640 (0.5 / 0.6 s) | "
            + ("400 |" if streamed else "– |")
            in table
        )
        kind = next(k for k, cards in llama_cards.items() if card in cards)
        assert f"| {card:g} GB | llama.cpp | {kind} | 10 (0.5 s) | 160 | 640 (0.5 / 0.6 s) | 300 |" in table
        assert f"| {card:g} GB | 1.00x | 1.00x | {'1.33x' if streamed else '–'} |" in table


def test_the_report_of_the_committed_7b_run_reads_its_cards_from_its_records(bench):
    results = json.loads((ROOT / "bench" / "results" / "standard.json").read_text())
    table = bench("report").table(results)
    assert "random weights of the real Hunyuan-MT-7B shape" in table  # the run records its model
    assert "(Q4_K_M stands for 8, 12 and 16 GB, BF16 for 24 GB):" in table
    assert [line.split(" |")[0] for line in table.splitlines() if line.startswith("| ") and "x |" in line] == [
        "| 8 GB",
        "| 12 GB",
        "| 16 GB",
        "| 24 GB",
    ]
