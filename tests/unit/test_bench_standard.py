"""The standard run (bench/run.py standard) for each model's size, without a GPU: the servers, llama.cpp's programs
and the engine's single stream are stood in for at the process boundary (their output, not their records), and the
servers' HTTP answers that the document and mixed scenarios read by a small fake behind httpx (hymt's jobs, its
/metrics and /translate; llama-server's chat), so the benchmark's own code makes every record. Checked: the cards
hymt is served on, the card each llama.cpp GGUF type stands for, the single streams' cards, the document and mixed
scenarios' cards and records, llama-server's prompts, the family on every record, `--scenarios`, and the tables
bench/report.py makes of the records (and of the committed 7B run, from before records named their family)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import replace
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from hymt.family import FAMILIES
from hymt.languages import resolve
from hymt.prompts import user_message

ROOT = Path(__file__).resolve().parents[2]
# The planner's profiles on Hopper (the 7B's 12 and 16 GB in fp8; 4 to 8 GB the 1.8B's).
PROFILES = {4.0: "int4-int8kv", 6.0: "bf16-int8kv", 8.0: "bf16", 12.0: "fp8-int8kv", 16.0: "fp8", 24.0: "bf16"}


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


class _Servers:
    """hymt's and llama-server's HTTP answers as the document and mixed scenarios read them, an httpx transport's
    handler (hymt on port 8100, llama-server on 8001). hymt's jobs share RATE segments a second while they run (64
    tokens each, the batch class's), until done or cancelled; /translate answers every 7th sentence with a 429 and
    the others with 64 tokens of the interactive class; llama-server answers 64 tokens."""

    RATE = 10_000

    def __init__(self):
        self.lock = threading.Lock()
        self.jobs: dict[str, dict] = {}
        self.submitted: list[tuple] = []  # (file name, lines, source, target)
        self.translated = self.refused = self.interactive_tokens = self.chats = 0
        self.clock = time.perf_counter()

    def _advance(self) -> None:  # the running jobs' progress since the last request
        now = time.perf_counter()
        running = [j for j in self.jobs.values() if j["status"] == "translating"]
        for job in running:
            job["done"] = min(job["total"], job["done"] + (now - self.clock) * self.RATE / len(running))
            if job["done"] >= job["total"]:
                job["status"] = "done"
        self.clock = now

    def _job(self, job: dict) -> dict:
        done = int(job["done"])
        return {
            "id": job["id"],
            "status": job["status"],
            "segments_done": done,
            "segments_total": job["total"],
            "queue_position": 0,
            "seconds_remaining": (job["total"] - done) / self.RATE,
            "error": None,
            "result_url": f"/api/jobs/{job['id']}/result" if job["status"] == "done" else None,
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.url.port == 8001:
            assert (request.method, path) == ("POST", "/v1/chat/completions")
            time.sleep(0.02)
            with self.lock:
                self.chats += 1
            return httpx.Response(200, json={"usage": {"completion_tokens": 64}})
        assert request.url.port == 8100
        if path == "/translate":
            time.sleep(0.005)
            with self.lock:
                self.translated += 1
                if self.translated % 7 == 0:
                    self.refused += 1
                    return httpx.Response(429, json={"error": "busy"})
                self.interactive_tokens += 64
            return httpx.Response(200, json={"translatedText": "…"})
        with self.lock:
            self._advance()
            if (request.method, path) == ("POST", "/api/jobs"):
                head = f"Content-Type: {request.headers['content-type']}\r\n\r\n".encode()
                form = BytesParser(policy=HTTP).parsebytes(head + request.read())
                fields = {part.get_param("name", header="content-disposition"): part for part in form.iter_parts()}
                assert set(fields) == {"file", "source", "target"}  # no invented fields
                lines = fields["file"].get_content().splitlines()
                source, target = (fields[k].get_content() for k in ("source", "target"))
                self.submitted.append((fields["file"].get_filename(), len(lines), source, target))
                job = {"id": f"j{len(self.jobs)}", "status": "translating", "done": 0.0, "total": len(lines)}
                self.jobs[job["id"]] = job
                return httpx.Response(202, json=self._job(job))
            if path.startswith("/api/jobs/"):
                job = self.jobs[path.rsplit("/", 1)[1]]
                if request.method == "DELETE" and job["status"] == "translating":
                    job["status"] = "cancelled"
                return httpx.Response(200, json=self._job(job))
            if path == "/health":
                running = sum(j["status"] == "translating" for j in self.jobs.values())
                return httpx.Response(200, json={"queue_depth": 0, "in_flight": min(64, running)})
            assert path == "/metrics"
            batch = 64 * sum(int(j["done"]) for j in self.jobs.values())
            text = (
                "# TYPE hymt_tokens_out counter\n"
                f"hymt_tokens_out_total {batch + self.interactive_tokens}.0\n"
                "hymt_tokens_out_created 1.7e+09\n"
                f'hymt_class_tokens_out_total{{class="interactive"}} {self.interactive_tokens}.0\n'
                f'hymt_class_tokens_out_total{{class="batch"}} {batch}.0\n'
            )
            # Where hymt says a sentence's time went: 5 ms a request, 4 of them its segment's, 1 in the queue.
            answered = self.interactive_tokens // 64
            for name, labels, seconds in (
                ("hymt_request_seconds", 'endpoint="/translate"', 0.005),
                ("hymt_segment_seconds", 'class="interactive"', 0.004),
                ("hymt_segment_queue_seconds", 'class="interactive"', 0.001),
            ):
                text += f"{name}_sum{{{labels}}} {seconds * answered}\n{name}_count{{{labels}}} {answered}.0\n"
            return httpx.Response(200, text=text)


@pytest.fixture
def servers(bench, monkeypatch):
    """The fake behind every httpx client and httpx.get the benchmark makes; the mixed scenario's pauses short."""
    fake, real = _Servers(), httpx.Client
    transport = httpx.MockTransport(fake)

    def get(url, **kwargs):
        with real(transport=transport) as session:
            return session.get(url, **kwargs)

    monkeypatch.setattr(httpx, "Client", lambda *args, **kwargs: real(*args, transport=transport, **kwargs))
    monkeypatch.setattr(httpx, "get", get)
    mixed = bench("mixed")
    monkeypatch.setattr(mixed, "POLL_S", 0.005)
    monkeypatch.setattr(mixed, "SETTLE_S", 0.02)
    return fake


