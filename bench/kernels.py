"""Weight formats for the 7B's linear layers, one decoding step's worth, at 1 to 128 rows: which kernel to serve
each card's tier with; at a prefill step's rows (`--rows 512,1152,2048`), which serves its large matmuls.

    python bench/kernels.py --out bench/results/kernels.json [--rows 1,16,64,128]

For every format, one layer of each of the 7B's seven projection shapes (q, k, v, o, gate, up, down) is quantized
from the same random bf16 weights; the seven run in sequence inside a CUDA graph (the engine replays its decoding
step as one), timed over many replays with CUDA events, and multiplied by the 32 layers. The lm_head stays bf16
in every tier and is timed on its own. Each format also reports its output's relative error against bf16 and
whether it could be captured at all (a format that cannot is of no use to a captured decoding step).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

HIDDEN, KV, FFN, VOCAB, LAYERS = 4096, 1024, 14336, 128167, 32
SHAPES = {
    "q": (HIDDEN, HIDDEN),
    "k": (KV, HIDDEN),
    "v": (KV, HIDDEN),
    "o": (HIDDEN, HIDDEN),
    "gate": (FFN, HIDDEN),
    "up": (FFN, HIDDEN),
    "down": (HIDDEN, FFN),
}  # (out, in)
GROUP = 128
# The projections as separate layers (as the checkpoint has them), and fused: q, k, v as one layer, gate and up as one.
LAYOUTS = {"split": ("q", "k", "v", "o", "gate", "up", "down"), "fused": ("qkv", "o", "gate_up", "down")}


def bf16(weight):
    return lambda x: F.linear(x, weight)


def fp8_rowwise(weight):
    """FP8 e4m3 weights with one scale per output channel, activations quantized per row at run time."""
    scale_w = weight.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / 448.0
    w8 = (weight.float() / scale_w).to(torch.float8_e4m3fn)
    w8_t, scale_w_row = w8.t(), scale_w.t().contiguous()

    def run(x):
        scale_x = x.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / 448.0
        x8 = (x.float() / scale_x).to(torch.float8_e4m3fn)
        return torch._scaled_mm(x8, w8_t, scale_a=scale_x, scale_b=scale_w_row, out_dtype=torch.bfloat16)

    return run


def nf4(weight):
    import bitsandbytes as bnb

    layer = bnb.nn.Linear4bit(
        weight.shape[1],
        weight.shape[0],
        bias=False,
        compute_dtype=torch.bfloat16,
        quant_type="nf4",
        compress_statistics=True,
    )
    layer.weight = bnb.nn.Params4bit(weight.cpu(), requires_grad=False, quant_type="nf4", compress_statistics=True)
    return layer.cuda()


def torchao_tinygemm(weight):
    from torchao.quantization import Int4WeightOnlyConfig, quantize_

    layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=torch.bfloat16, device="cuda")
    layer.weight.data.copy_(weight)
    quantize_(
        layer,
        Int4WeightOnlyConfig(
            group_size=GROUP, int4_packing_format="tile_packed_to_4d", int4_choose_qparams_algorithm="hqq"
        ),
    )
    return layer


def _asymmetric_int4(weight):
    """Min-max asymmetric 4-bit per group of GROUP inputs: (W_q - zero) * scale ~ W."""
    out, inp = weight.shape
    groups = weight.float().view(out, inp // GROUP, GROUP)
    low, high = groups.amin(-1, keepdim=True), groups.amax(-1, keepdim=True)
    scale = ((high - low) / 15).clamp(min=1e-8)
    zero = (-low / scale).round()
    q = (groups / scale + zero).round().clamp(0, 15).to(torch.uint8).view(out, inp)
    return q, scale.view(out, -1), zero.view(out, -1)


def gemlite_int4(weight):
    from gemlite.helper import A16Wn

    q, scale, zero = _asymmetric_int4(weight)
    return A16Wn(device="cuda", dtype=torch.bfloat16).from_weights(
        q, scale.to(torch.bfloat16), zero.to(torch.bfloat16), W_nbits=4, group_size=GROUP
    )


def humming_int4(weight, input_config=None):
    from humming.layer import HummingLayer

    layer = HummingLayer(
        shape_n=weight.shape[0],
        shape_k=weight.shape[1],
        weight_config={"dtype": "uint4", "group_size": GROUP},
        input_config=input_config,
        torch_dtype=torch.bfloat16,
    ).cuda()
    layer.load_from_unquantized(weight)
    layer.transform()
    return layer


def humming_int4_fp8_input(weight):
    """The same 4-bit weights with the input quantized to FP8 e4m3 per token by humming (W4A8): Hopper's FP8 tensor
    cores for a prefill step's large matmuls, where the 16-bit input runs at half their rate."""
    return humming_int4(weight, {"dtype": "float8e4m3", "input_quant_mode": "dynamic_token"})


