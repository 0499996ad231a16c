"""What quality "best" costs, per simulated card: the translation model and the fusion model (Chimera) in one
server, the same sentences translated plainly and at quality "best", one client and four at once, with the peak
GPU memory of the server process.

    python3 bench/run.py build --model-dir /tmp/hymt-7b      # once: the 7B architecture with random weights
    python3 bench/quality.py --model-dir /tmp/hymt-7b --cards 8,12,16,24 --out bench/results/quality/quality.json

The random-weight checkpoint stands in for Chimera too (the same architecture: HYMT_FUSION_MODEL points at it).
Random weights never stop on their own, so every candidate and every fused translation runs to its output budget
(HYMT_MAX_NEW_TOKENS, 64 by default): the figures are an upper bound for sentences of that length. On a card where
the planner has no room for both models the record says so (the mode is refused) and only plain figures are taken.
`--cpu` runs it on the CPU (with a tiny `hymt make-test-model` checkpoint: a check that the command works).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from load import SENTENCES, Watcher, stop, wait_healthy  # noqa: E402  # noqa: E402
from serving import _engine_env, _pythonpath, hymt_serve  # noqa: E402


def _env(args, card: float | None) -> dict:
    return {
        **_engine_env(card, args.new_tokens),
        "HYMT_FUSION_MODEL": str(args.fusion_dir),
        "PYTHONPATH": _pythonpath(),
    }


def _wait(url: str, process: subprocess.Popen, timeout: float) -> dict:
    """The server healthy, and the fusion model loaded (or refused: then /health says why)."""
    health = wait_healthy(url, process, timeout)
    while health.get("phase") != "ready" or not _settled(health.get("quality") or {}):
        time.sleep(0.5)
        health = httpx.get(f"{url}/health", timeout=10).json()
    return health


def _settled(quality: dict) -> bool:
    return bool(quality.get("best")) or quality.get("placement") in ("refused", "off")


def _latencies(url: str, quality: str, clients: int, per_client: int) -> dict:
    """`clients` threads each translating `per_client` sentences one after another at this quality."""
    seconds: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def client(number: int) -> None:
        with httpx.Client(timeout=600) as session:
            for k in range(per_client):
                text, source, target = SENTENCES[(number * per_client + k) % len(SENTENCES)]
                started = time.perf_counter()
                response = session.post(
                    f"{url}/translate", json={"q": text, "source": source, "target": target, "quality": quality}
                )
                with lock:
                    if response.status_code == 200:
                        seconds.append(time.perf_counter() - started)
                    else:
                        errors.append(f"{response.status_code} {response.text[:200]}")

    began = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    record = {
        "quality": quality,
        "clients": clients,
        "requests": clients * per_client,
        "completed": len(seconds),
        "wall_s": round(time.perf_counter() - began, 2),
        "errors": errors[:3],
    }
    if seconds:
        record.update(p50_s=round(statistics.median(seconds), 2), max_s=round(max(seconds), 2))
    return record


def run_card(args, card: float | None, log) -> dict:
    port = 8300 + int(os.environ.get("CUDA_VISIBLE_DEVICES", "0") or 0)
    url = f"http://127.0.0.1:{port}"
    record: dict = {"card_gb": card}
    started = time.perf_counter()
    process = subprocess.Popen(
        hymt_serve(args.model_dir, port), env=_env(args, card), stdout=log, stderr=subprocess.STDOUT
    )
    try:
        with Watcher(url, process.pid) as watcher:
            health = _wait(url, process, args.startup_timeout)
        quality = health["quality"]
        record.update(
            startup_s=round(time.perf_counter() - started, 1),
            profile=health["profile"],
            kv_cache_tokens=health["kv_cache_tokens"],
            fusion=quality,
            startup_peak_gb=round(watcher.peak_gb, 2),
        )
        runs = []
        for mode in ("standard", "best") if quality["best"] else ("standard",):
            for clients, per_client in ((1, args.requests), (4, args.requests)):
                with Watcher(url, process.pid) as watcher:
                    run = _latencies(url, mode, clients, per_client)
                runs.append({**run, "peak_gb": round(watcher.peak_gb, 2)})
        record["runs"] = runs
        plain = {r["clients"]: r for r in runs if r["quality"] == "standard"}
        for run in runs:
            if run["quality"] == "best" and run.get("p50_s") and plain[run["clients"]].get("p50_s"):
                run["p50_vs_standard"] = round(run["p50_s"] / plain[run["clients"]]["p50_s"], 1)
    except Exception as exc:  # noqa: BLE001 - a card that fails is a result too
        record["error"] = f"{type(exc).__name__}: {exc}"[:400]
    finally:
        stop(process)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/hymt-7b"))
    parser.add_argument("--fusion-dir", type=Path, help="Chimera's checkpoint (default: the model dir itself)")
    parser.add_argument("--cards", default="8,12,16,24", help="simulated cards in GiB, comma-separated")
    parser.add_argument("--cpu", action="store_true", help="on the CPU instead (a short check of the command)")
    parser.add_argument("--requests", type=int, default=4, help="sentences per client")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--startup-timeout", type=float, default=600)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "quality" / "quality.json")
    args = parser.parse_args()
    args.fusion_dir = args.fusion_dir or args.model_dir
    args.out.parent.mkdir(parents=True, exist_ok=True)
    cards = [None] if args.cpu else [float(c) for c in args.cards.split(",")]
    records = []
    with open(args.out.with_suffix(".log"), "w") as log:
        for card in cards:
            record = run_card(args, card, log)
            print(json.dumps(record), flush=True)
            records.append(record)
    args.out.write_text(json.dumps(records, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
