"""What one prefill step costs on the GPU, by prompt tokens prefilled and decoding rows riding along, captured
(engine/prefill.py) and eager, beside a decoding step of the same rows (the engine's runner driven directly, once
start-up has proved the profile). Where prefill steps run eagerly the scheduler gathers newcomers into few of them
because of what this measures (docs/engine.md).

    python bench/prefill_cost.py --card 24 --out /tmp/prefill-24.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from hymt.engine.requests import Request
from hymt.engine.scheduler import Chunk
from hymt.engine.sequence import Sequence
from hymt.engine.startup import start
from hymt.planner.decide import decision_for
from hymt.settings import Settings

RIDERS = (0, 16, 64, 112)
TOKENS = (16, 64, 256, 512, 1024)  # prefilled, as prompts of 64 tokens (or one shorter)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def median_ms(fn, repeat: int = 5) -> float:
    fn()  # the first call of a shape compiles
    sync()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - started)
    return round(sorted(times)[len(times) // 2] * 1000, 2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/hymt-7b"))
    parser.add_argument("--card", type=float, default=24)
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    card = None if args.profile == "cpu" else args.card
    settings = Settings(
        model=str(args.model_dir), gpu_memory_gb=card, profile=args.profile, compile_cache_dir="/tmp/hymt-compile"
    )
    engine = start(settings, decision_for(settings))
    engine.stop()  # the runner is driven from here on, with no engine thread beside it
    runner = engine.runner
    kv = [1]

    def sequence(length: int, row: int) -> Sequence:
        seq = Sequence(
            Request(id=row, prompt_ids=[(7 * i + row) % 1000 + 10 for i in range(length)], max_new_tokens=64)
        )
        seq.row, seq.kv_start = row, kv[0]
        kv[0] += length + 64
        return seq

    def prefill(newcomers: list[Sequence], riding: list[Sequence], eager: bool = False) -> None:
        chunks = [Chunk(s, 0, len(s.prompt_ids)) for s in newcomers]
        runner.prefill(chunks + [Chunk(s, s.num_cached, 1, decoding=True) for s in riding], eager=eager)

    rows = runner.plan.max_in_flight
    results: dict = {
        "card_gb": args.card,
        "profile": engine.decision.profile,
        "prefill_captured": runner.prefill_captured,
        "prefill_ms": {},
        "prefill_eager_ms": {},
        "decode_ms": {},
    }
    for riders in [r for r in RIDERS if r + 16 <= rows] or [0]:
        kv[0] = 1
        riding = [sequence(48, r) for r in range(riders)]
        if riding:
            prefill(riding, [])
            for seq in riding:
                seq.num_cached = len(seq.prompt_ids)
                seq.output_ids.append(11)
        first_free = kv[0]
        for tokens in TOKENS:
            kv[0] = first_free
            newcomers = [sequence(min(64, tokens), riders + i) for i in range(min(max(1, tokens // 64), rows - riders))]
            for eager, key in ((False, "prefill_ms"), (True, "prefill_eager_ms")):
                ms = median_ms(lambda n=newcomers, r=riding, e=eager: prefill(n, r, e))
                results[key][f"{tokens}+{riders}"] = ms
                print(json.dumps({"tokens": tokens, "riders": riders, "eager": eager, "ms": ms}), flush=True)
        if riding:
            ms = median_ms(lambda riding=riding: runner.collect(runner.launch(riding)))
            results["decode_ms"][riders] = ms
            print(json.dumps({"decode_rows": riders, "ms": ms}), flush=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
