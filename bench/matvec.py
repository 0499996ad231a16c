"""The one-row matvec against cuBLAS for the 7B's bf16 layer shapes (32 weights of each, as in the model, so the
cache holds none): what `kernels.tune_matvec` chooses at start-up on this GPU, and both times per call (us); the
down projection gated (SiLU(gate) * up read from the gate/up output) against the compiled SiLU and cuBLAS.

    PYTHONPATH=app python3 bench/matvec.py --out bench/results/matvec.json [--no-pdl]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

import torch

from hymt.engine import kernels
from hymt.engine.model import silu_mul

# (rows, columns) of q/k/v fused, o, gate/up fused, down, and the head.
SHAPES = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128167, 4096))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--no-pdl", action="store_true", help="kernels launched one after another, to compare")
    args = parser.parse_args()
    weights = [
        torch.randn(shape, dtype=torch.bfloat16, device="cuda") * 0.02
        for shape in SHAPES[:-1]
        for _ in range(args.layers)
    ] + [torch.randn(SHAPES[-1], dtype=torch.bfloat16, device="cuda") * 0.02]
    if not args.no_pdl:
        kernels.enable_pdl(torch.device("cuda"))
    chosen = kernels.tune_matvec(weights, frozenset({SHAPES[3]}), torch.compile(silu_mul, dynamic=True), keep_all=True)
    shapes = {
        f"{n}x{k}": {"config": config, "us": us, "cublas_us": cublas} for (n, k), (config, us, cublas) in chosen.items()
    }
    record = {"gpu": torch.cuda.get_device_name(), "pdl": kernels.common.PDL, "shapes": shapes}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