@pytest.fixture
def stand_ins(bench, monkeypatch, servers):
    """The processes the run starts, and what they answer. Returns the llama-server targets the clients used, the
    fake HTTP servers and the llama.cpp preparations made."""
    serving, llama, standard = bench("serving"), bench("llama"), bench("standard")
    targets: list = []
    prepared: list = []

    def popen(cmd, env=None, **kwargs):  # hymt serve (its card in its environment) or llama-server
        card = float(env["HYMT_GPU_MEMORY_GB"]) if env and "HYMT_GPU_MEMORY_GB" in env else None
        return SimpleNamespace(pid=1, card=card)

    def run(cmd, **kwargs):  # llama-bench, or bench/profile_step.py writing its profile
        if str(cmd[0]).endswith("llama-bench"):
            rows = [{"n_prompt": 64, "n_gen": 0, "avg_ts": 5000.0}, {"n_prompt": 0, "n_gen": 128, "avg_ts": 300.0}]
            return subprocess.CompletedProcess(cmd, 0, "\n".join(map(json.dumps, rows)), "")
        card, profile = float(cmd[cmd.index("--card") + 1]), cmd[cmd.index("--profile") + 1]
        job = {"greedy": {"decode_tok_s": 400.0, "tok_s": 350.0}, "official": {"decode_tok_s": 380.0}}
        chosen = PROFILES[card] if profile == "auto" else profile
        Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps({"profile": chosen, "job": job}))
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
    ggufs = {"BF16": "/llama/model-bf16.gguf", "Q4_K_M": "/llama/model-q4km.gguf"}
    monkeypatch.setattr(llama, "prepare", lambda *args: prepared.append(args) or {"bin": "/llama/bin", "ggufs": ggufs})
    monkeypatch.setattr(standard, "build", lambda model_dir, family: {"built": family.key})
    return SimpleNamespace(targets=targets, servers=servers, prepared=prepared)


# The standard run's options that keep the mixed scenario's windows short here.
SHORT = ["--mixed-window", "0.15", "--mixed-alone", "0.08", "--document-deadline", "10"]
MIXED_FIELDS = {
    *("run", "family", "card_gb", "engine", "profile", "scenario", "clients", "tok_s", "p50_s", "p95_s"),
    *("peak_reserved_gb", "oom_events", "startup_s", "p50_censored", "p95_censored", "seconds"),
    *("documents", "document_lines", "alone_s", "window_s", "interactive_requests", "interactive_completed"),
    *("interactive_429", "interactive_errors", "interactive_unfinished", "interactive_tokens_out"),
    *("documents_tok_s", "documents_alone_tok_s", "documents_share"),
}


