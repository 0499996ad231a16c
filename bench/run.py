"""GPU benchmark: hymt beside llama.cpp (the single-user anchor, what Ollama runs) and a seed-style server, as users
reach them, on simulated 8, 12, 16 and 24 GB cards.

    python bench/run.py standard --out bench/results/standard.json   # the whole standard run: one H200, < 10 min
    python bench/report.py bench/results                              # table.md and chart.png from its records

    python bench/run.py build --model-dir /tmp/hymt-7b       # the real 7B architecture, random weights, on disk
    python bench/run.py serve --cards 8,12,16,24 --engines hymt,seed --out bench/results/serve.json [--document]
    python bench/run.py llama --out bench/results/llama.json  # llama.cpp alone (bench/llama.py)
    python bench/run.py check --card 24 --identity --out bench/results/check.json

Every record has one shape: card_gb, engine (hymt, llama.cpp, seed-style), profile (or the GGUF type), scenario
(clients, document, single_stream), clients, tok_s, p50_s, p95_s, peak_reserved_gb, oom_events, startup_s, and
the run id that all records of one run share. Scenarios:
- clients: 1, 16 and 64 concurrent HTTP clients, each sending realistic sentences one after another
  (`/translate` with `source: auto` for hymt, its official prompt through `/v1/chat/completions` for llama-server),
  with a deadline; tokens counted by the server;
- single_stream: one segment decoding in-process (`bench/profile_step.py` for hymt, `llama-bench` tg128);
- document: a 2,000-segment document through `hymt translate` (`--document`; not in the standard run).
Random weights never stop on their own, so every answer runs to its budget (HYMT_MAX_NEW_TOKENS, 64).
`check` runs the engine in-process: greedy tokens and logits against transformers on the same weights, and
decoding speed by batch size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app"))
sys.path.insert(0, str(ROOT / "bench"))

import llama  # noqa: E402
from load import SENTENCES, Hymt, Watcher, document_lines, metric, run_clients, stop, wait_healthy  # noqa: E402

GIB = 1024**3
CLIENTS = ((1, 5), (16, 2), (64, 2))  # (clients, requests each)
ENGINE_NAMES = {"hymt": "hymt", "seed": "seed-style"}


def real_config():
    from transformers import HunYuanDenseV1Config

    return HunYuanDenseV1Config(
        vocab_size=128167,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=32768,
        rms_norm_eps=1e-5,
        hidden_act="silu",
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "alpha": 1000.0, "factor": 1.0},
        bos_token_id=127958,
        eos_token_id=127960,
        pad_token_id=127961,
        eod_token_id=127967,
        tie_word_embeddings=False,
        attention_bias=False,
        dtype="bfloat16",
    )


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
    model.save_pretrained(model_dir, max_shard_size="4GB")
    build_tokenizer().save_pretrained(model_dir)
    return {"params": sum(p.numel() for p in model.parameters()), "build_s": round(time.perf_counter() - started, 1)}


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


# -- check: the engine in-process -----------------------------------------------------------------------------
def check(model_dir: Path, card: float, profile: str, identity: bool) -> dict:
    import torch

    from hymt.engine.startup import start
    from hymt.languages import resolve
    from hymt.planner.decide import decision_for
    from hymt.planner.gpu import apply_memory_cap
    from hymt.prompts import Sampling
    from hymt.settings import Settings

    settings = Settings(
        model=str(model_dir),
        gpu_memory_gb=card,
        profile=profile,
        max_new_tokens=64,
        compile_cache_dir="/tmp/hymt-compile",
    )
    decision = decision_for(settings)
    apply_memory_cap(card)
    phases = []
    began = time.perf_counter()
    engine = start(settings, decision, lambda p: phases.append((p, round(time.perf_counter() - began, 1))))
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
    }
    greedy = Sampling(greedy=True)
    model = engine.runner.loaded.model
    if identity:
        # Greedy tokens against `generate` on the same weights; bf16 kernels differ, so count the shared prefix.
        matches = []
        for text, source, target in SENTENCES[:4]:
            job = engine.submit([(text, resolve(source))], resolve(target), greedy)
            job.wait(600)
            seq = job.sequences[0]
            ids = torch.tensor([seq.prompt_ids], device=engine.runner.device)
            with torch.inference_mode():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=seq.max_new_tokens,
                    do_sample=False,
                    repetition_penalty=1.05,
                    eos_token_id=engine.runner.loaded.stop_ids,
                    pad_token_id=engine.runner.loaded.pad_id,
                )
            reference = out[0, ids.shape[1] :].tolist()
            same = next(
                (i for i, (a, b) in enumerate(zip(reference, seq.output_ids)) if a != b),
                min(len(reference), len(seq.output_ids)),
            )
            matches.append({"tokens": len(seq.output_ids), "same_prefix": same, "prompt_ids": seq.prompt_ids})
        record["greedy_vs_generate"] = matches
        record["logits_vs_transformers"] = compare_logits(engine, [m["prompt_ids"] for m in matches])
        for m in matches:
            del m["prompt_ids"]
    speeds = {}
    for rows in sorted({1, 16, 64, engine.scheduler.max_in_flight}):
        items = [(SENTENCES[i % len(SENTENCES)][0], resolve(SENTENCES[i % len(SENTENCES)][1])) for i in range(rows)]
        before = dict(engine.runner.stats.steps), engine.runner.stats.step_s["decode"]
        t0 = time.perf_counter()
        jobs = [engine.submit([item], resolve("de"), greedy, min_new_tokens=64) for item in items]
        for job in jobs:
            job.wait(600)
        elapsed = time.perf_counter() - t0
        steps = engine.runner.stats.steps["decode"] - before[0]["decode"]
        speeds[rows] = {
            "tok_s": round(sum(j.tokens_out for j in jobs) / elapsed, 1),
            "ms_per_decode_step": round((engine.runner.stats.step_s["decode"] - before[1]) * 1000 / max(1, steps), 2),
        }
    record["speed_by_rows"] = speeds
    record["oom_events"] = engine.runner.stats.oom_events
    record["peak_reserved_gb"] = round(torch.cuda.max_memory_reserved() / GIB, 2) if torch.cuda.is_available() else 0
    engine.stop()
    return record


def compare_logits(engine, prompts: list[list[int]]) -> list[dict]:
    """Next-token logits of each prompt from the engine's forward (its attention kernel, compiled pieces and KV
    arena) against transformers' own forward on the same weights: relative error and whether the top token
    agrees. On random weights the logits are nearly flat, so greedy tokens part at the first bf16 rounding
    difference; the logits show whether the two compute the same function."""
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
        with torch.inference_mode():
            theirs = runner.loaded.model(torch.tensor([ids], device=device)).logits[0, -1].float()
        results.append(
            {
                "relative_error": round(((ours - theirs).norm() / theirs.norm()).item(), 5),
                "cosine": round(torch.nn.functional.cosine_similarity(ours, theirs, dim=0).item(), 6),
                "same_top1": bool(ours.argmax() == theirs.argmax()),
            }
        )
    return results


# -- serve: the engines as users reach them -------------------------------------------------------------------
def _server(engine: str, model_dir: Path, card: float, port: int, new_tokens: int, env: dict) -> list[str]:
    if engine == "seed":
        return [
            sys.executable,
            str(ROOT / "bench" / "seed_server.py"),
            "--model",
            str(model_dir),
            "--card",
            str(card),
            "--port",
            str(port),
            "--max-new-tokens",
            str(new_tokens),
        ]
    env["PYTHONPATH"] = _pythonpath()
    return hymt_serve(model_dir, port)


def hymt_serve(model_dir: Path, port: int) -> list[str]:
    """The command that serves `model_dir` on localhost (the package found through PYTHONPATH: see _pythonpath)."""
    return [
        sys.executable,
        "-m",
        "hymt",
        "serve",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def _pythonpath() -> str:
    """The package first, then whatever the environment adds (the wheels carried to the GPU)."""
    return os.pathsep.join(p for p in (str(ROOT / "app"), os.environ.get("PYTHONPATH", "")) if p)


def _engine_env(card: float | None, new_tokens: int) -> dict:
    """The server's settings on a simulated card of `card` GiB; None: the CPU profile."""
    where = {"HYMT_PROFILE": "cpu"} if card is None else {"HYMT_GPU_MEMORY_GB": str(card)}
    return {
        **os.environ,
        **where,
        "HYMT_MAX_NEW_TOKENS": str(new_tokens),
        "HYMT_COMPILE_CACHE_DIR": "/tmp/hymt-compile",
        "HYMT_LOG_LEVEL": "warning",
        "TOKENIZERS_PARALLELISM": "false",
    }


