"""hymt and the seed-style server as users reach them, on a simulated card: served over HTTP under the clients
scenarios (and, in the same session, hymt's document and mixed scenarios: bench/mixed.py), a 2,000-line document
through `hymt translate`, and hymt's single stream in-process (bench/profile_step.py). Every function returns
records of the shape bench/run.py describes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

import mixed
import random_weights
from load import Hymt, Watcher, document_lines, metric, run_clients, stop, wait_healthy

if TYPE_CHECKING:
    from hymt.family import Family

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ((1, 5), (16, 2), (64, 2))  # (clients, requests each)
ENGINE_NAMES = {"hymt": "hymt", "seed": "seed-style"}


def _server(engine: str, model_dir: Path, card: float, port: int, new_tokens: int, env: dict) -> list[str]:
    if engine == "seed":
        return [
            sys.executable,
            str(ROOT / "bench" / "seed_server.py"),
            "--model",
            str(model_dir),
            "--card",
            str(card),
            "--port",
            str(port),
            "--max-new-tokens",
            str(new_tokens),
        ]
    env["PYTHONPATH"] = _pythonpath()
    return hymt_serve(model_dir, port)


def hymt_serve(model_dir: Path, port: int) -> list[str]:
    """The command that serves `model_dir` on localhost (the package found through PYTHONPATH: see _pythonpath;
    weights generated where read through bench/random_weights.py)."""
    return random_weights.command(
        model_dir, "hymt", "serve", "--model", str(model_dir), "--host", "127.0.0.1", "--port", str(port)
    )


def _pythonpath() -> str:
    """The package first, then whatever the environment adds (the wheels carried to the GPU)."""
    return os.pathsep.join(p for p in (str(ROOT / "app"), os.environ.get("PYTHONPATH", "")) if p)


def _engine_env(card: float | None, new_tokens: int) -> dict:
    """The server's settings on a simulated card of `card` GiB; None: the CPU profile. Each server keeps its
    document jobs in a folder of its own: none of one card's jobs resumes on the next."""
    where = {"HYMT_PROFILE": "cpu"} if card is None else {"HYMT_GPU_MEMORY_GB": str(card)}
    return {
        **os.environ,
        **where,
        "HYMT_DATA_DIR": tempfile.mkdtemp(prefix="hymt-data-"),
        "HYMT_MAX_NEW_TOKENS": str(new_tokens),
        "HYMT_COMPILE_CACHE_DIR": "/tmp/hymt-compile",
        "HYMT_LOG_LEVEL": "warning",
        "TOKENIZERS_PARALLELISM": "false",
    }


def serve_engine(
    engine: str, model_dir: Path, card: float, args, log, scenarios: tuple[str, ...] = ("clients",), due=None
) -> list[dict]:
    """One server's session on `card`: the clients scenarios, then (hymt) `document` and `mixed` where
    `scenarios` names them, each only while `due(what)` (bench/standard.py's budget) allows."""
    env = _engine_env(card, args.new_tokens)
    port = 8100 + int(os.environ.get("CUDA_VISIBLE_DEVICES", "0") or 0)
    url = f"http://127.0.0.1:{port}"
    base = {"run": args.run, "family": args.family, "card_gb": card, "engine": ENGINE_NAMES[engine]}
    started = time.perf_counter()
    process = subprocess.Popen(
        _server(engine, model_dir, card, port, args.new_tokens, env), env=env, stdout=log, stderr=subprocess.STDOUT
    )
    records = []
    try:
        with Watcher(url, process.pid) as watcher:  # start-up: the warm-up's peak counts too
            health = wait_healthy(url, process, args.startup_timeout)
        base.update(profile=health.get("profile"), startup_s=round(time.perf_counter() - started, 1))
        peak = watcher.peak_gb
        deadline = args.seed_deadline if engine == "seed" else args.deadline
        target = Hymt(url)
        planned: list[tuple[str, Callable[..., dict]]] = []  # each scenario's run, its own arguments bound
        if "clients" in scenarios:
            planned += [("clients", lambda c=c, k=k: run_clients(target, c, k, deadline)) for c, k in CLIENTS]
            if engine == "seed":
                planned.append(("document", lambda: _sequential_document(url, args.seed_deadline, args)))
        if engine == "hymt" and "document" in scenarios:
            planned.append(("document", lambda: mixed.document(url, args.document_segments, args.document_deadline)))
        if engine == "hymt" and "mixed" in scenarios:
            planned.append(("mixed", lambda: mixed.hymt_mixed(url, mixed.settings(args))))
        for name, scenario in planned:
            if name != "clients" and due is not None and not due(f"hymt {card:g} GB {name}"):
                continue
            with Watcher(url, process.pid) as watcher:
                record = {**base, **scenario()}
            peak = max(peak, watcher.peak_gb)
            records.append(
                {
                    **record,
                    "peak_reserved_gb": round(peak, 2),
                    "max_in_flight": watcher.max_in_flight,
                    "oom_events": int(metric(url, "hymt_oom_recoveries")),
                }
            )
    except Exception as exc:  # noqa: BLE001 - a server that fails is a result too
        records.append({**base, "scenario": "clients", "error": f"{type(exc).__name__}: {exc}"[:400]})
    finally:
        stop(process)
    if engine == "hymt" and args.document:
        records.append({**base, **_document(model_dir, card, args, log)})
    return records


