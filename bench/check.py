"""`bench/run.py check`: the engine in-process on the benchmark's checkpoint: greedy tokens and logits against
transformers on the same weights, and decoding speed by batch size.

    python bench/run.py check --card 24 --identity --out bench/results/check.json
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import random_weights
from host_memory import PeakAnonymous
from load import SENTENCES

GIB = 1024**3


def check(model_dir: Path, card: float, profile: str, identity: bool, rows: tuple[int, ...] = ()) -> dict:
    import torch

    from hymt.engine.sampling_params import Sampling
    from hymt.languages import resolve
    from hymt.planner.decide import decision_for
    from hymt.settings import Settings
    from hymt.translation.translator import start

    if random_weights.generated(model_dir):
        random_weights.install()
    settings = Settings(
        model=str(model_dir),
        gpu_memory_gb=card,
        profile=profile,
        max_new_tokens=64,
        compile_cache_dir="/tmp/hymt-compile",
    )
    decision = decision_for(settings)
    phases = []
    began = time.perf_counter()
    with PeakAnonymous() as host:
        translator = start(settings, decision, lambda p: phases.append((p, round(time.perf_counter() - began, 1))))
    engine = translator.engine
    record = {
        "card_gb": card,
        "profile": engine.decision.profile,
        "attention": engine.attention,
        "kv_cache_tokens": engine.decision.kv_cache_tokens,
        "max_in_flight": engine.scheduler.max_in_flight,
        "phases": phases,
        "startup_s": round(engine.startup.total_s, 1),
        "load_s": round(engine.startup.load_s, 1),
        "graphs_s": round(engine.startup.graphs_s, 1),
        "warmup": engine.startup.warmup,
        "steps": engine.startup.steps,
        "host_peak_gb": round(host.gb, 2),  # the computer's memory start-up took, the file's pages not counted
    }
    greedy = Sampling(greedy=True)
    model: Any = engine.runner.loaded.model  # then its reference in transformers, dequantized where it must be
    peak = torch.cuda.max_memory_reserved() if torch.cuda.is_available() else 0
    if identity:
        served = engine.decision.profile
        if served.startswith(("int4", "fp8")):  # the engine's model no longer runs in transformers: its reference does
            from fidelity import reference

            model = reference(model, model_dir, engine.runner.device)
        record["reference"] = "transformers, dequantized" if model is not engine.runner.loaded.model else "transformers"
        # Greedy tokens against `generate` on the same weights; bf16 kernels differ, so count the shared prefix.
        matches: list[dict[str, Any]] = []
        for text, source, target in SENTENCES[:4]:
            job = translator.submit([(text, resolve(source))], resolve(target), greedy)
            job.wait(600)
            request, output = job.requests[0], job.tokens[0]
            ids = torch.tensor([request.prompt_ids], device=engine.runner.device)
            with torch.inference_mode():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=request.max_new_tokens,
                    do_sample=False,
                    repetition_penalty=1.05,
                    eos_token_id=engine.runner.loaded.stop_ids,
                    pad_token_id=engine.runner.loaded.pad_id,
                )
            generated = out[0, ids.shape[1] :].tolist()  # not `reference`: that is fidelity's, called again below
            same = next(
                (i for i, (a, b) in enumerate(zip(generated, output)) if a != b),
                min(len(generated), len(output)),
            )
            matches.append({"tokens": len(output), "same_prefix": same, "prompt_ids": request.prompt_ids})
        record["greedy_vs_generate"] = matches
        prompts = [m["prompt_ids"] for m in matches]
        record["logits_vs_transformers"] = compare_logits(engine, model, prompts)
        if served.startswith("fp8"):
            # The floor the engine's distance is read against: the W8A8 reference against itself, its quantized
            # inputs moved by up to a bf16 unit (fidelity._jittered_quantized_input).
            exact = [_logits(model, ids) for ids in prompts]
            model = None  # one reference on the GPU at a time
            torch.manual_seed(0)
            model = reference(engine.runner.loaded.model, model_dir, engine.runner.device, jitter=True)
            record["w8a8_rounding_floor"] = [_agreement(_logits(model, ids), e) for ids, e in zip(prompts, exact)]
            model = None
            # What quantizing the activations alone costs: against the weights' reference.
            model = reference(engine.runner.loaded.model, model_dir, engine.runner.device, activations=False)
            record["logits_vs_weights_only"] = compare_logits(engine, model, prompts)
        for m in matches:
            del m["prompt_ids"]
        if torch.cuda.is_available():  # the reference is not the engine's: its memory leaves the peak
            model = None
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
    speeds = {}
    for n in sorted({*(rows or (1, 16, 64)), engine.scheduler.max_in_flight}):
        items = [(SENTENCES[i % len(SENTENCES)][0], resolve(SENTENCES[i % len(SENTENCES)][1])) for i in range(n)]
        before = dict(engine.runner.stats.steps), engine.runner.stats.step_s["decode"]
        t0 = time.perf_counter()
        jobs = [translator.submit([item], resolve("de"), greedy, min_new_tokens=64) for item in items]
        for job in jobs:
            job.wait(600)
        elapsed = time.perf_counter() - t0
        steps = engine.runner.stats.steps["decode"] - before[0]["decode"]
        speeds[n] = {
            "tok_s": round(sum(j.tokens_out for j in jobs) / elapsed, 1),
            "ms_per_decode_step": round((engine.runner.stats.step_s["decode"] - before[1]) * 1000 / max(1, steps), 2),
        }
    record["speed_by_rows"] = speeds
    record["oom_events"] = engine.runner.stats.oom_events
    if torch.cuda.is_available():
        peak = max(peak, torch.cuda.max_memory_reserved())
    record["peak_reserved_gb"] = round(peak / GIB, 2)
    translator.stop()
    return record


def compare_logits(engine, model, prompts: list[list[int]]) -> list[dict]:
    """Next-token logits of each prompt from the engine's forward (its attention kernel, compiled pieces and KV
    arena) against transformers' own forward (`model`) on the same weights: relative error, cosine, whether the top
    token agrees and how many of the top 10 are shared. On random weights the logits are nearly flat, so greedy
    tokens part at the first bf16 rounding difference; the logits show whether the two compute the same function."""
    import torch

    from hymt.engine.model import Batch

    runner = engine.runner
    results = []
    for ids in prompts:
        n, device = len(ids), runner.device
        batch = Batch(
            input_ids=torch.tensor(ids, device=device),
            positions=torch.arange(n, device=device),
            write_index=torch.arange(1, n + 1, device=device),
            query_starts=torch.tensor([0, n], dtype=torch.int32, device=device),
            kv_starts=torch.tensor([1, 0], dtype=torch.int32, device=device),
            kv_lengths=torch.tensor([n], dtype=torch.int32, device=device),
            logits_index=torch.tensor([n - 1], device=device),
            max_query=n,
            max_kv=n,
            spans=[(0, n, 1, n)],
        )
        ours = runner.decoder.forward(batch)[0].float()
        results.append(_agreement(ours, _logits(model, ids)))
    return results


def _logits(model, ids: list[int]):
    """transformers' next-token logits after `ids` (float32)."""
    import torch

    with torch.inference_mode():
        return model(torch.tensor([ids], device=model.device)).logits[0, -1].float()


def _agreement(ours, theirs) -> dict:
    import torch

    return {
        "relative_error": round(((ours - theirs).norm() / theirs.norm()).item(), 5),
        "cosine": round(torch.nn.functional.cosine_similarity(ours, theirs, dim=0).item(), 6),
        "same_top1": bool(ours.argmax() == theirs.argmax()),
        "top10_shared": len(set(ours.topk(10).indices.tolist()) & set(theirs.topk(10).indices.tolist())),
    }
