"""GPU benchmark: hymt beside llama.cpp (the single-user anchor, what Ollama runs) and a seed-style server, as users
reach them, on simulated cards: 8, 12, 16 and 24 GB for the 7B, 4, 6 and 8 GB for the 1.8B, 24 and 80 GB for the
30B-A3B (`--family`).

    python bench/run.py standard --out bench/results/standard.json   # the whole standard run: one H200, < 10 min
    python bench/report.py bench/results                              # table.md and chart.png from its records
    python bench/run.py standard --family hy-mt2-1.8b --out bench/results/small/standard.json   # the 1.8B's

    python bench/run.py build --model-dir /tmp/hymt-7b       # the real 7B architecture, random weights, on disk
    python bench/run.py build --family hy-mt2-1.8b           # the real 1.8B architecture, in /tmp/hymt-1.8b
    python bench/run.py build --family hy-mt2-30b-a3b        # the 30B-A3B's config alone, weights generated where
                                                             # read (bench/random_weights.py), in /tmp/hymt-30b-a3b
    python bench/run.py serve --cards 8,12,16,24 --engines hymt,seed --out bench/results/serve.json [--document]
    python bench/run.py llama --out bench/results/llama.json  # llama.cpp alone (bench/llama.py)
    python bench/run.py check --card 24 --identity --out bench/results/check.json

Every record has one shape: card_gb, engine (hymt, llama.cpp, seed-style), profile (or the GGUF type), scenario
(clients, document, mixed, single_stream), clients, tok_s, p50_s, p95_s, peak_reserved_gb, oom_events, startup_s,
the family (hunyuan-mt-7b, hy-mt2-1.8b or hy-mt2-30b-a3b) and the run id that all records of one run share. Scenarios:
- clients: 1, 16 and 64 concurrent HTTP clients, each sending realistic sentences one after another
  (`/translate` with `source: auto` for hymt, its official prompt through `/v1/chat/completions` for llama-server),
  with a deadline; tokens counted by the server;
- single_stream: one segment decoding in-process (`bench/profile_step.py` for hymt, `llama-bench` tg128);
- document: a 2,000-line document as a job (`/api/jobs`) on an idle hymt server, in the standard run (`via`
  "/api/jobs"); or through `hymt translate` (`serve --document`, `via` "hymt translate");
- mixed: 4 such documents beside 16 interactive clients (bench/mixed.py), hymt and llama-server.
Random weights never stop on their own, so every answer runs to its budget (HYMT_MAX_NEW_TOKENS, 64).
`check` runs the engine in-process: greedy tokens and logits against transformers on the same weights, and
decoding speed by batch size.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(ROOT / "bench"))

import llama  # noqa: E402
from check import check  # noqa: E402
from checkpoints import build  # noqa: E402
from hymt.family import HUNYUAN_MT_7B  # noqa: E402
from serving import CLIENTS, serve_engine  # noqa: E402
from standard import SCENARIOS, STANDARDS, Standard, environment, standard  # noqa: E402


def llama_cpp(args, chosen: Standard) -> list[dict]:
    """llama.cpp on the same checkpoint: llama-bench's single stream and llama-server under the same load, for
    each GGUF type, recorded for the cards it stands for."""
    base = {"run": args.run, "family": args.family}
    with open(args.out.with_suffix(".llama.log"), "w") as log:
        prepared = llama.prepare(
            args.llama_pack,
            args.model_dir,
            Path(args.llama_work),
            log,
            [],
            tuple(chosen.llama_types),
            chosen.llama_source,
        )
        records = [{**base, "engine": "llama.cpp", "scenario": "prepare", **prepared}]
        for kind, cards in chosen.llama_types.items():
            gguf, bin_dir = Path(prepared["ggufs"][kind]), Path(prepared["bin"])
            records += llama.single_stream(bin_dir, gguf, kind, cards, base)
            records += llama.serve(
                bin_dir, gguf, kind, cards, chosen.family, CLIENTS, args.new_tokens, args.deadline, base, log
            )
    return records


def _cards(text: str) -> tuple[float, ...]:
    return tuple(float(c) for c in text.split(","))


def _scenarios(text: str) -> tuple[str, ...]:
    names = tuple(n for n in text.split(",") if n)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"{','.join(unknown) or text!r}: not among {','.join(SCENARIOS)}")
    return names


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with the family's model directory and cards where none are given."""
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["build", "check", "serve", "llama", "standard"])
    parser.add_argument("--family", choices=list(STANDARDS), default=HUNYUAN_MT_7B.key, help="which model's size")
    parser.add_argument("--model-dir", type=Path, help="default: the family's (/tmp/hymt-7b, ...)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "serve.json")
    parser.add_argument("--cards", type=_cards, help="default: the family's (12,24,8,16 for the 7B; 4,6,8; 24,80)")
    parser.add_argument("--card", type=float, default=24)
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--identity", action="store_true")
    parser.add_argument("--rows", type=_cards, default=(), help="check: the batch sizes timed (default 1,16,64)")
    parser.add_argument("--engines", help="serve: hymt,seed (the default); standard: hymt,llama.cpp (the default)")
    parser.add_argument(
        "--scenarios",
        type=_scenarios,
        default=SCENARIOS,
        help=f"standard: which of {','.join(SCENARIOS)} (default all); llama.cpp is converted only if needed",
    )
    parser.add_argument("--document", action="store_true", help="also the 2,000-segment document (hymt)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--document-segments", type=int, default=2000)
    parser.add_argument("--deadline", type=float, default=120, help="seconds per clients scenario")
    parser.add_argument("--seed-deadline", type=float, default=40, help="the same for the seed-style server")
    parser.add_argument(
        "--llama-pack",
        type=Path,
        default=ROOT / ".llama",
        help="llama.cpp's binaries and converter (see bench/llama.py)",
    )
    parser.add_argument("--llama-work", default="/tmp/llama", help="where they are unpacked and the GGUFs written")
    parser.add_argument(
        "--run",
        default=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        help="the run id every record of one run shares",
    )
    parser.add_argument("--budget-s", type=float, default=540, help="standard: no phase starts after this")
    parser.add_argument("--startup-timeout", type=float, default=420)
    parser.add_argument("--document-timeout", type=float, default=420, help="serve --document: hymt translate's")
    parser.add_argument("--document-deadline", type=float, default=60, help="standard: the document job's seconds")
    parser.add_argument("--mixed-window", type=float, default=40, help="mixed: seconds of interactive clients")
    parser.add_argument("--mixed-alone", type=float, default=20, help="mixed: seconds of the documents alone")
    args = parser.parse_args(argv)
    chosen = STANDARDS[args.family]
    args.model_dir = args.model_dir or chosen.model_dir
    args.cards = args.cards or chosen.cards
    args.engines = args.engines or ("hymt,llama.cpp" if args.command == "standard" else "hymt,seed")
    return args


def main() -> int:
    args = arguments()
    chosen = STANDARDS[args.family]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.command == "build":
        print(json.dumps(build(args.model_dir, chosen.family)), flush=True)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.command == "check":
        result = {
            "environment": environment(),
            "family": args.family,
            **check(args.model_dir, args.card, args.profile, args.identity, tuple(int(r) for r in args.rows)),
        }
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result), flush=True)
        return 0
    if args.command == "standard":
        standard(args, chosen)
        return 0
    if args.command == "llama":
        records = llama_cpp(args, chosen)
        args.out.write_text(
            json.dumps({"environment": environment(), "new_tokens": args.new_tokens, "records": records}, indent=2)
            + "\n"
        )
        for record in records:
            print(json.dumps(record), flush=True)
        return 0
    results = {"environment": environment(), "new_tokens": args.new_tokens, "records": []}
    with open(args.out.with_suffix(".log"), "w") as log:
        for card in args.cards:
            for engine in args.engines.split(","):
                for record in serve_engine(engine, args.model_dir, card, args, log):
                    results["records"].append(record)
                    args.out.write_text(json.dumps(results, indent=2) + "\n")
                    print(json.dumps(record), flush=True)
                log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
