"""Where one decoding step's time goes, one segment in flight: the step as the engine runs it (wall time per token,
end to end: a job of at least N tokens, its prompt's prefill and text work included; and decoding alone, the
runner's decoding steps over their wall time, which is what `llama-bench`'s tg128 measures) against the captured
step replayed back to back (the GPU's own time), and torch.profiler's view of the engine thread meanwhile (host ops
by self time, GPU kernels by total time).

    python bench/profile_step.py --model-dir /tmp/hymt-7b --card 24 --out bench/results/profile-bf16.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import random_weights  # noqa: E402
from hymt.engine import kernels  # noqa: E402
from hymt.engine.sampling_params import Sampling  # noqa: E402
from hymt.languages import resolve  # noqa: E402
from hymt.planner.decide import decision_for  # noqa: E402
from hymt.settings import Settings  # noqa: E402
from hymt.translation.translator import start  # noqa: E402

TEXT = "Please keep your luggage with you at all times while inside the terminal building."


def table(prof, key: str, limit: int = 40) -> list[dict]:
    rows = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)[:limit]
    return [
        {
            "name": e.key[:90],
            "calls": e.count,
            "self_cpu_us": round(e.self_cpu_time_total, 1),
            "device_us": round(getattr(e, "self_device_time_total", 0.0), 1),
        }
        for e in rows
    ]


def timed(translator, sampling: Sampling, tokens: int) -> dict:
    """One job of at least `tokens` output tokens (random weights stop only at the segment's output cap): its
    rate end to end, and the rate of its decoding steps alone (from the runner's own count and wall time)."""
    stats = translator.engine.runner.stats
    steps, step_s = stats.steps["decode"], stats.step_s["decode"]
    started = time.perf_counter()
    job = translator.submit([(TEXT, resolve("en"))], resolve("de"), sampling, min_new_tokens=tokens)
    job.wait(120)
    seconds = time.perf_counter() - started
    decode_steps, decode_s = stats.steps["decode"] - steps, stats.step_s["decode"] - step_s
    return {
        "tokens": job.tokens_out,
        "tok_s": round(job.tokens_out / seconds, 1),
        "ms_per_token": round(seconds * 1000 / job.tokens_out, 3),
        "decode_tok_s": round(decode_steps / decode_s, 1),
        "decode_ms_per_step": round(decode_s * 1000 / decode_steps, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/hymt-7b"))
    parser.add_argument("--card", type=float, default=24)
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-pdl", action="store_true", help="kernels launched one after another, to compare")
    args = parser.parse_args()
    if args.no_pdl:
        kernels.enable_pdl = lambda device: False
    if random_weights.generated(args.model_dir):
        random_weights.install()
    settings = Settings(
        model=str(args.model_dir),
        gpu_memory_gb=args.card,
        profile=args.profile,
        max_new_tokens=args.tokens,
        compile_cache_dir="/tmp/hymt-compile",
    )
    decision = decision_for(settings)
    translator = start(settings, decision)
    engine = translator.engine
    record = {
        "card_gb": args.card,
        "profile": engine.decision.profile,
        "attention": engine.attention,
        "pdl": kernels.common.PDL,
        "matvec": {
            f"{n}x{k}": {"config": config, "us": us, "cublas_us": cublas}
            for (n, k), (config, us, cublas) in engine.runner.decoder.matvec.items()
        },
    }
    runs = {}
    for name, sampling in (("greedy", Sampling(greedy=True)), ("official", Sampling())):
        translator.submit([(TEXT, resolve("en"))], resolve("de"), sampling, min_new_tokens=args.tokens).wait(120)
        runs[name] = timed(translator, sampling, args.tokens)
    record["job"] = runs
    graph = engine.runner.graphs.get(1)
    if graph is not None:
        engine.runner._index.fill_(engine.runner.pad_row)  # replayed alone, the step decodes the padding row
        engine.runner._batch = None
        replay = graph[0].replay
        replay()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(100):
            replay()
        end.record()
        torch.cuda.synchronize()
        record["graph_replay_ms"] = round(begin.elapsed_time(end) / 100, 3)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        translator.submit([(TEXT, resolve("en"))], resolve("de"), Sampling(), min_new_tokens=32).wait(120)
    record["host_ops_by_self_cpu"] = table(prof, "self_cpu_time_total")
    record["kernels_by_device_time"] = table(prof, "self_device_time_total")
    translator.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(
        json.dumps({k: v for k, v in record.items() if k in ("profile", "job", "graph_replay_ms", "matvec")}),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
