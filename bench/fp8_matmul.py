"""The fp8 tiers' matmul at a decoding step's rows, on the 7B's layer shapes: torch._scaled_mm (what the fp8 tiers
run from two rows up) against the Triton kernel that reads each weight byte once (kernels/fp8_matmul.py) in
several tilings, the input's quantization (one kernel) included in both. Each timed as the decoding step runs it:
over `--layers` layers' weights (so that the cache holds none), captured in a CUDA graph and replayed
(kernels/matvec.graph_time); us a layer and the weights' GB/s. Also each tiling's largest difference from
torch._scaled_mm, over the output's largest value (both round to bf16: about 2^-8 where they differ by a unit),
and the tiling the engine takes (`tiling`, `rule`).

    PYTHONPATH=app python3 bench/fp8_matmul.py --out OUT/fp8-matmul.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

import torch

from hymt.engine import kernels
from hymt.engine.fp8 import Fp8Linear, scaled_matmul
from hymt.engine.kernels.fp8_matmul import fp8_matmul, tiling
from hymt.engine.kernels.matvec import graph_time

# The 7B's linear layers (N, K) as the engine fuses them: q/k/v, o, gate/up, down.
SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
ROWS = (2, 8, 16, 32, 64, 128, 256)
# (block_n, block_k, num_warps, num_stages); splits from 1 up to 8 where they cut K into whole tiles.
TILINGS = [*itertools.product((32, 64, 128), (128, 256), (4,), (4,)), (128, 128, 8, 4)]
SPLITS = (1, 2, 4, 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rows", default=",".join(map(str, ROWS)))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    kernels.enable_pdl(torch.device("cuda"))
    results: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "shapes": {}}
    for name, (n, k) in SHAPES.items():
        layers = [
            Fp8Linear.quantized(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02)
            for _ in range(args.layers)
        ]
        by_rows = {}
        for rows in map(int, args.rows.split(",")):
            x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)

            def rate(us: float, gigabytes: float = n * k / 1e9) -> dict:
                return {"us": round(us, 2), "gb_s": round(gigabytes / (us * 1e-6), 1)}

            torch_us = graph_time(layers, lambda layer, x=x: scaled_matmul(x, layer.weight, layer.scale, triton=True))
            want = scaled_matmul(x, layers[0].weight, layers[0].scale, triton=True).float()
            tilings = {}
            for (block_n, block_k, warps, stages), splits in itertools.product(TILINGS, SPLITS):
                if k % (block_k * splits) or k // splits < 2 * block_k:
                    continue
                options = dict(block_n=block_n, block_k=block_k, splits=splits, num_warps=warps, num_stages=stages)

                def call(layer, x=x, options=options):
                    q, row_scale = kernels.quantize_rows(x)
                    return fp8_matmul(q, row_scale, layer.weight, layer.scale, x.dtype, **options)

                try:
                    us = graph_time(layers, call)
                    gap = (call(layers[0]).float() - want).abs().max().item() / want.abs().max().item()
                except Exception as exc:  # noqa: BLE001 - a tiling that does not compile here is recorded as such
                    tilings[f"n{block_n}-k{block_k}-w{warps}-s{stages}-p{splits}"] = {"error": repr(exc)[:200]}
                    continue
                tilings[f"n{block_n}-k{block_k}-w{warps}-s{stages}-p{splits}"] = {**rate(us), "gap": round(gap, 5)}
            timed = {key: v for key, v in tilings.items() if "us" in v}
            best = min(timed, key=lambda key: timed[key]["us"]) if timed else None
            rule = tiling(k) or {}
            rule_key = f"n{rule.get('block_n')}-k{rule.get('block_k')}-w4-s4-p{rule.get('splits')}"
            by_rows[rows] = {"scaled_mm": rate(torch_us), "best": {best: timed[best]} if best else None}
            by_rows[rows]["rule"] = {"tiling": rule_key, **timed[rule_key]} if rule_key in timed else None
            by_rows[rows]["tilings"] = tilings
            line = {"shape": name, "rows": rows, **{key: by_rows[rows][key] for key in ("scaled_mm", "best", "rule")}}
            print(json.dumps(line), flush=True)
        results["shapes"][name] = {"n": n, "k": k, "by_rows": by_rows}
    # A 7B step's 32 layers of the four, with each one's best tiling against torch._scaled_mm.
    for rows in map(int, args.rows.split(",")):
        torch_ms = sum(results["shapes"][s]["by_rows"][rows]["scaled_mm"]["us"] for s in SHAPES) * 32 / 1000
        bests = [results["shapes"][s]["by_rows"][rows]["best"] for s in SHAPES]
        triton_ms = sum(next(iter(b.values()))["us"] for b in bests if b) * 32 / 1000 if all(bests) else None
        rules = [results["shapes"][s]["by_rows"][rows]["rule"] for s in SHAPES]
        rule_ms = sum(r["us"] for r in rules if r) * 32 / 1000 if all(rules) else None
        print(
            json.dumps(
                {"rows": rows, "step_linears_ms": {"scaled_mm": round(torch_ms, 3), "best": triton_ms, "rule": rule_ms}}
            )
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
