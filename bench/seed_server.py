"""The seed-style server the benchmark compares against: what a first translation server looks like, a lock
around plain transformers `generate`, one request at a time, the model's recommended sampling. bf16 when the
simulated card holds it, else bitsandbytes NF4. It speaks the subset of the LibreTranslate API the benchmark
uses (`POST /translate`, `GET /health`) and counts generated tokens on `/metrics` under hymt's names.

    python bench/seed_server.py --model DIR --card 12 --port 8000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

GIB = 1024**3


def create_app(model_dir: str, card_gb: float, max_new_tokens: int) -> Starlette:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig

    from hymt.cleanup import max_new_tokens as budget
    from hymt.languages import resolve
    from hymt.planner.gpu import apply_memory_cap
    from hymt.prompts import render, user_message

    apply_memory_cap(card_gb)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    bf16_fits = card_gb >= 16 or device == "cpu"
    quantization = (
        None
        if bf16_fits
        else BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
    )
    tokenizer: Any = AutoTokenizer.from_pretrained(model_dir)
    model: Any = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.bfloat16, device_map={"": device}, quantization_config=quantization
    )
    lock = asyncio.Lock()  # first come, first served
    counters = {"tokens_out": 0, "oom": 0}
    stop = tokenizer.convert_tokens_to_ids("<|eos|>")

    def translate_one(text: str, source, target) -> str:
        ids = tokenizer(
            render(tokenizer, user_message(source, target, text)), add_special_tokens=False, return_tensors="pt"
        ).to(device)
        new = budget(len(tokenizer(text, add_special_tokens=False)["input_ids"]), max_new_tokens)
        try:
            out = model.generate(
                **ids,
                max_new_tokens=new,
                do_sample=True,
                top_k=20,
                top_p=0.6,
                temperature=0.7,
                repetition_penalty=1.05,
                eos_token_id=stop,
                pad_token_id=tokenizer.pad_token_id,
            )
        except torch.OutOfMemoryError:
            counters["oom"] += 1
            torch.cuda.empty_cache()
            raise
        generated = out[0, ids["input_ids"].shape[1] :]
        counters["tokens_out"] += int(generated.shape[0])
        return tokenizer.decode(generated, skip_special_tokens=True)

    def translate(request_body: dict) -> dict:
        source = None if request_body.get("source", "auto") == "auto" else resolve(request_body["source"])
        target = resolve(request_body["target"])
        q = request_body["q"]
        texts = q if isinstance(q, list) else [q]
        out = [translate_one(t, source, target) for t in texts]
        return {"translatedText": out if isinstance(q, list) else out[0]}

    async def translate_route(request: Request) -> JSONResponse:
        """One request at a time, in arrival order; one whose client has gone while it waited is dropped, not run
        (the benchmark's clients give up at a deadline, and their requests must not run into the next measurement)."""
        body = await request.json()
        async with lock:
            if await request.is_disconnected():
                return JSONResponse({"error": "client gone"}, status_code=499)
            return JSONResponse(await run_in_threadpool(translate, body))

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "status": "healthy",
                "profile": "bf16" if bf16_fits else "nf4",
                "in_flight": 1,
                "gpu_memory_used_gb": round(torch.cuda.memory_reserved() / GIB, 3) if device == "cuda" else 0,
            }
        )

    async def metrics(request: Request) -> PlainTextResponse:
        return PlainTextResponse(
            f"hymt_tokens_out_total {counters['tokens_out']}\nhymt_oom_recoveries_total {counters['oom']}\n"
        )

    return Starlette(
        routes=[
            Route("/translate", translate_route, methods=["POST"]),
            Route("/health", health),
            Route("/metrics", metrics),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--card", type=float, required=True)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.model, args.card, args.max_new_tokens), host="127.0.0.1", port=args.port, log_level="warning"
    )


if __name__ == "__main__":
    main()
