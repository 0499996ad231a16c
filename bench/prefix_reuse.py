"""What the kept instruction (HYMT_PREFIX_REUSE, engine/prefixes.py) saves on a document: the in-process translator
translates one document of the benchmark's short lines (`load.document_lines`, en to de) with it off, then on, and
reports the prompt tokens prefilled, those reused, the prefill and decoding steps and the seconds each took. On the
CPU the tiny test model shows the tokens (its prefill costs per segment, not per token); on a GPU the 7B's random
weights (`bench/run.py build`) show the time too.

    PYTHONPATH=app python3 bench/prefix_reuse.py --model /tmp/tiny-hunyuan-mt --profile cpu
    PYTHONPATH=app:/tmp/site python3 bench/prefix_reuse.py --model /tmp/hymt-7b --card 12 --lines 2000 \
        --profile int4 --reuse off    # then --reuse on, in another process
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from hymt.engine.sampling_params import Sampling
from hymt.languages import resolve
from hymt.planner.decide import decision_for
from hymt.settings import Settings
from hymt.translation.translator import start
from load import document_lines  # bench/, the script's folder


def run(settings: Settings, lines: int) -> dict:
    """One document through a fresh translator: its prompt figures and step times."""
    translator = start(settings, decision_for(settings))
    try:
        began = time.perf_counter()
        text = "\n".join(document_lines(lines))
        job = translator.submit([(text, resolve("en"))], resolve("de"), Sampling(greedy=True))
        job.wait(3600)
        seconds = time.perf_counter() - began
        now = translator.snapshot()
    finally:
        translator.stop()
    return {
        "profile": translator.decision.profile,  # the one loaded (start-up steps down where one does not fit)
        "prefix_reuse": settings.prefix_reuse,
        "prompt_tokens_prefilled": now.tokens_in,
        "prefix_tokens_reused": now.prefix_tokens_reused,
        "tokens_out": now.tokens_out,
        "steps": now.steps,
        "step_s": {kind: round(s, 3) for kind, s in now.step_s.items()},
        "seconds": round(seconds, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--profile", help="the planner's choice unless given (cpu without a GPU)")
    parser.add_argument("--card", type=float, help="GPU memory to plan for, in GB (the planner's cap)")
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument(
        "--reuse",
        choices=("both", "off", "on"),
        default="both",
        help="one of them per process on a GPU: a second "
        "start in the same process may not find the memory the first gave back, and step down to another profile",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        base = Settings.from_env().replace(
            model=args.model, greedy=True, max_new_tokens=args.new_tokens, data_dir=data, profile=args.profile
        )
        if args.card:
            base = base.replace(gpu_memory_gb=args.card)
        for reuse in {"both": (False, True), "off": (False,), "on": (True,)}[args.reuse]:
            print(json.dumps(run(base.replace(prefix_reuse=reuse), args.lines)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