def serve_engine(engine: str, model_dir: Path, card: float, args, log) -> list[dict]:
    env = _engine_env(card, args.new_tokens)
    port = 8100 + int(os.environ.get("CUDA_VISIBLE_DEVICES", "0") or 0)
    url = f"http://127.0.0.1:{port}"
    base = {"run": args.run, "card_gb": card, "engine": ENGINE_NAMES[engine]}
    started = time.perf_counter()
    process = subprocess.Popen(
        _server(engine, model_dir, card, port, args.new_tokens, env), env=env, stdout=log, stderr=subprocess.STDOUT
    )
    records = []
    try:
        with Watcher(url, process.pid) as watcher:  # start-up: the warm-up's peak counts too
            health = wait_healthy(url, process, args.startup_timeout)
        base.update(profile=health.get("profile"), startup_s=round(time.perf_counter() - started, 1))
        peak = watcher.peak_gb
        deadline = args.seed_deadline if engine == "seed" else args.deadline
        target = Hymt(url)
        scenarios = [lambda c=c, k=k: run_clients(target, c, k, deadline) for c, k in CLIENTS]
        if engine == "seed":
            scenarios.append(lambda: _sequential_document(url, args.seed_deadline, args))
        for scenario in scenarios:
            with Watcher(url, process.pid) as watcher:
                record = {**base, **scenario()}
            peak = max(peak, watcher.peak_gb)
            records.append(
                {
                    **record,
                    "peak_reserved_gb": round(peak, 2),
                    "max_in_flight": watcher.max_in_flight,
                    "oom_events": int(metric(url, "hymt_oom_recoveries")),
                }
            )
    except Exception as exc:  # noqa: BLE001 - a server that fails is a result too
        records.append({**base, "scenario": "clients", "error": f"{type(exc).__name__}: {exc}"[:400]})
    finally:
        stop(process)
    if engine == "hymt" and args.document:
        records.append({**base, **_document(model_dir, card, args, log)})
    return records


