"""GPU benchmark: the memory tiers on simulated 8-80 GB cards, side by side with a plain transformers baseline.

    python bench/run.py build --model-dir /tmp/hymt-7b          # the real 7B architecture, random weights, on disk
    python bench/run.py part --part a --model-dir /tmp/hymt-7b --out bench/results   # one part of PARTS (a to g)
    python bench/run.py report --out bench/results              # per-card JSON, table (markdown) and chart (PNG)

Every measurement runs in its own process, so each simulated card (a cap on the process's share of the real GPU,
`torch.cuda.set_per_process_memory_fraction`) starts from an empty allocator and its peak memory is its own.
Outputs are forced to a fixed length (min_new_tokens) because random weights stop at random points.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

GIB = 1024 ** 3
# Realistic sentence lengths (8 to 45 words), mixed languages, as users send them.
SENTENCES = [
    "The meeting has been moved to Thursday afternoon.",
    "Please keep your luggage with you at all times while inside the terminal building.",
    "我们将在下周一发布新版本，届时所有用户都可以免费升级。",
    "Les résultats de l'étude montrent une nette amélioration de la qualité de l'air dans les grandes villes.",
    "Der Zug nach München fährt heute wegen Bauarbeiten mit einer Verspätung von etwa zwanzig Minuten ab.",
    "If you have any questions about your invoice, contact our support team by email or by phone during office hours.",
    "El nuevo museo abrirá sus puertas al público el próximo mes con una exposición dedicada al arte contemporáneo.",
    "明日の会議は午後三時から始まりますので、資料を事前に確認しておいてください。",
    "Researchers found that people who sleep less than six hours a night are more likely to catch a cold, "
    "even when other factors such as age, stress and smoking are taken into account.",
    "Проект будет завершён к концу года, если финансирование сохранится на нынешнем уровне.",
    "The committee reviewed forty applications and selected three finalists, each of whom will present a "
    "detailed proposal to the board in early spring.",
    "Mohon pastikan semua dokumen sudah ditandatangani sebelum dikirim ke kantor pusat.",
    "Il governo ha annunciato nuove misure per sostenere le piccole imprese colpite dall'aumento dei costi "
    "dell'energia.",
    "Thank you for your patience.",
    "Bu yıl festivale otuzdan fazla ülkeden sanatçı katılacak ve etkinlikler iki hafta sürecek.",
    "The software update fixes a security vulnerability that could allow an attacker to read files on the device "
    "without the user's permission, so we recommend installing it as soon as possible.",
]
TARGETS = ["zh", "en", "en", "zh", "en", "de", "en", "zh", "zh", "en", "fr", "en", "en", "ja", "en", "zh"]


def real_config():
    from transformers import HunYuanDenseV1Config

    return HunYuanDenseV1Config(
        vocab_size=128167, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=32768, rms_norm_eps=1e-5, hidden_act="silu",
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
        bos_token_id=127958, eos_token_id=127960, pad_token_id=127961, eod_token_id=127967,
        tie_word_embeddings=False, attention_bias=False, dtype="bfloat16")


def build(model_dir: Path) -> dict:
    """The 7B architecture from the real config with random weights (initialised on the GPU: seconds), saved as a
    Hugging Face checkpoint with a tokenizer that has the real special tokens and chat template."""
    import torch
    from transformers import AutoModelForCausalLM

    from hymt.testmodel import build_tokenizer

    started = time.perf_counter()
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(real_config(), dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(model_dir, max_shard_size="4GB")
    build_tokenizer().save_pretrained(model_dir)
    return {"params": params, "weight_gib": round(params * 2 / GIB, 2),
            "build_s": round(time.perf_counter() - started, 1)}


def _requests():
    from hymt.languages import resolve

    return [(text, resolve(t)) for text, t in zip(SENTENCES, TARGETS)]


def _start_engine(settings, decision=None):
    """Our engine as the server starts it: planned (unless a decision is given), capped to the simulated card."""
    from hymt.engine.engine import start
    from hymt.hardware import apply_memory_cap
    from hymt.planning import decide

    decision = decision or decide(settings)
    apply_memory_cap(settings.gpu_memory_gb)
    return start(settings, decision)


def measure_ours(model_dir: Path, card_gb: float, new_tokens: int, profile: str, empty_cache: bool,
                 cudnn_attention: bool = False) -> dict:
    import torch

    from hymt.planning import decide
    from hymt.prompts import Sampling
    from hymt.settings import Settings

    settings = Settings(model=str(model_dir), gpu_memory_gb=card_gb, profile=profile, greedy=True,
                        max_new_tokens=new_tokens, empty_cache_after_batch=empty_cache,
                        cudnn_attention=cudnn_attention)
    record: dict = {"card_gb": card_gb, "forced_profile": None if profile == "auto" else profile,
                    "empty_cache_after_batch": empty_cache, "cudnn_attention": cudnn_attention}
    try:
        decision = decide(settings)
    except Exception as exc:  # noqa: BLE001 - a refusal is a result too
        return {**record, "profile": None, "refused": str(exc)}
    started = time.perf_counter()
    engine = _start_engine(settings, decision)
    record.update(profile=engine.decision.profile, planned_profile=decision.profile, weights=engine.decision.weights,
                  kv_cache=engine.decision.kv_cache, attention=engine.attention,
                  batch_tokens=engine.decision.batch_tokens, planned_batch_tokens=decision.batch_tokens,
                  decision_reason=engine.decision.reason, warmup=engine.warmup,
                  load_s=round(engine.load_s, 1), ready_s=round(time.perf_counter() - started, 1))
    greedy = Sampling(greedy=True)
    requests = _requests()
    stats_type = type(engine.runner.stats)
    # Batch 1: one sentence at a time, output forced to `new_tokens`.
    tok_s = []
    for text, target in requests[:3]:
        t0 = time.perf_counter()
        engine.submit([(text, None)], target, greedy, min_new_tokens=new_tokens).wait(600)
        tok_s.append(new_tokens / (time.perf_counter() - t0))
    record["tok_s_batch1"] = round(sorted(tok_s)[1], 1)
    # 16 concurrent requests, submitted together from 16 threads as an HTTP server would.
    ooms_batch1 = engine.runner.stats.oom_events
    engine.runner.stats = stats_type()
    jobs, threads = [], []
    t0 = time.perf_counter()
    for text, target in requests:
        thread = threading.Thread(target=lambda t=text, g=target: jobs.append(
            engine.submit([(t, None)], g, greedy, min_new_tokens=new_tokens)))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    for job in list(jobs):
        job.wait(600)
    elapsed = time.perf_counter() - t0
    record["tok_s_concurrent16"] = round(len(requests) * new_tokens / elapsed, 1)
    record["concurrent16_batches"] = {str(k): v for k, v in sorted(engine.runner.stats.batch_sizes.items())}
    record["concurrent16_generate_share"] = round(engine.runner.stats.generate_s / elapsed, 3)
    record["oom_events"] = ooms_batch1 + engine.runner.stats.oom_events
    record["linear_kernel"] = _linear_kernel(engine.runner.loaded.model)
    if torch.cuda.is_available():
        record["peak_allocated_gb"] = round(torch.cuda.max_memory_allocated() / GIB, 2)
        record["peak_reserved_gb"] = round(torch.cuda.max_memory_reserved() / GIB, 2)
    engine.stop()
    return record


def _linear_kernel(model) -> str:
    """The class that runs the attention projections: which kernel serves a quantized checkpoint."""
    return next(type(m).__name__ for name, m in model.named_modules() if name.endswith("q_proj"))


def quantize_checkpoint(model_dir: Path, out_dir: Path) -> dict:
    """`hymt quantize` on the 7B checkpoint: time, GPU memory and size on disk of the INT4 GPTQ result."""
    import shutil

    import gptqmodel
    import torch
    from transformers import AutoTokenizer

    from hymt.engine.quantize import calibration_texts, quantize

    shutil.rmtree(out_dir, ignore_errors=True)
    started = time.perf_counter()
    quantize(str(model_dir), out_dir)
    size = sum(f.stat().st_size for f in out_dir.rglob("*.safetensors"))
    bf16 = sum(f.stat().st_size for f in model_dir.rglob("*.safetensors"))
    config = json.loads((out_dir / "config.json").read_text())["quantization_config"]
    return {"quantize_s": round(time.perf_counter() - started, 1), "gptqmodel": gptqmodel.__version__,
            "bits": config["bits"], "group_size": config["group_size"],
            "calibration_prompts": len(calibration_texts(AutoTokenizer.from_pretrained(model_dir))),
            "checkpoint_gib": round(size / GIB, 2), "bf16_checkpoint_gib": round(bf16 / GIB, 2),
            "peak_reserved_gb": round(torch.cuda.max_memory_reserved() / GIB, 2)}


def profile_batch(model_dir: Path, new_tokens: int) -> dict:
    """Where a batch of 16 spends its time, on the 80 GB card (bf16). The per-step figures are printed before the
    profiler runs, so a profiler that overruns the time limit still leaves them."""
    from hymt.settings import Settings

    engine = _start_engine(Settings(model=str(model_dir), gpu_memory_gb=80, greedy=True, max_new_tokens=new_tokens))
    try:
        works = _batch_works(engine.runner, new_tokens)
        result = step_times(engine.runner, works, new_tokens)
        print(json.dumps(result), flush=True)
        return {**result, **profile_tables(engine.runner, works)}
    finally:
        engine.stop()


def _batch_works(runner, new_tokens: int) -> list:
    """The 16 benchmark requests as the scheduler hands them to the runner, each forced to `new_tokens`."""
    from hymt.engine.scheduler import Work
    from hymt.prompts import Sampling, render, user_message

    tok, greedy = runner.loaded.tokenizer, Sampling(greedy=True)
    return [Work(job_id=0, index=i, prompt_ids=runner.encode(render(tok, user_message(None, target, text))),
                 max_new_tokens=new_tokens, min_new_tokens=new_tokens, group=(None, greedy))
            for i, (text, target) in enumerate(_requests())]


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def step_times(runner, works: list, new_tokens: int) -> dict:
    """Milliseconds per decoding step for 16 rows: our runner against a plain `generate` of the same left-padded
    batch (with and without the repetition penalty), and of 16 equal prompts (no padding)."""
    import torch

    device, model, pad = runner.device, runner.loaded.model, runner.loaded.pad_id
    lengths = [len(w.prompt_ids) for w in works]
    longest = max(lengths)
    padded = torch.tensor([[pad] * (longest - len(w.prompt_ids)) + w.prompt_ids for w in works], device=device)
    mask = (torch.arange(longest, device=device)[None, :] >= longest - torch.tensor(lengths, device=device)[:, None]
            ).long()
    equal = torch.tensor([works[0].prompt_ids] * len(works), device=device)

    def ms_per_step(fn) -> float:
        fn()  # the first call of each shape pays for kernel selection
        _sync(device)
        started = time.perf_counter()
        fn()
        _sync(device)
        return round((time.perf_counter() - started) * 1000 / new_tokens, 1)

    def plain(ids, attention_mask=None, **extra):
        with torch.inference_mode():
            model.generate(input_ids=ids, attention_mask=attention_mask, max_new_tokens=new_tokens,
                           min_new_tokens=new_tokens, do_sample=False, pad_token_id=pad, **extra)

    never = [lambda: False] * len(works)
    return {
        "rows": len(works), "prompt_tokens": lengths, "new_tokens": new_tokens,
        "ms_per_step_ours_batch16": ms_per_step(lambda: runner.generate(works, never)),
        "ms_per_step_ours_batch1": ms_per_step(lambda: runner.generate(works[:1], never[:1])),
        "ms_per_step_plain_batch16_padded": ms_per_step(lambda: plain(padded, mask)),
        "ms_per_step_plain_batch16_padded_repetition_penalty": ms_per_step(
            lambda: plain(padded, mask, repetition_penalty=1.05)),
        "ms_per_step_plain_batch16_equal": ms_per_step(lambda: plain(equal)),
        "ms_per_step_plain_batch1": ms_per_step(lambda: plain(equal[:1])),
    }


def profile_tables(runner, works: list) -> dict:
    """The ops that take the most device and CPU time in one batch of our runner."""
    from torch.profiler import ProfilerActivity, profile

    device = runner.device
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        runner.generate(works, [lambda: False] * len(works))
        _sync(device)
    events = prof.key_averages()
    tables = {}
    for key, field in (("profile_top_device", "self_device_time_total"), ("profile_top_cpu", "self_cpu_time_total")):
        top = sorted(events, key=lambda e: getattr(e, field), reverse=True)[:15]
        tables[key] = [{"op": e.key[:80], "calls": e.count, "self_device_ms": round(e.self_device_time_total / 1e3, 1),
                        "self_cpu_ms": round(e.self_cpu_time_total / 1e3, 1)} for e in top]
    return tables


def measure_baseline(model_dir: Path, card_gb: float, new_tokens: int) -> dict:
    """A plain transformers server: bf16, `generate`, one request at a time."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hymt.hardware import apply_memory_cap

    apply_memory_cap(card_gb)
    tok = AutoTokenizer.from_pretrained(model_dir)
    t0 = time.perf_counter()
    try:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, device_map={"": 0})
    except Exception as exc:  # noqa: BLE001 - out of memory (or a device-map refusal) means: does not load
        return {"baseline_loaded": False, "baseline_load_error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    load_s = time.perf_counter() - t0

    from hymt.prompts import render, user_message

    def one(text: str, target) -> float:
        prompt = render(tok, user_message(None, target, text))
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt").to("cuda")
        t = time.perf_counter()
        model.generate(**ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    requests = _requests()
    one(*requests[0])  # first call pays for kernel selection, as our warm-up does
    # 16 requests one after another, as a plain server answers them; batch 1 is the median of the first three.
    t0 = time.perf_counter()
    seconds = [one(text, target) for text, target in requests]
    concurrent = len(requests) * new_tokens / (time.perf_counter() - t0)
    batch1 = sorted(new_tokens / s for s in seconds[:3])[1]
    return {"baseline_loaded": True, "baseline_load_s": round(load_s, 1), "baseline_tok_s_batch1": round(batch1, 1),
            "baseline_tok_s_concurrent16": round(concurrent, 1), "baseline_oom_events": 0,
            "baseline_peak_allocated_gb": round(torch.cuda.max_memory_allocated() / GIB, 2),
            "baseline_peak_reserved_gb": round(torch.cuda.max_memory_reserved() / GIB, 2)}


def _child(kind: str, args, **extra) -> dict:
    """Run one measurement in a fresh process; a crash is recorded, not fatal to the run."""
    cmd = [sys.executable, __file__, "one", "--kind", kind, "--gptq-dir", str(args.gptq_dir),
           "--new-tokens", str(args.new_tokens)] + [f"--{k.replace('_', '-')}={v}" for k, v in extra.items()]
    started = time.perf_counter()
    timeout = args.quantize_timeout if kind == "quantize" else args.child_timeout
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        stdout, stderr = (s.decode(errors="replace") if isinstance(s, bytes) else (s or "")
                          for s in (exc.stdout, exc.stderr))
        sys.stderr.write(stderr[-6000:])
        partial = [ln for ln in stdout.splitlines() if ln.startswith("{")]  # what it printed before the limit
        return {**(json.loads(partial[-1]) if partial else {}), "error": f"timed out after {timeout} s",
                "wall_s": round(time.perf_counter() - started, 1)}
    sys.stderr.write(proc.stderr[-3000:])
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}",
                "wall_s": round(time.perf_counter() - started, 1)}
    return {**json.loads(lines[-1]), "wall_s": round(time.perf_counter() - started, 1)}


