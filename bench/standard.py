"""The standard run, one H200 and one command: hymt on each card over HTTP, then llama.cpp on the same weights,
then hymt's single streams, for one model's size (`--family`: the 7B by default, the 1.8B or the 30B-A3B, whose
run takes about 25 minutes: bench/README.md); and the environment every result file records. `--scenarios` and
`--engines` choose a part of it (the document and mixed scenarios alone, on one card, say); llama.cpp's conversion
runs only where a chosen scenario needs llama.cpp.

    python bench/run.py standard --out bench/results/standard.json
    python bench/run.py standard --family hy-mt2-1.8b --out bench/results/small/standard.json
    python bench/run.py standard --family hy-mt2-30b-a3b --out bench/results/moe/standard.json --budget-s 1500
    python bench/run.py standard --scenarios mixed,document --cards 12 --engines hymt --out /tmp/teams.json
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import llama
from checkpoints import build
from hymt.family import HUNYUAN_MT_7B, HY_MT2_1_8B, HY_MT2_30B_A3B, Family
from mixed import settings
from serving import CLIENTS, serve_engine, single_stream

SCENARIOS = ("clients", "document", "mixed", "single_stream")  # --scenarios, all by default
SESSION = ("clients", "document", "mixed")  # hymt's, in one server's session on a card, in this order


@dataclass(frozen=True)
class Standard:
    """What the standard run measures for one model: the simulated cards hymt is served on (in this order), the
    cards and profiles of its single streams in-process ("auto": the card's own, the planner's; or one pinned), the
    cards of the document and mixed scenarios (hymt's, in the session
    of its clients on the card, and llama-server's, for the types that stand for them), the cards each of
    llama.cpp's GGUF types stands for and the type the converter writes, which the others are quantized from; and
    other models' single streams in the same run, to compare with (each on its card and profile, built after this
    model's GGUFs are deleted)."""

    family: Family
    model_dir: Path  # where its checkpoint is built when missing
    cards: tuple[float, ...]
    single_streams: tuple[tuple[float, str], ...]
    mixed_cards: tuple[float, ...]
    llama_types: Mapping[str, tuple[float, ...]]
    llama_source: str = "BF16"
    beside: tuple[tuple[Family, float, str], ...] = ()


STANDARDS = {
    s.family.key: s
    for s in (
        # A person with an 8-16 GB card runs Q4_K_M. hymt's single stream on int4 (pinned: on Ada and Hopper the
        # planner gives 12 GB fp8-int8kv), on 16 GB's own profile (fp8 there) and on bf16.
        Standard(
            HUNYUAN_MT_7B,
            Path("/tmp/hymt-7b"),
            cards=(12.0, 24.0, 8.0, 16.0),
            single_streams=((12.0, "int4"), (16.0, "auto"), (24.0, "auto")),
            mixed_cards=(12.0, 24.0),
            llama_types={"Q4_K_M": (8.0, 12.0, 16.0), "BF16": (24.0,)},
        ),
        # The cards a 7B does not fit: Q4_K_M on 4 GB, BF16 on 6 and 8 GB; hymt's single stream on int4-int8kv
        # (4 GB) and bf16 (8 GB).
        Standard(
            HY_MT2_1_8B,
            Path("/tmp/hymt-1.8b"),
            cards=(4.0, 6.0, 8.0),
            single_streams=((4.0, "auto"), (8.0, "auto")),
            mixed_cards=(4.0, 8.0),
            llama_types={"Q4_K_M": (4.0,), "BF16": (6.0, 8.0)},
        ),
        # The Mixture of Experts on the cards it is planned for: int4 on 24 GB, bf16 on 80 GB; a person with a 24 GB
        # card runs Q4_K_M (18 GB). No BF16 GGUF (60 GB), nor the Q8_0 it is quantized from (32 GB) kept: the GPU
        # machine's disk is 64 GiB. Beside it, the 7B's int4 single stream on a 12 GB card: what the 30B-A3B's on
        # 24 GB costs against it, in the same run.
        Standard(
            HY_MT2_30B_A3B,
            Path("/tmp/hymt-30b-a3b"),
            cards=(24.0, 80.0),
            single_streams=((24.0, "auto"), (80.0, "auto")),
            mixed_cards=(),
            llama_types={"Q4_K_M": (24.0,)},
            llama_source="Q8_0",
            beside=((HUNYUAN_MT_7B, 12.0, "int4"),),
        ),
    )
}


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


def standard(args, chosen: Standard) -> dict:
    """The standard run, one H200 and one command: hymt on `args.cards` (HTTP clients, then the document and mixed
    scenarios on the cards that have them, in the same server's session), then llama.cpp on the same weights
    (llama-bench, llama-server under the same clients and mixed load), then hymt's single streams (before llama.cpp
    where its conversion is still running), then the other models' single streams beside them (`beside`, built
    once this model's GGUFs are deleted); of these what `args.scenarios` and `args.engines` name. llama.cpp's
    conversion (CPU work, minutes) runs meanwhile on cores of its own, so that it neither waits nor slows hymt's
    host work. A phase that would start after `--budget-s` is recorded as skipped. Every record names the run and
    the family (its model's)."""
    began = time.monotonic()
    head = {"run": args.run, "family": args.family}
    results = {
        "environment": environment(),
        "model": chosen.family.name,
        "family": args.family,
        "new_tokens": args.new_tokens,
        "run": args.run,
        "records": [],
    }

    def add(records: list[dict]) -> None:
        results["records"] += records
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        for record in records:
            print(json.dumps(record), flush=True)

    def due(what: str, grace: float = 0) -> bool:
        if time.monotonic() - began < args.budget_s + grace:
            return True
        add([{**head, "scenario": "skipped", "what": what, "error": "out of the run's time"}])
        return False

    chosen_scenarios = set(args.scenarios)
    engines = {"llama.cpp" if e == "llama" else e for e in args.engines.split(",")}
    sessions = {
        card: tuple(s for s in SESSION if s in chosen_scenarios and (s == "clients" or card in chosen.mixed_cards))
        for card in args.cards
        if "hymt" in engines
    }
    llama_plan = {}  # GGUF type: the cards of its clients and single stream, and of its mixed scenario
    for kind, cards in chosen.llama_types.items():
        cards = tuple(c for c in cards if c in args.cards)
        plain = cards if chosen_scenarios & {"clients", "single_stream"} else ()
        teams = tuple(c for c in cards if c in chosen.mixed_cards) if "mixed" in chosen_scenarios else ()
        if "llama.cpp" in engines and (plain or teams):
            llama_plan[kind] = (plain, teams)

    if not (args.model_dir / "config.json").is_file():
        add([{**head, "scenario": "build", **build(args.model_dir, chosen.family)}])
    cores = sorted(os.sched_getaffinity(0))
    half = cores[len(cores) // 2 :] if len(cores) >= 8 and llama_plan else []
    prepared: dict = {}
    log = open(args.out.with_suffix(".log"), "w")

    def prepare() -> None:
        try:
            prepared.update(
                llama.prepare(
                    args.llama_pack,
                    args.model_dir,
                    Path(args.llama_work),
                    log,
                    half,
                    tuple(chosen.llama_types),
                    chosen.llama_source,
                )
            )
        except Exception as exc:  # noqa: BLE001 - reported as a record
            prepared["error"] = f"{type(exc).__name__}: {exc}"[:400]

    converting = threading.Thread(target=prepare)
    if llama_plan:
        converting.start()
    if half:
        os.sched_setaffinity(0, cores[: len(cores) // 2])  # hymt's servers inherit the other half

    def single_streams() -> None:
        for card, profile in (s for s in chosen.single_streams if s[0] in args.cards):
            if due(f"hymt single stream {card:g} GB ({profile})", grace=args.budget_s / 4):
                add([single_stream(args.model_dir, card, args, log, profile=profile)])

    streams = "single_stream" in chosen_scenarios and "hymt" in engines
    for card, scenarios in sessions.items():
        if scenarios and due(f"hymt {card:g} GB"):
            add(serve_engine("hymt", args.model_dir, card, args, log, scenarios, due))
    if streams and converting.is_alive():
        # The conversion outlasts hymt's servers (the 30B-A3B's, about 15 minutes): the single streams meanwhile.
        single_streams()
        streams = False
    if llama_plan:
        converting.join()
        os.sched_setaffinity(0, cores)
        add([{**head, "engine": "llama.cpp", "scenario": "prepare", **prepared}])
    if llama_plan and "error" not in prepared:
        clients = CLIENTS if "clients" in chosen_scenarios else ()
        for kind, (cards, teams) in llama_plan.items():  # llama.cpp starts in seconds: a grace the others lack
            gguf, bin_dir = Path(prepared["ggufs"][kind]), Path(prepared["bin"])
            if not due(f"llama.cpp {kind}", grace=args.budget_s / 4):
                continue
            if "single_stream" in chosen_scenarios and cards:
                add(llama.single_stream(bin_dir, gguf, kind, cards, head))
            if (clients and cards) or teams:
                add(
                    llama.serve(
                        bin_dir,
                        gguf,
                        kind,
                        cards if clients else (),
                        chosen.family,
                        clients if cards else (),
                        args.new_tokens,
                        args.deadline,
                        head,
                        log,
                        mixed=settings(args) if teams else None,
                        mixed_cards=teams,
                    )
                )
        # Measured: the disk is the next build's (the 30B-A3B's Q4_K_M holds 18 GB of the GPU machine's 64 GiB).
        for gguf in prepared["ggufs"].values():
            Path(gguf).unlink(missing_ok=True)
    if streams:
        single_streams()
    if "single_stream" in chosen_scenarios and "hymt" in engines:
        for family, card, profile in chosen.beside:
            other = STANDARDS[family.key]
            if due(f"{family.key} single stream {card:g} GB ({profile})", grace=args.budget_s / 4):
                if not (other.model_dir / "config.json").is_file():
                    add([{**head, "family": family.key, "scenario": "build", **build(other.model_dir, family)}])
                add([single_stream(other.model_dir, card, args, log, family, profile)])
    results["seconds"] = round(time.monotonic() - began, 1)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    log.close()
    return results
