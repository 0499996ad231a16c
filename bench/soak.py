"""Soak: `hymt serve` at a steady load for N minutes, watched for growth.

A few clients send sentences to /translate one after another (each waits for its answer, then sends the next), so
the load stays steady; a sampler reads the server process's resident memory, open file descriptors, threads and
GPU memory (NVML, CUDA context included) every few seconds. Each window records the requests answered, the errors
(non-200 answers and failed connections, by kind) and the latency percentiles. Writes soak.json and soak.png.

Memory and descriptors should stay flat after the warm-up: `summary` compares the median of the first minute after
the warm-up with the median of the last minute.

    python bench/soak.py --model /tmp/hymt-7b --minutes 10 --clients 16 --env HYMT_GPU_MEMORY_GB=24 \
        --env HYMT_MAX_NEW_TOKENS=64 --env HYMT_COMPILE_CACHE_DIR=/tmp/hymt-compile --out bench/results/soak-gpu
    python bench/soak.py --test-model --minutes 1 --clients 4 --out /tmp/soak   # CPU, the tiny test model
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
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))  # the package measured is this checkout's
from load import SENTENCES, percentile, stop, wait_healthy  # the benchmark's own sentences and percentiles
from serving import _pythonpath, hymt_serve

MIB = 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="soak", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--model", help="checkpoint directory (e.g. /tmp/hymt-7b from bench/run.py build)")
    where.add_argument("--test-model", action="store_true", help="make and serve the tiny random-weight model (CPU)")
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--warmup-minutes", type=float, default=1.0, help="excluded from the growth figures")
    parser.add_argument("--sample-s", type=float, default=5.0, help="seconds between memory samples")
    parser.add_argument("--window-s", type=float, default=30.0, help="seconds per latency and error window")
    parser.add_argument("--port", type=int, default=18300)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra server settings, e.g. --env HYMT_GPU_MEMORY_GB=24",
    )
    args = parser.parse_args(argv)
    if args.minutes <= args.warmup_minutes + 1 / 60 or args.clients < 1:
        parser.error("--minutes must exceed --warmup-minutes, and --clients be at least 1")
    args.out.mkdir(parents=True, exist_ok=True)

    model = args.model or _test_model()
    env = {
        **os.environ,
        "HYMT_LOG_LEVEL": "warning",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": _pythonpath(),
        **dict(item.split("=", 1) for item in args.env),
    }
    if args.test_model:
        env.setdefault("HYMT_PROFILE", "cpu")
        env.setdefault("HYMT_MAX_NEW_TOKENS", "32")
    url = f"http://127.0.0.1:{args.port}"
    log = open(args.out / "server.log", "w")
    process = subprocess.Popen(hymt_serve(model, args.port), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        health = wait_healthy(url, process, timeout=900)
        record = soak(url, process.pid, args)
    finally:
        code = stop(process, timeout=60)
        log.close()
    record["config"] = {
        "model": str(model),
        "profile": health.get("profile"),
        "gpu": health.get("gpu"),
        "minutes": args.minutes,
        "clients": args.clients,
        "warmup_minutes": args.warmup_minutes,
        "sample_s": args.sample_s,
        "window_s": args.window_s,
        "env": {k: v for k, v in env.items() if k.startswith("HYMT_")},
        "exit_code": code,
    }
    (args.out / "soak.json").write_text(json.dumps(record, indent=1) + "\n")
    plot(record, args.out / "soak.png")
    print(json.dumps(record["summary"], indent=1))
    return 0


def _test_model() -> Path:
    from hymt.testmodel import make_test_model

    path = Path("/tmp/hymt-soak-test-model")
    return path if (path / "config.json").is_file() else make_test_model(path)


def soak(url: str, pid: int, args) -> dict:
    started = time.monotonic()
    until = started + args.minutes * 60
    results: list[tuple[float, float, str]] = []  # (seconds since start, latency, "200" or the error's kind)
    lock = threading.Lock()

    def client(n: int) -> None:
        with httpx.Client(timeout=120) as http:
            i = n
            while time.monotonic() < until:
                text, source, target = SENTENCES[i % len(SENTENCES)]
                i += args.clients
                sent = time.monotonic()
                try:
                    response = http.post(f"{url}/translate", json={"q": text, "source": source, "target": target})
                    outcome = str(response.status_code)
                except httpx.HTTPError as exc:
                    outcome = type(exc).__name__
                with lock:
                    results.append((sent - started, time.monotonic() - sent, outcome))

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(args.clients)]
    for thread in threads:
        thread.start()
    samples = []
    process = psutil.Process(pid)
    while time.monotonic() < until:
        samples.append(_sample(process, url, time.monotonic() - started))
        time.sleep(min(args.sample_s, max(0.0, until - time.monotonic())))
    for thread in threads:
        thread.join(timeout=130)
    samples.append(_sample(process, url, time.monotonic() - started))
    windows = _windows(results, args.window_s, args.minutes * 60)
    return {"samples": samples, "windows": windows, "summary": _summary(samples, windows, results, args)}


def _sample(process: psutil.Process, url: str, at: float) -> dict:
    from hymt.planner.gpu import process_gpu_memory_bytes

    with process.oneshot():
        rss, fds, threads = process.memory_info().rss, process.num_fds(), process.num_threads()
    gpu = process_gpu_memory_bytes(process.pid)
    return {
        "t_s": round(at, 1),
        "rss_mib": round(rss / MIB, 1),
        "open_fds": fds,
        "threads": threads,
        "gpu_mib": round(gpu / MIB, 1) if gpu is not None else None,
    }


def _windows(results: list[tuple[float, float, str]], window_s: float, total_s: float) -> list[dict]:
    windows = []
    for n in range(int(total_s // window_s) + 1):
        start = n * window_s
        inside = [r for r in results if start <= r[0] < start + window_s]
        if not inside:
            continue
        ok = sorted(latency for _, latency, outcome in inside if outcome == "200")
        errors: dict[str, int] = {}
        for _, _, outcome in inside:
            if outcome != "200":
                errors[outcome] = errors.get(outcome, 0) + 1
        windows.append(
            {
                "t_s": start,
                "requests": len(inside),
                "ok": len(ok),
                "errors": errors,
                **{f"p{q}_s": round(percentile(ok, q / 100), 3) if ok else None for q in (50, 95, 99)},
            }
        )
    return windows


def _summary(samples: list[dict], windows: list[dict], results: list, args) -> dict:
    warm = args.warmup_minutes * 60
    first = [s for s in samples if warm <= s["t_s"] < warm + 60]
    last = [s for s in samples if s["t_s"] >= args.minutes * 60 - 60]

    def growth(key: str):
        a, b = [s[key] for s in first if s[key] is not None], [s[key] for s in last if s[key] is not None]
        if not a or not b:
            return None
        return {
            "after_warmup": statistics.median(a),
            "last_minute": statistics.median(b),
            "growth": round(statistics.median(b) - statistics.median(a), 1),
            "max": max(s[key] for s in samples if s[key] is not None),
        }

    ok = sorted(latency for _, latency, outcome in results if outcome == "200")
    return {
        "requests": len(results),
        "ok": len(ok),
        "errors": len(results) - len(ok),
        "requests_per_s": round(len(results) / (args.minutes * 60), 2),
        **{f"p{q}_s": round(percentile(ok, q / 100), 3) if ok else None for q in (50, 95, 99)},
        "rss_mib": growth("rss_mib"),
        "open_fds": growth("open_fds"),
        "threads": growth("threads"),
        "gpu_mib": growth("gpu_mib"),
    }


def plot(record: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples, windows, config = record["samples"], record["windows"], record["config"]
    minutes = [s["t_s"] / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    axes[0].plot(minutes, [s["rss_mib"] for s in samples], label="RSS")
    if any(s["gpu_mib"] for s in samples):
        axes[0].plot(minutes, [s["gpu_mib"] for s in samples], label="GPU (NVML)")
    axes[0].set_ylabel("MiB")
    axes[0].legend(loc="lower right")
    axes[1].plot(minutes, [s["open_fds"] for s in samples], label="open fds")
    axes[1].plot(minutes, [s["threads"] for s in samples], label="threads")
    axes[1].set_ylabel("count")
    axes[1].legend(loc="lower right")
    wm = [w["t_s"] / 60 for w in windows]
    for q in (50, 95, 99):
        axes[2].plot(wm, [w[f"p{q}_s"] for w in windows], marker=".", label=f"p{q}")
    axes[2].set_ylabel("latency s")
    axes[2].legend(loc="upper right")
    width = 0.8 * config["window_s"] / 60
    axes[3].bar(wm, [w["ok"] for w in windows], width=width, align="edge", label="200")
    axes[3].bar(
        wm,
        [sum(w["errors"].values()) for w in windows],
        width=width,
        align="edge",
        bottom=[w["ok"] for w in windows],
        color="tab:red",
        label="errors",
    )
    axes[3].set_ylabel("requests / window")
    axes[3].set_xlabel("minutes")
    axes[3].legend(loc="lower right")
    fig.suptitle(f"soak: {config['profile']} profile, {config['clients']} clients, {config['minutes']:g} min")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