def environment() -> dict:
    import torch
    import transformers

    from importlib.metadata import PackageNotFoundError, version

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"gpu": torch.cuda.get_device_name(0), "gpu_total_gib": round(torch.cuda.mem_get_info()[1] / GIB, 1),
            "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
            "bitsandbytes": installed("bitsandbytes"), "gptqmodel": installed("gptqmodel"),
            "optimum": installed("optimum"), "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}


def lora_on_nf4(model_dir: Path, card_gb: float, new_tokens: int) -> dict:
    """A LoRA adapter on a 4-bit base: active for its direction only, under a 12 GB card."""
    import torch
    from peft import LoraConfig
    from safetensors.torch import save_file

    from hymt.engine.scheduler import Work
    from hymt.languages import resolve
    from hymt.prompts import Sampling, render, user_message
    from hymt.settings import Settings

    adapter_dir = Path("/tmp/hymt-lora/en-bo")
    adapter_dir.mkdir(parents=True, exist_ok=True)
    config = real_config()
    rank, generator = 8, torch.Generator().manual_seed(0)
    tensors = {}
    for layer in range(config.num_hidden_layers):
        for name, out_features in (("q_proj", 4096), ("v_proj", 1024)):
            prefix = f"base_model.model.model.layers.{layer}.self_attn.{name}"
            tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, 4096, generator=generator) * 0.05
            tensors[f"{prefix}.lora_B.weight"] = torch.randn(out_features, rank, generator=generator) * 0.05
    save_file({k: v.to(torch.bfloat16) for k, v in tensors.items()}, adapter_dir / "adapter_model.safetensors")
    LoraConfig(r=rank, lora_alpha=16, target_modules=["q_proj", "v_proj"]).save_pretrained(adapter_dir)
    manifest = adapter_dir.parent / "manifest.json"
    manifest.write_text(json.dumps({"adapters": [{"name": "en-bo", "path": "en-bo", "directions": ["en>bo"]}]}))

    settings = Settings(model=str(model_dir), gpu_memory_gb=card_gb, profile="nf4", greedy=True,
                        max_new_tokens=new_tokens, adapters=str(manifest))
    engine = _start_engine(settings)
    greedy = Sampling(greedy=True)
    text = SENTENCES[0]
    with_adapter = engine.submit([(text, resolve("en"))], resolve("bo"), greedy).wait(600)[0]
    prompt = engine.runner.encode(render(engine.runner.loaded.tokenizer, user_message(resolve("en"), resolve("bo"),
                                                                                      text)))
    base = engine.runner.run([Work(job_id=0, index=0, prompt_ids=prompt, max_new_tokens=new_tokens,
                                   group=(None, greedy))])[0]
    other = engine.submit([(text, resolve("en"))], resolve("zh"), greedy).wait(600)[0]
    result = {"card_gb": card_gb, "profile": engine.decision.profile, "adapter_output_differs_from_base":
              with_adapter != base.strip(), "base_direction_runs": bool(other),
              "oom_events": engine.runner.stats.oom_events,
              "peak_reserved_gb": round(torch.cuda.max_memory_reserved() / GIB, 2)}
    engine.stop()
    return result