@pytest.mark.parametrize(
    "key,hymt_cards,llama_cards,single_streams,mixed_cards,stands_for",
    [
        (
            "hunyuan-mt-7b",
            [12.0, 24.0, 8.0, 16.0],
            {"Q4_K_M": [8.0, 12.0, 16.0], "BF16": [24.0]},
            [(12.0, "int4"), (16.0, "fp8"), (24.0, "bf16")],
            [12.0, 24.0],
            "Q4_K_M stands for 8, 12 and 16 GB, BF16 for 24 GB",
        ),
        (
            "hy-mt2-1.8b",
            [4.0, 6.0, 8.0],
            {"Q4_K_M": [4.0], "BF16": [6.0, 8.0]},
            [(4.0, "int4-int8kv"), (8.0, "bf16")],
            [4.0, 8.0],
            "Q4_K_M stands for 4 GB, BF16 for 6 and 8 GB",
        ),
    ],
)
def test_the_standard_run_of_each_family(
    bench, stand_ins, tmp_path, key, hymt_cards, llama_cards, single_streams, mixed_cards, stands_for
):
    """Each family's standard run with the stand-ins' Hopper plan: the 7B's single stream on 12 GB pinned to int4,
    which the table lists apart from the card's fp8-int8kv row."""
    run, standard, report = bench("run"), bench("standard"), bench("report")
    out = ["--out", str(tmp_path / "standard.json"), "--run", "test"]
    args = run.arguments(["standard", "--family", key, *out, *SHORT])
    assert args.model_dir == Path("/tmp/hymt-7b" if key == "hunyuan-mt-7b" else "/tmp/hymt-1.8b")
    args.model_dir = tmp_path / "model"  # missing: the run builds it
    results = standard.standard(args, standard.STANDARDS[key])
    records = results["records"]

    assert results["model"] == FAMILIES[key].name and all(r["family"] == key for r in records)
    assert records[0] == {"run": "test", "family": key, "scenario": "build", "built": key}
    assert not [r for r in records if "error" in r]
    hymt = [r for r in records if r.get("engine") == "hymt"]
    assert [r["card_gb"] for r in hymt if r["scenario"] == "clients" and r["clients"] == 1] == hymt_cards
    assert all(r["profile"] == PROFILES[r["card_gb"]] for r in hymt if r["scenario"] != "single_stream")
    assert [(r["card_gb"], r["profile"]) for r in hymt if r["scenario"] == "single_stream"] == single_streams
    in_rows = [card for card, profile in single_streams if profile == PROFILES[card]]
    for scenario in ("single_stream", "clients"):
        stood = {}
        for r in records:
            if r.get("engine") == "llama.cpp" and r["scenario"] == scenario and r["clients"] == 1:
                stood.setdefault(r["profile"], []).append(r["card_gb"])
        assert stood == llama_cards
    # llama-server is sent the prompt hymt builds for the same sentence with the family's prompts.
    message = user_message(resolve("en"), resolve("de"), "Hello.", FAMILIES[key])
    assert {t._message("Hello.", "en", "de") for t in stand_ins.targets if hasattr(t, "_message")} == {message}

    # hymt's document and mixed scenarios in the session of its clients on their cards, after the clients.
    for card in hymt_cards:
        session = [r["scenario"] for r in hymt if r["card_gb"] == card and r["scenario"] != "single_stream"]
        assert session == ["clients"] * 3 + (["document", "mixed"] if card in mixed_cards else [])
    servers = stand_ins.servers
    assert servers.submitted == [("document.txt", 2000, "en", "de")] * 9 * len(mixed_cards)  # 1 + 4 + 4 a card
    assert all(j["status"] in ("done", "cancelled") for j in servers.jobs.values())  # idle again after each
    documents = [r for r in hymt if r["scenario"] == "document"]
    assert [r["card_gb"] for r in documents] == mixed_cards
    for r in documents:
        assert r["via"] == "/api/jobs" and r["completed"] is True and r["status"] == "done"
        assert {"prompt_tokens_prefilled", "prefix_tokens_reused"} <= set(r)
        assert (r["segments_done"], r["segments_total"], r["tokens_out"]) == (2000, 2000, 2000 * 64)
        assert r["tokens_out"] / r["tok_s"] == pytest.approx(r["seconds"], abs=0.006)
    teams = [r for r in records if r["scenario"] == "mixed"]
    kinds = [next(k for k, cards in llama_cards.items() if c in cards) for c in mixed_cards]
    assert [(r["engine"], r["profile"], r["card_gb"]) for r in teams] == [
        *(("hymt", PROFILES[c], c) for c in mixed_cards),
        *(("llama.cpp", kind, c) for kind, c in zip(kinds, mixed_cards)),
    ]
    for r in teams:
        assert MIXED_FIELDS <= set(r) and (r["clients"], r["documents"], r["document_lines"]) == (16, 4, 2000)
        assert r["interactive_requests"] > 0 and r["tok_s"] > 0 and r["documents_tok_s"] > 0
        assert r["documents_share"] == pytest.approx(r["documents_tok_s"] / r["documents_alone_tok_s"], abs=0.01)
        assert r["interactive_requests"] == (
            r["interactive_completed"] + r["interactive_429"] + r["interactive_errors"] + r["interactive_unfinished"]
        )
    hymt_teams = [r for r in teams if r["engine"] == "hymt"]
    assert all({"prompt_tokens_prefilled", "prefix_tokens_reused"} <= set(r) for r in hymt_teams)
    # hymt's account of where its sentences' time went, averaged over the window; llama-server gives none.
    told = [r for r in hymt if r["scenario"] == "mixed"]
    means = {"request": 0.005, "segment": 0.004, "queue": 0.001}
    assert told and all(r["server_s"] == pytest.approx(means) for r in told)
    assert not [r for r in records if r.get("engine") == "llama.cpp" and "server_s" in r]
    # Every 7th sentence was refused: the 429s counted apart, not as errors; tokens the interactive class's.
    assert sum(r["interactive_429"] for r in hymt_teams) == servers.refused > 0
    assert sum(r["interactive_requests"] for r in hymt_teams) == servers.translated
    assert not any(r["interactive_errors"] for r in teams)
    assert sum(r["interactive_tokens_out"] for r in hymt_teams) == servers.interactive_tokens
    assert all(r["connections"] == 12 and r["interactive_429"] == 0 for r in teams if r["engine"] == "llama.cpp")

    table = report.table(results)
    assert f"random weights of the real {FAMILIES[key].name} shape" in table
    assert f"in the same run ({stands_for}):" in table
    for card in hymt_cards:
        streamed = card in in_rows
        assert (
            f"| {card:g} GB | hymt | {PROFILES[card]} | 10 (0.5 s) | 160 | 640 (0.5 / 0.6 s) | "
            + ("400 |" if streamed else "– |")
            in table
        )
        kind = next(k for k, cards in llama_cards.items() if card in cards)
        assert f"| {card:g} GB | llama.cpp | {kind} | 10 (0.5 s) | 160 | 640 (0.5 / 0.6 s) | 300 |" in table
        assert f"| {card:g} GB | 1.00x | 1.00x | {'1.33x' if streamed else '–'} |" in table
    for card, profile in single_streams:
        kind = next(k for k, cards in llama_cards.items() if card in cards)
        line = f"hymt's single stream on a {card:g} GB card in {profile}: 400 tok/s, 1.33x llama.cpp's ({kind})"
        assert (line in table) == (card not in in_rows)
    assert "Teams: interactive sentences while documents run. 16 clients send sentences" in table
    for r in teams:
        document = next((d for d in documents if d["card_gb"] == r["card_gb"] and r["engine"] == "hymt"), None)
        p50, p95 = (("≥" if r[f"{p}_censored"] else "") + f"{r[f'{p}_s']:g}" for p in ("p50", "p95"))
        row = (
            f"| {r['card_gb']:g} GB | {r['engine']} | {r['profile']} | {p50} / {p95} | "
            f"{r['interactive_429']} | {r['documents_alone_tok_s']:,.0f} | {r['documents_tok_s']:,.0f} | "
            f"{r['documents_share']:.2f} | "
        )
        if document:  # its ratio against hymt's 64 clients (the stand-in's 640 tok/s)
            row += f"{document['tok_s']:,.0f} ({document['seconds']:g} s) | {document['tok_s'] / 640:.2f} |"
        else:
            row += "– | – |"
        assert row in table