def _sequential_document(url: str, deadline_s: float, args) -> dict:
    """The seed-style server has no document path: the document's lines one request at a time, until the deadline."""
    lines = document_lines(args.document_segments)
    tokens_before = metric(url, "hymt_tokens_out")
    started = time.perf_counter()
    done = 0
    with httpx.Client() as session:
        for line in lines:
            remaining = started + deadline_s - time.perf_counter()
            if remaining <= 0:
                break
            try:
                session.post(f"{url}/translate", json={"q": line, "source": "en", "target": "de"}, timeout=remaining)
            except httpx.TimeoutException:
                break
            done += 1
    elapsed = time.perf_counter() - started
    tokens = metric(url, "hymt_tokens_out") - tokens_before
    return {
        "scenario": "document",
        "clients": 1,
        "requests": len(lines),
        "completed": done,
        "seconds": round(elapsed, 2),
        "tokens_out": int(tokens),
        "tok_s": round(tokens / elapsed, 1),
        "p50_s": None,
        "p95_s": None,
    }


def _document(model_dir: Path, card: float, args, log) -> dict:
    """`hymt translate FILE --stats` on a 2,000-line document."""
    path = Path(tempfile.mkdtemp()) / "document.txt"
    path.write_text("\n".join(document_lines(args.document_segments)) + "\n", encoding="utf-8")
    env = _engine_env(card, args.new_tokens)
    env["PYTHONPATH"] = _pythonpath()
    cmd = [
        sys.executable,
        "-m",
        "hymt",
        "translate",
        str(path),
        "--model",
        str(model_dir),
        "--from",
        "en",
        "--to",
        "de",
        "--stats",
    ]
    head = {"scenario": "document", "clients": 1}
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.document_timeout)
    except subprocess.TimeoutExpired:
        return {**head, "error": f"timed out after {args.document_timeout} s"}
    log.write(proc.stderr[-4000:])
    stats = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines() if line.startswith('{"stats"')]
    if proc.returncode != 0 or not stats:
        return {**head, "error": f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}"}
    result = json.loads(stats[-1])["stats"]
    return {
        **head,
        "requests": args.document_segments,
        "completed": result["segments_done"],
        "seconds": result["seconds"],
        "tokens_out": result["tokens_out"],
        "tok_s": round(result["tokens_out"] / result["seconds"], 1),
        "p50_s": None,
        "p95_s": None,
        "startup_s": result["startup_s"],
        "peak_reserved_gb": result["peak_reserved_gb"],
        "oom_events": result["oom_events"],
        "max_in_flight": result.get("max_in_flight"),
        "profile": result.get("profile"),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def single_stream(model_dir: Path, card: float, args, log) -> dict:
    """hymt's engine in-process, one segment decoding (bench/profile_step.py, which profiles the step too)."""
    out = args.out.parent / f"profile-{card:g}gb.json"
    env = {**os.environ, "PYTHONPATH": _pythonpath(), "TOKENIZERS_PARALLELISM": "false"}
    head = {"run": args.run, "engine": "hymt", "scenario": "single_stream", "card_gb": card, "clients": 1}
    try:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "profile_step.py"),
                "--model-dir",
                str(model_dir),
                "--card",
                str(card),
                "--out",
                str(out),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=240,
        )
        result = json.loads(out.read_text())
    except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
        return {**head, "error": f"{type(exc).__name__}: {exc}"[:300]}
    if proc.returncode != 0:
        return {**head, "error": f"exit {proc.returncode}"}
    # tok_s: decoding alone, as llama-bench's tg128 counts; job_tok_s: a whole job, its prefill included.
    greedy, official = result["job"]["greedy"], result["job"]["official"]
    return {
        **head,
        "profile": result["profile"],
        "tok_s": greedy["decode_tok_s"],
        "job_tok_s": greedy["tok_s"],
        "tok_s_official_sampling": official["decode_tok_s"],
        "graph_replay_ms": result.get("graph_replay_ms"),
        "p50_s": None,
        "p95_s": None,
        "oom_events": 0,
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
        for kind in llama.TYPES:  # llama.cpp starts in seconds: it gets a grace the slower phases do not
            gguf, bin_dir = Path(prepared["ggufs"][kind]), Path(prepared["bin"])
            if due(f"llama.cpp {kind}", grace=args.budget_s / 4):
                add(llama.single_stream(bin_dir, gguf, kind, {"run": args.run}))
                add(llama.serve(bin_dir, gguf, kind, CLIENTS, args.new_tokens, args.deadline, {"run": args.run}, log))
    for card in (12.0, 24.0):
        if due(f"hymt single stream {card:g} GB", grace=args.budget_s / 4):
            add([single_stream(args.model_dir, card, args, log)])
    results["seconds"] = round(time.monotonic() - began, 1)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    log.close()
    return results


def llama_cpp(args, run: str) -> list[dict]:
    """llama.cpp on the same checkpoint: llama-bench's single stream and llama-server under the same load, for
    each GGUF type (Q4_K_M standing for the 8-16 GB cards, BF16 for 24 GB)."""
    base = {"run": run}
    with open(args.out.with_suffix(".llama.log"), "w") as log:
        prepared = llama.prepare(args.llama_pack, args.model_dir, Path(args.llama_work), log, [])
        records = [{**base, "engine": "llama.cpp", "scenario": "prepare", **prepared}]
        for kind in llama.TYPES:
            gguf, bin_dir = Path(prepared["ggufs"][kind]), Path(prepared["bin"])
            records += llama.single_stream(bin_dir, gguf, kind, base)
            records += llama.serve(bin_dir, gguf, kind, CLIENTS, args.new_tokens, args.deadline, base, log)
    return records


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["build", "check", "serve", "llama", "standard"])
    parser.add_argument("--model-dir", type=Path, default=Path("/tmp/hymt-7b"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "serve.json")
    parser.add_argument("--cards", default="12,24,8,16")
    parser.add_argument("--card", type=float, default=24)
    parser.add_argument("--profile", default="auto")
    parser.add_argument("--identity", action="store_true")
    parser.add_argument("--engines", default="hymt,seed")
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
    parser.add_argument("--document-timeout", type=float, default=420)
    args = parser.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.command == "build":
        print(json.dumps(build(args.model_dir)), flush=True)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.command == "check":
        result = {"environment": environment(), **check(args.model_dir, args.card, args.profile, args.identity)}
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result), flush=True)
        return 0
    if args.command == "standard":
        standard(args)
        return 0
    if args.command == "llama":
        records = llama_cpp(args, args.run)
        args.out.write_text(
            json.dumps({"environment": environment(), "new_tokens": args.new_tokens, "records": records}, indent=2)
            + "\n"
        )
        for record in records:
            print(json.dumps(record), flush=True)
        return 0
    results = {"environment": environment(), "new_tokens": args.new_tokens, "records": []}
    with open(args.out.with_suffix(".log"), "w") as log:
        for card in (float(c) for c in args.cards.split(",")):
            for engine in args.engines.split(","):
                for record in serve_engine(engine, args.model_dir, card, args, log):
                    results["records"].append(record)
                    args.out.write_text(json.dumps(results, indent=2) + "\n")
                    print(json.dumps(record), flush=True)
                log.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
