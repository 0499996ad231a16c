"""A document through the job API of the engine at a3db12e (its `hymt translate` prints no figures): the same
steps as its CLI (plan, cap the card, start, one job for the whole text), stopped at a deadline, and one JSON line
of figures on stderr in the shape `hymt translate --stats` prints.

    PYTHONPATH=bench/.a3db12e/app python bench/document.py DOCUMENT MODEL_DIR DEADLINE_S
"""

from __future__ import annotations

import json
import sys
import time

import torch

from hymt.engine.engine import start
from hymt.hardware import apply_memory_cap
from hymt.languages import resolve
from hymt.planning import decide
from hymt.prompts import Sampling
from hymt.settings import Settings


def main() -> None:
    path, model_dir, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
    text = open(path, encoding="utf-8").read()
    began = time.perf_counter()
    settings = Settings.from_env().replace(model=model_dir)
    decision = decide(settings)
    apply_memory_cap(settings.gpu_memory_gb)
    engine = start(settings, decision)
    startup_s = time.perf_counter() - began
    started = time.perf_counter()
    job = engine.submit([(text, resolve("en"))], resolve("de"), Sampling(greedy=settings.greedy))
    try:
        job.wait(deadline)
    except TimeoutError:
        pass
    stats = engine.runner.stats
    print(json.dumps({"stats": {
        "segments": job.num_segments, "segments_done": job.num_done, "tokens_out": stats.tokens_out,
        "seconds": round(time.perf_counter() - started, 2), "startup_s": round(startup_s, 1),
        "peak_reserved_gb": round(torch.cuda.max_memory_reserved() / 2 ** 30, 2), "oom_events": stats.oom_events,
        "max_in_flight": max(stats.batch_sizes, default=0), "profile": engine.decision.profile}}), file=sys.stderr)
    engine.cancel(job)
    engine.stop()


if __name__ == "__main__":
    main()