def test_the_30b_run_has_the_7b_single_stream_beside_it(bench, stand_ins, tmp_path, monkeypatch):
    """The 30B-A3B's run: hymt on 24 GB (int4) and 80 GB (bf16), its single streams while llama.cpp's conversion
    (Q8_0, then Q4_K_M alone kept) still runs, llama.cpp's Q4_K_M for 24 GB, no document or mixed scenario; then,
    its GGUFs deleted, the 7B built and its int4 single stream on 12 GB, which the table sets beside the 30B-A3B's."""
    run, standard, report = bench("run"), bench("standard"), bench("report")
    monkeypatch.setitem(PROFILES, 24.0, "int4")
    monkeypatch.setitem(PROFILES, 80.0, "bf16")
    seven_b = standard.STANDARDS["hunyuan-mt-7b"]
    monkeypatch.setitem(standard.STANDARDS, "hunyuan-mt-7b", replace(seven_b, model_dir=tmp_path / "7b"))
    # The conversion outlasts hymt's servers: it ends once both of the 30B-A3B's single streams have run (or, were
    # they to wait for it, after 30 s, and the order below fails).
    streamed, converted = [], threading.Event()
    stood_in_run, stood_in_prepare = subprocess.run, bench("llama").prepare

    def run_then_release(cmd, **kwargs):
        done = stood_in_run(cmd, **kwargs)
        streamed.append(cmd)
        if len(streamed) == 2:
            converted.set()
        return done

    def slow_prepare(*args):
        converted.wait(30)
        return stood_in_prepare(*args)

    monkeypatch.setattr(subprocess, "run", run_then_release)
    monkeypatch.setattr(bench("llama"), "prepare", slow_prepare)
    out = ["--out", str(tmp_path / "standard.json"), "--run", "test"]
    args = run.arguments(["standard", "--family", "hy-mt2-30b-a3b", *out, *SHORT])
    assert args.model_dir == Path("/tmp/hymt-30b-a3b") and args.cards == (24.0, 80.0)
    args.model_dir = tmp_path / "model"
    results = standard.standard(args, standard.STANDARDS["hy-mt2-30b-a3b"])
    records = results["records"]

    assert not [r for r in records if "error" in r]
    assert [(r["family"], r.get("engine"), r["scenario"], r.get("card_gb"), r.get("profile")) for r in records] == [
        ("hy-mt2-30b-a3b", None, "build", None, None),
        *(("hy-mt2-30b-a3b", "hymt", "clients", 24.0, "int4") for _ in range(3)),
        *(("hy-mt2-30b-a3b", "hymt", "clients", 80.0, "bf16") for _ in range(3)),
        ("hy-mt2-30b-a3b", "hymt", "single_stream", 24.0, "int4"),
        ("hy-mt2-30b-a3b", "hymt", "single_stream", 80.0, "bf16"),
        ("hy-mt2-30b-a3b", "llama.cpp", "prepare", None, None),
        ("hy-mt2-30b-a3b", "llama.cpp", "single_stream", 24.0, "Q4_K_M"),
        *(("hy-mt2-30b-a3b", "llama.cpp", "clients", 24.0, "Q4_K_M") for _ in range(3)),
        ("hunyuan-mt-7b", None, "build", None, None),
        ("hunyuan-mt-7b", "hymt", "single_stream", 12.0, "int4"),
    ]
    assert [args[-2:] for args in stand_ins.prepared] == [(("Q4_K_M",), "Q8_0")]
    assert (tmp_path / "profile-hunyuan-mt-7b-12gb-int4.json").is_file() and (tmp_path / "profile-24gb.json").is_file()
    table = report.table(results)
    assert "random weights of the real Hy-MT2-30B-A3B shape" in table and "(Q4_K_M stands for 24 GB):" in table
    assert "12 GB" not in table.split("Beside it")[0]
    assert (
        "Beside it in the same run: hunyuan-mt-7b's single stream on a 12 GB card (int4), 400 tok/s; "
        "Hy-MT2-30B-A3B's on 24 GB (int4) 400, 1.00 of it; Hy-MT2-30B-A3B's on 80 GB (bf16) 400, 1.00 of it."
    ) in table