def _sequential_document(url: str, deadline_s: float, args) -> dict:
    """The seed-style server has no document path: the document's lines one request at a time, until the deadline."""
    lines = document_lines(args.document_segments)
    tokens_before = metric(url, "hymt_tokens_out")
    started = time.perf_counter()
    done = 0
    with httpx.Client() as session:
        for line in lines:
            remaining = started + deadline_s - time.perf_counter()
            if remaining <= 0:
                break
            try:
                session.post(f"{url}/translate", json={"q": line, "source": "en", "target": "de"}, timeout=remaining)
            except httpx.TimeoutException:
                break
            done += 1
    elapsed = time.perf_counter() - started
    tokens = metric(url, "hymt_tokens_out") - tokens_before
    return {
        "scenario": "document",
        "clients": 1,
        "requests": len(lines),
        "completed": done,
        "seconds": round(elapsed, 2),
        "tokens_out": int(tokens),
        "tok_s": round(tokens / elapsed, 1),
        "p50_s": None,
        "p95_s": None,
    }


def _document(model_dir: Path, card: float, args, log) -> dict:
    """`hymt translate FILE --stats` on a 2,000-line document."""
    path = Path(tempfile.mkdtemp()) / "document.txt"
    path.write_text("\n".join(document_lines(args.document_segments)) + "\n", encoding="utf-8")
    env = _engine_env(card, args.new_tokens)
    env["PYTHONPATH"] = _pythonpath()
    cmd = random_weights.command(
        model_dir, "hymt", "translate", str(path), "--model", str(model_dir), "--from", "en", "--to", "de", "--stats"
    )
    head = {"scenario": "document", "via": "hymt translate", "clients": 1}
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.document_timeout)
    except subprocess.TimeoutExpired:
        return {**head, "error": f"timed out after {args.document_timeout} s"}
    log.write(proc.stderr[-4000:])
    stats = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines() if line.startswith('{"stats"')]
    if proc.returncode != 0 or not stats:
        return {**head, "error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    result = json.loads(stats[-1])["stats"]
    return {
        **head,
        "requests": args.document_segments,
        "completed": result["segments_done"],
        "seconds": result["seconds"],
        "tokens_out": result["tokens_out"],
        "tok_s": round(result["tokens_out"] / result["seconds"], 1),
        "p50_s": None,
        "p95_s": None,
        "startup_s": result["startup_s"],
        "peak_reserved_gb": result["peak_reserved_gb"],
        "oom_events": result["oom_events"],
        "max_in_flight": result.get("max_in_flight"),
        "profile": result.get("profile"),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def single_stream(model_dir: Path, card: float, args, log, family: Family | None = None, profile: str = "auto") -> dict:
    """hymt's engine in-process, one segment decoding (bench/profile_step.py, which profiles the step too); of the
    run's model, or of `family`'s beside it; on the card's own profile ("auto") or the one given."""
    key = family.key if family is not None else args.family
    name = ("" if key == args.family else f"{key}-") + f"{card:g}gb" + ("" if profile == "auto" else f"-{profile}")
    out = args.out.parent / f"profile-{name}.json"
    env = {**os.environ, "PYTHONPATH": _pythonpath(), "TOKENIZERS_PARALLELISM": "false"}
    head = {
        "run": args.run,
        "family": key,
        "engine": "hymt",
        "scenario": "single_stream",
        "card_gb": card,
        "clients": 1,
    }
    try:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "profile_step.py"),
                "--model-dir",
                str(model_dir),
                "--card",
                str(card),
                "--profile",
                profile,
                "--out",
                str(out),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=args.startup_timeout + 120,  # its start-up as a server's, then a minute of decoding
        )
        result = json.loads(out.read_text())
    except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
        return {**head, "error": f"{type(exc).__name__}: {exc}"[:300]}
    if proc.returncode != 0:
        return {**head, "error": f"exit {proc.returncode}"}
    # tok_s: decoding alone, as llama-bench's tg128 counts; job_tok_s: a whole job, its prefill included.
    greedy, official = result["job"]["greedy"], result["job"]["official"]
    return {
        **head,
        "profile": result["profile"],
        "tok_s": greedy["decode_tok_s"],
        "job_tok_s": greedy["tok_s"],
        "tok_s_official_sampling": official["decode_tok_s"],
        "graph_replay_ms": result.get("graph_replay_ms"),
        "p50_s": None,
        "p95_s": None,
        "oom_events": 0,
    }
