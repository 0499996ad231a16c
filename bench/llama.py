"""llama.cpp beside hymt, on the same random weights: its `llama-server` under the same HTTP load, and
`llama-bench`'s single stream beside the engine's own.

The binaries (built for sm_90 on the GPU machine) and the converter come from `../shared/anchors/llama-cpp/`,
copied into the folder named by `--llama-pack` (`bench/carry.sh` does it; the folder travels to the GPU machine):
`llama-bin-sm90.tar.xz.part*`, `llama-convert.tar.xz` (convert_hf_to_gguf.py, conversion/, gguf-py/) and
`to_gguf.py`. The checkpoint is converted to BF16 and quantized to Q4_K_M; the 30B-A3B's, from its generated
weights (bench/random_weights.py), to Q8_0, quantized to Q4_K_M and deleted (a BF16 GGUF, 60 GB, would not fit the
GPU machine's disk). Which cards each type stands for is the caller's (bench/standard.py: for the 7B, Q4_K_M, the
type a person with an 8-16 GB card runs, and BF16 for 24 GB; for the 1.8B, Q4_K_M for 4 GB and BF16 for 6 and 8 GB;
for the 30B-A3B, Q4_K_M for 24 GB).

Fair settings for the same work as hymt's: 64 slots of 512 tokens (`-np 64 -c 32768`), flash attention, every
layer on the GPU, the official sampling, `max_tokens` as hymt's output budget with `ignore_eos` (random weights
never stop). On a real 8 GB card the 7B's Q4_K_M (4.9 GB of weights) fits, but 64 slots' 4 GB of f16 KV do not: its
64-client figure stands for the 12 and 16 GB cards, and flatters it on 8 GB. The 1.8B's 64 slots hold 2 GiB, about
what is left beside its weights on the 4 and 6 GB cards: the records' peak GPU memory says. The 30B-A3B's 64 slots
hold 3 GiB (96 KiB a token) beside its Q4_K_M's 18 GB: about a 24 GB card. The mixed scenario
(bench/mixed.py) runs in llama-server's session after the clients: 4 documents over 12 connections each beside 16
interactive clients, its 64 slots.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import random_weights
from load import OpenAIChat, Watcher, run_clients, stop, wait_healthy
from mixed import llama_mixed

if TYPE_CHECKING:
    from hymt.family import Family
    from mixed import Mixed


def prepare(
    pack: Path,
    model_dir: Path,
    work: Path,
    log,
    cpus: list[int],
    types: tuple[str, ...] = ("BF16", "Q4_K_M"),
    source: str = "BF16",
) -> dict:
    """Unpack the binaries and the converter into `work`, convert the checkpoint to `source` and quantize that to the
    other `types` (CPU work: minutes), on `cpus` alone when given; `source` is deleted once quantized unless it is
    one of `types` (the 30B-A3B's Q8_0: 32 GB of the GPU machine's 64 GiB disk). A checkpoint whose weights are
    generated where read is converted from them (bench/random_weights.py). Returns the GGUF paths by type and the
    seconds each part took."""
    pin = ["taskset", "-c", ",".join(map(str, cpus))] if cpus else []
    bin_dir, src = work / "bin", work / "src"
    bin_dir.mkdir(parents=True, exist_ok=True)
    src.mkdir(exist_ok=True)
    times = {}
    started = time.perf_counter()
    parts = sorted(pack.glob("llama-bin-sm90.tar.xz.part*"))
    subprocess.run(f"cat {' '.join(map(str, parts))} | xz -d | tar x -C {bin_dir}", shell=True, check=True)
    with tarfile.open(pack / "llama-convert.tar.xz") as archive:
        archive.extractall(src, filter="data")
    times["unpack_s"] = round(time.perf_counter() - started, 1)
    ggufs = {kind: work / f"model-{kind.lower()}.gguf" for kind in dict.fromkeys((source, *types))}
    try:
        started = time.perf_counter()
        subprocess.run(
            pin
            + random_weights.command(
                model_dir, "gguf", *map(str, (pack / "to_gguf.py", src, model_dir, ggufs[source])), source.lower()
            ),
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        times["convert_s"] = round(time.perf_counter() - started, 1)
        started = time.perf_counter()
        for kind in types:
            if kind == source:
                continue
            subprocess.run(
                pin
                + [str(bin_dir / "llama-quantize")]
                # A quantized source is rounded twice, which llama-quantize does only when told; random weights lose
                # nothing that matters by it.
                + (["--allow-requantize"] if source not in ("BF16", "F16", "F32") else [])
                + [str(ggufs[source]), str(ggufs[kind]), kind, str(len(cpus) or os.cpu_count() or 8)],
                check=True,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(bin_dir),
            )
        times["quantize_s"] = round(time.perf_counter() - started, 1)
    except BaseException:
        # A failed conversion leaves no GGUF behind: the 30B-A3B's would keep the next build off the disk.
        for gguf in ggufs.values():
            gguf.unlink(missing_ok=True)
        raise
    if source not in types:
        ggufs.pop(source).unlink()
    return {"bin": str(bin_dir), "ggufs": {k: str(v) for k, v in ggufs.items()}, **times}


def _env(bin_dir: Path) -> dict:
    return {
        **os.environ,
        "LD_LIBRARY_PATH": os.pathsep.join(p for p in (str(bin_dir), os.environ.get("LD_LIBRARY_PATH", "")) if p),
    }


def single_stream(bin_dir: Path, gguf: Path, kind: str, cards: tuple[float, ...], base: dict) -> list[dict]:
    """`llama-bench` tg128 (and pp64): decoding tok/s of one stream in-process, one record per card it stands for."""
    proc = subprocess.run(
        [
            str(bin_dir / "llama-bench"),
            "-m",
            str(gguf),
            "-ngl",
            "99",
            "-fa",
            "1",
            "-p",
            "64",
            "-n",
            "128",
            "-r",
            "3",
            "-o",
            "jsonl",
        ],
        capture_output=True,
        text=True,
        env=_env(bin_dir),
        timeout=300,
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    gen = next((r for r in rows if r.get("n_gen") == 128), None)
    prompt = next((r for r in rows if r.get("n_prompt") == 64 and not r.get("n_gen")), None)
    if gen is None:
        return [
            {
                **base,
                "engine": "llama.cpp",
                "profile": kind,
                "scenario": "single_stream",
                "card_gb": card,
                "error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300],
            }
            for card in cards
        ]
    return [
        {
            **base,
            "engine": "llama.cpp",
            "profile": kind,
            "scenario": "single_stream",
            "card_gb": card,
            "clients": 1,
            "tok_s": round(gen["avg_ts"], 1),
            "prefill_tok_s": round(prompt["avg_ts"], 1) if prompt else None,
            "p50_s": None,
            "p95_s": None,
            "oom_events": 0,
        }
        for card in cards
    ]


def serve(
    bin_dir: Path,
    gguf: Path,
    kind: str,
    cards: tuple[float, ...],
    family: Family,
    clients: tuple,
    new_tokens: int,
    deadline: float,
    base: dict,
    log,
    port: int = 8001,
    mixed: Mixed | None = None,
    mixed_cards: tuple[float, ...] = (),
) -> list[dict]:
    """`llama-server` under `clients` (1, 16 and 64 HTTP clients), each sentence in the family's official prompt;
    each record once per card the GGUF type stands for. Then, with `mixed`, the mixed scenario in the same
    session (bench/mixed.py), recorded once per card of `mixed_cards`."""
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [
            str(bin_dir / "llama-server"),
            "-m",
            str(gguf),
            "-ngl",
            "99",
            "-fa",
            "on",
            "-np",
            "64",
            "-c",
            "32768",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=_env(bin_dir),
    )
    records, teams = [], []
    head = {**base, "engine": "llama.cpp", "profile": kind}
    try:
        with Watcher(url, process.pid) as watcher:
            wait_healthy(url, process, 180)
        head["startup_s"] = round(time.perf_counter() - started, 1)
        peak = watcher.peak_gb
        target = OpenAIChat(url, new_tokens, family)
        for count, per_client in clients:
            with Watcher(url, process.pid) as watcher:
                record = run_clients(target, count, per_client, deadline)
            peak = max(peak, watcher.peak_gb)
            records.append({**head, **record, "peak_reserved_gb": round(peak, 2), "oom_events": 0})
        if mixed is not None and mixed_cards:
            with Watcher(url, process.pid) as watcher:
                record = llama_mixed(url, family, new_tokens, mixed)
            peak = max(peak, watcher.peak_gb)
            teams.append({**head, **record, "peak_reserved_gb": round(peak, 2), "oom_events": 0})
    except Exception as exc:  # noqa: BLE001 - a server that fails is a result too
        failed = {**head, "scenario": "clients" if clients else "mixed", "error": f"{type(exc).__name__}: {exc}"[:400]}
        (records if clients else teams).append(failed)
    finally:
        stop(process, 20)
    return [{**r, "card_gb": card} for r in records for card in cards] + [
        {**r, "card_gb": card} for r in teams for card in mixed_cards
    ]
