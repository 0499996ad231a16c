"""The standard run, one H200 and one command: hymt on each card over HTTP, then llama.cpp on the same weights,
then hymt's single streams; and the environment every result file records.

    python bench/run.py standard --out bench/results/standard.json
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from pathlib import Path

import llama
from checkpoints import build
from serving import CLIENTS, serve_engine, single_stream

# The GGUF types llama.cpp runs and the cards each stands for: a person with an 8-16 GB card runs Q4_K_M.
LLAMA_TYPES = {"Q4_K_M": (8.0, 12.0, 16.0), "BF16": (24.0,)}


def environment() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import torch
    import transformers

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "bitsandbytes": installed("bitsandbytes"),
        "torchao": installed("torchao"),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def standard(args) -> dict:
    """The standard run, one H200 and one command: hymt on the 8, 12, 16 and 24 GB cards (HTTP clients), its
    single stream on the int4 and bf16 tiers, then llama.cpp on the same weights. llama.cpp's conversion (CPU
    work, minutes) runs meanwhile on cores of its own, so that it neither waits nor slows hymt's host work. A
    phase that would start after `--budget-s` is recorded as skipped."""
    began = time.monotonic()
    results = {"environment": environment(), "new_tokens": args.new_tokens, "run": args.run, "records": []}

    def add(records: list[dict]) -> None:
        results["records"] += records
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        for record in records:
            print(json.dumps(record), flush=True)

    def due(what: str, grace: float = 0) -> bool:
        if time.monotonic() - began < args.budget_s + grace:
            return True
        add([{"run": args.run, "scenario": "skipped", "what": what, "error": "out of the run's time"}])
        return False

    if not (args.model_dir / "config.json").is_file():
        add([{"run": args.run, "scenario": "build", **build(args.model_dir)}])
    cores = sorted(os.sched_getaffinity(0))
    half = cores[len(cores) // 2 :] if len(cores) >= 8 else []
    prepared: dict = {}
    log = open(args.out.with_suffix(".log"), "w")

    def prepare() -> None:
        try:
            prepared.update(llama.prepare(args.llama_pack, args.model_dir, Path(args.llama_work), log, half))
        except Exception as exc:  # noqa: BLE001 - reported as a record
            prepared["error"] = f"{type(exc).__name__}: {exc}"[:400]

    converting = threading.Thread(target=prepare)
    converting.start()
    if half:
        os.sched_setaffinity(0, cores[: len(cores) // 2])  # hymt's servers inherit the other half
    for card in (float(c) for c in args.cards.split(",")):
        if due(f"hymt {card:g} GB"):
            add(serve_engine("hymt", args.model_dir, card, args, log))
    converting.join()
    os.sched_setaffinity(0, cores)
    add([{"run": args.run, "engine": "llama.cpp", "scenario": "prepare", **prepared}])
    if "error" not in prepared:
        for kind, cards in LLAMA_TYPES.items():  # llama.cpp starts in seconds: a grace the slower phases lack
            gguf, bin_dir = Path(prepared["ggufs"][kind]), Path(prepared["bin"])
            if due(f"llama.cpp {kind}", grace=args.budget_s / 4):
                base = {"run": args.run}
                add(llama.single_stream(bin_dir, gguf, kind, cards, base))
                add(llama.serve(bin_dir, gguf, kind, cards, CLIENTS, args.new_tokens, args.deadline, base, log))
    for card in (12.0, 24.0):
        if due(f"hymt single stream {card:g} GB", grace=args.budget_s / 4):
            add([single_stream(args.model_dir, card, args, log)])
    results["seconds"] = round(time.monotonic() - began, 1)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    log.close()
    return results