PARTS = {
    # (kind, card GiB, forced profile, empty cache after each batch, flags: "gptq" serves part e's checkpoint,
    # "cudnn" turns cuDNN's attention kernels on)
    "a": [("ours", 80, "auto", False), ("baseline", 80), ("ours", 24, "auto", False), ("baseline", 24),
          ("ours", 16, "auto", False), ("baseline", 16), ("ours", 24, "auto", True)],
    "b": [("ours", 12, "auto", False), ("baseline", 12), ("ours", 8, "auto", False), ("baseline", 8),
          ("ours", 80, "bf16-int8kv", False), ("ours", 80, "nf4", False), ("ours", 80, "nf4-int8kv", False),
          ("ours", 80, "int8", False), ("lora", 12)],
    # After the engine learned to gather requests that arrive together (side by side with the baseline again).
    "c": [("ours", 24, "auto", False), ("baseline", 24), ("ours", 80, "auto", False), ("ours", 8, "auto", False)],
    "d": [("ours", 80, "auto", False)],
    # `hymt quantize` on the 7B (about 8 minutes on an H200: run it apart from what serves its result) ...
    "e": [("quantize", 0)],
    # ... then its INT4 GPTQ checkpoint served beside NF4 on the same cards, and a profile of a batch of 16.
    "f": [("ours", 8, "auto", False, "gptq"), ("ours", 8, "auto", False), ("ours", 12, "auto", False, "gptq"),
          ("ours", 24, "auto", False, "gptq"), ("baseline", 24), ("profile", 80)],
    # cuDNN's SDPA kernels (on in parts a-f) against the flash/efficient ones the engine now uses, twice each.
    "g": [("ours", 24, "auto", False, "cudnn"), ("ours", 24, "auto", False)] * 2 + [("baseline", 24)],
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["build", "part", "one", "report"])
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/hymt-7b"))
    parser.add_argument("--gptq-dir", type=Path, default=Path("/tmp/hymt-7b-gptq"),
                        help="where part e writes the INT4 GPTQ checkpoint it then serves")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--part", choices=sorted(PARTS))
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--child-timeout", type=int, default=300)
    parser.add_argument("--quantize-timeout", type=int, default=900)
    parser.add_argument("--kind", choices=["ours", "baseline", "lora", "quantize", "profile"])
    parser.add_argument("--card", type=float)
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--empty-cache", default="False")
    parser.add_argument("--cudnn-attention", default="False")
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    if args.command == "one":
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        if args.kind == "ours":
            result = measure_ours(args.model_dir, args.card, args.new_tokens, args.profile, args.empty_cache == "True",
                                  args.cudnn_attention == "True")
        elif args.kind == "lora":
            result = lora_on_nf4(args.model_dir, args.card, args.new_tokens)
        elif args.kind == "quantize":
            result = quantize_checkpoint(args.model_dir, args.gptq_dir)
        elif args.kind == "profile":
            result = profile_batch(args.model_dir, min(args.new_tokens, 32))  # per-step figures need few steps
        else:
            result = measure_baseline(args.model_dir, args.card, args.new_tokens)
        print(json.dumps(result), flush=True)
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    if args.command == "report":
        from report import write_report

        write_report(args.out)
        return 0
    if args.command == "build":
        print(json.dumps(build(args.model_dir)), flush=True)
        return 0

    results = {"environment": environment(), "new_tokens": args.new_tokens, "records": []}
    for kind, card, *rest in PARTS[args.part]:
        extra = {"card": card}
        flags = rest[2:]
        if kind == "ours":
            extra.update(profile=rest[0], empty_cache=rest[1], cudnn_attention="cudnn" in flags)
        checkpoint = "gptq" if "gptq" in flags else "bf16"
        record = {"kind": kind, "card_gb": card, "checkpoint": checkpoint,
                  **_child(kind, args, model_dir=args.gptq_dir if checkpoint == "gptq" else args.model_dir,
                           **extra)}
        results["records"].append(record)
        (args.out / f"part_{args.part}.json").write_text(json.dumps(results, indent=2) + "\n")
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