def humming_int4_int8_input(weight):
    """The same with the input in INT8 per token: the INT8 tensor cores (as fast as FP8's on Hopper, and on Ampere,
    which has no FP8), the 4-bit weights exact in them."""
    return humming_int4(weight, {"dtype": "int8", "input_quant_mode": "dynamic_token"})


FORMATS = {
    "bf16": bf16,
    "fp8-rowwise": fp8_rowwise,
    "nf4-bnb": nf4,
    "int4-torchao-tinygemm": torchao_tinygemm,
    "int4-gemlite": gemlite_int4,
    "int4-humming": humming_int4,
    "int4-humming-fp8in": humming_int4_fp8_input,
    "int4-humming-int8in": humming_int4_int8_input,
}


def time_graph(calls: list[tuple], replays: int = 50) -> tuple[float, bool]:
    """Seconds for one pass over `calls` (layer, input), replayed in a CUDA graph (eager when capture fails)."""

    def once():
        for layer, x in calls:
            layer(x)

    for _ in range(3):
        once()
    torch.cuda.synchronize()
    captured = True
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            once()
        run = graph.replay
    except Exception:  # noqa: BLE001 - a format that cannot be captured is reported so
        captured = False
        torch.cuda.synchronize()
        run = once
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    run()
    start.record()
    for _ in range(replays):
        run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000 / replays, captured


def _input(rows: int, features: int) -> torch.Tensor:
    return torch.randn(rows, features, dtype=torch.bfloat16, device="cuda")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rows", default="1,16,64,128")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    args = parser.parse_args()
    rows = [int(r) for r in args.rows.split(",")]
    torch.manual_seed(0)
    weights = {name: torch.randn(shape, dtype=torch.bfloat16, device="cuda") * 0.02 for name, shape in SHAPES.items()}
    weights["qkv"] = torch.cat([weights["q"], weights["k"], weights["v"]])
    weights["gate_up"] = torch.cat([weights["gate"], weights["up"]])
    result: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "layers": LAYERS,
        "formats": {},
    }
    head = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, device="cuda") * 0.02
    result["lm_head_bf16_ms"] = {m: round(time_graph([(bf16(head), _input(m, HIDDEN))])[0] * 1000, 3) for m in rows}
    for name in args.formats.split(","):
        for layout in args.layouts.split(","):
            names = LAYOUTS[layout]
            entry: dict = {}
            started = time.perf_counter()
            try:
                layers = [FORMATS[name](weights[n]) for n in names]
                entry["prepare_s"] = round(time.perf_counter() - started, 1)
                x = _input(8, HIDDEN)
                with torch.inference_mode():
                    reference = F.linear(x, weights[names[-2]]).float()
                    got = layers[-2](x).float()
                entry["relative_error"] = round(((got - reference).norm() / reference.norm()).item(), 4)
                for m in rows:
                    calls = [(layer, _input(m, FFN if layer is layers[-1] else HIDDEN)) for layer in layers]
                    with torch.inference_mode():
                        seconds, captured = time_graph(calls)
                    flops = 2 * m * sum(weights[n].numel() for n in names)
                    entry[str(m)] = {
                        "step_ms": round(seconds * LAYERS * 1000, 3),
                        "tflops": round(flops / seconds / 1e12, 1),
                        "captured": captured,
                    }
                del layers
            except Exception as exc:  # noqa: BLE001 - a format that fails here is a result too
                entry["error"] = f"{type(exc).__name__}: {exc}"[:400]
            entry["seconds"] = round(time.perf_counter() - started, 1)
            result["formats"][f"{name} {layout}"] = entry
            print(json.dumps({f"{name} {layout}": entry}), flush=True)
            torch.cuda.empty_cache()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