@pytest.mark.parametrize("generated", [False, True])
def test_llama_cpp_is_converted_to_its_source_type_and_keeps_the_types_measured(
    bench, tmp_path, monkeypatch, generated
):
    """The 7B's way (BF16, kept, and Q4_K_M from it) and the 30B-A3B's (Q8_0 from weights generated where read,
    Q4_K_M from it, the Q8_0 deleted); a failed quantization leaves no GGUF behind."""
    llama, random_weights = bench("llama"), bench("random_weights")
    pack, model = tmp_path / "pack", tmp_path / "model"
    pack.mkdir()
    model.mkdir()
    with tarfile.open(pack / "llama-convert.tar.xz", "w:xz"):
        pass
    if generated:
        random_weights.mark(model)
    commands, failing = [], []

    def run(cmd, **kwargs):  # the unpacking, the converter and llama-quantize, each writing its output
        commands.append(cmd)
        if isinstance(cmd, list) and cmd[-1] in ("bf16", "q8_0"):
            Path(cmd[-2]).write_bytes(b"GGUF")
        elif isinstance(cmd, list):
            Path(cmd[-3]).write_bytes(b"GGUF")
            if failing:
                raise subprocess.CalledProcessError(1, cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", run)
    source, types = ("Q8_0", ("Q4_K_M",)) if generated else ("BF16", ("BF16", "Q4_K_M"))
    prepared = llama.prepare(pack, model, tmp_path / "work", None, [2, 3], types, source)
    assert sorted(prepared["ggufs"]) == sorted(types)
    assert sorted(p.name for p in (tmp_path / "work").glob("*.gguf")) == sorted(
        f"model-{t.lower()}.gguf" for t in types
    )
    convert, quantize = commands[1:]
    assert convert[:3] == ["taskset", "-c", "2,3"] and convert[-1] == source.lower()
    assert (convert[4] == str(ROOT / "bench" / "random_weights.py")) is generated  # the generated weights' reader
    assert ("--allow-requantize" in quantize) is generated  # from Q8_0, not from BF16
    converted = str(tmp_path / "work" / f"model-{source.lower()}.gguf")
    assert quantize[-4:] == [converted, prepared["ggufs"]["Q4_K_M"], "Q4_K_M", "2"]

    failing.append(True)
    with pytest.raises(subprocess.CalledProcessError):
        llama.prepare(pack, model, tmp_path / "work", None, [2, 3], types, source)
    assert not list((tmp_path / "work").glob("*.gguf"))


def test_the_mixed_and_document_scenarios_alone_on_one_card(bench, stand_ins, tmp_path):
    """`--scenarios mixed,document --cards 12`: hymt's session on 12 GB has them alone, and llama.cpp (converted
    for it) the mixed scenario alone, on Q4_K_M for 12 GB; `--engines hymt` does without llama.cpp."""
    run, standard, report = bench("run"), bench("standard"), bench("report")
    out = ["--out", str(tmp_path / "standard.json"), "--run", "test", "--model-dir", str(tmp_path)]
    (tmp_path / "config.json").write_text("{}")
    args = run.arguments(["standard", "--scenarios", "mixed,document", "--cards", "12", *out, *SHORT])
    records = standard.standard(args, standard.STANDARDS["hunyuan-mt-7b"])["records"]
    assert [(r.get("engine"), r["scenario"], r.get("profile"), r.get("card_gb")) for r in records] == [
        ("hymt", "document", "fp8-int8kv", 12.0),
        ("hymt", "mixed", "fp8-int8kv", 12.0),
        ("llama.cpp", "prepare", None, None),
        ("llama.cpp", "mixed", "Q4_K_M", 12.0),
    ]
    assert len(stand_ins.prepared) == 1 and not stand_ins.targets  # no clients scenario ran
    table = report.table({"records": records, "environment": {}, "new_tokens": 64})
    assert "| card | engine | profile | 1 client" not in table and "| 12 GB | hymt | fp8-int8kv | " in table
    assert "| 12 GB | hymt | fp8-int8kv | " in table and "| 12 GB | llama.cpp | Q4_K_M | " in table

    args = run.arguments(["standard", "--scenarios", "document", "--cards", "24,8", "--engines", "hymt", *out])
    records = standard.standard(args, standard.STANDARDS["hunyuan-mt-7b"])["records"]
    assert [(r["engine"], r["scenario"], r["card_gb"]) for r in records] == [("hymt", "document", 24.0)]
    assert len(stand_ins.prepared) == 1  # not converted again
    with pytest.raises(SystemExit):
        run.arguments(["standard", "--scenarios", "mixed,teams"])


def test_the_teams_table_against_the_targets(bench):
    head = {"run": "r", "family": "hunyuan-mt-7b", "card_gb": 12.0, "profile": "int4", "oom_events": 0}
    mixed = {
        **head,
        "scenario": "mixed",
        "clients": 16,
        "documents": 4,
        "document_lines": 2000,
        "alone_s": 20,
        "window_s": 40,
        "p50_censored": False,
        "interactive_errors": 0,
    }
    records = [
        {**head, "engine": "hymt", "scenario": "clients", "clients": 64, "tok_s": 5000.0, "p50_s": 0.6, "p95_s": 1},
        {**head, "engine": "hymt", "scenario": "document", "via": "/api/jobs", "clients": 1, "tok_s": 4000.0}
        | {"seconds": 32.0, "completed": True, "segments_done": 2000, "segments_total": 2000},
        {**mixed, "engine": "hymt", "p50_s": 0.3, "p95_s": 0.9, "p95_censored": False, "interactive_429": 0}
        | {"documents_alone_tok_s": 4200.0, "documents_tok_s": 3570.0, "documents_share": 0.85}
        | {"server_s": {"request": 0.31, "segment": 0.3, "queue": 0.004, "first_token": 0.05, "token": 0.004}},
        {**mixed, "engine": "llama.cpp", "profile": "Q4_K_M", "p50_s": 7.1, "p95_s": 15, "p95_censored": True}
        | {"interactive_429": 0, "documents_alone_tok_s": 450.0, "documents_tok_s": 300.0, "documents_share": 0.667},
        {**head, "card_gb": 24.0, "engine": "hymt", "scenario": "document", "via": "/api/jobs", "clients": 1}
        | {"tok_s": 2000.0, "seconds": 60.1, "completed": False, "segments_done": 1500, "segments_total": 2000},
        {**head, "card_gb": 24.0, "engine": "hymt", "scenario": "mixed", "error": "RuntimeError: POST /api/jobs"},
    ]
    table = bench("report").table({"records": records, "environment": {}, "new_tokens": 64})
    assert "| 12 GB | hymt | int4 | 0.3 / 0.9 | 0 | 4,200 | 3,570 | 0.85 | 4,000 (32 s) | 0.80 | met |" in table
    assert (
        "- 12 GB (int4): the HTTP request 0.310 s, in the engine 0.300 s, waiting for a row 0.004 s, to the first "
        "token 0.050 s, 4.0 ms between tokens." in table
    )
    assert (
        "| 12 GB | llama.cpp | Q4_K_M | 7.1 / ≥15 | 0 | 450 | 300 | 0.67 | – | – | missed: p50, p95, share |" in table
    )
    assert "| 24 GB | hymt | int4 | – | – | – | – | – | 2,000 (60.1 s), 1500/2000 by the deadline | – | – |" in table
    assert "hymt 24.0 mixed : RuntimeError: POST /api/jobs" in table  # not measured


def test_a_labelled_counter_is_read_from_the_prometheus_text(bench):
    load = bench("load")
    text = (
        "# HELP hymt_tokens_out_total Tokens generated\n"
        "hymt_tokens_out_total 300.0\n"
        'hymt_class_tokens_out_total{class="interactive"} 100.0\n'
        'hymt_class_tokens_out_total{class="batch"} 2.5e+03\n'
        "hymt_class_tokens_out_created 1.7e+09\n"
    )
    assert load.sample(text, "hymt_tokens_out") == 300
    assert load.sample(text, "hymt_class_tokens_out", {"class": "batch"}) == 2500
    assert load.sample(text, "hymt_class_tokens_out", {"class": "interactive"}) == 100
    assert load.sample(text, "hymt_class_tokens_out") == 100  # the first, as before
    assert load.sample(text, "hymt_class_tokens_out", {"class": "other"}) == 0


def test_the_servers_account_of_a_scenario_is_the_mean_of_what_it_added(bench):
    load = bench("load")
    before = {key: (1.0, 10.0) for key in load.SERVER_TIMES}
    after = {**before, "request": (3.0, 20.0), "token": (1.1, 30.0)}
    assert load.server_means(before, after) == {"server_s": {"request": 0.2, "token": 0.005}}
    assert load.server_means(before, before) == {} and load.server_means(None, None) == {}


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
