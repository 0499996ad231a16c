"""The Mixture of Experts' decoding kernels on Hy-MT2-30B-A3B's shapes (128 experts, top-8, hidden 2048, expert
width 768), in 4 bits as the int4 profiles hold them, with random weights: for each number of rows, the routed
experts' two matmuls as a matvec a slot (`experts_by_slot`, in several tilings) and as grouped matmuls over the
slots sorted by expert (the rule's sizes), in us a layer, over as many layers as `--layers` so that the cache
holds none; and the routing (the router's matmul in torch and the choice in a kernel, against one kernel for
both) and a layer's end (torch's sum of the slots, fp32 combine and add_rms_norm, against combine_add_rms_norm);
and the matvec by slot's variants in bench/moe_gemv_variants.py, each with its distance from the engine's.
Each timed as the decoding step runs it: captured in a CUDA graph and replayed (kernels/matvec.graph_time).

    PYTHONPATH=app python3 bench/moe_kernels.py --out bench/results/moe-kernels.json
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
from hymt.engine.experts_int4 import GROUP_SIZE
from hymt.engine.kernels.matvec import graph_time
from hymt.engine.kernels.moe import Int4Weights, block_sizes
from moe_gemv_variants import VARIANTS, experts_by_slot_variant  # bench/, the script's folder

EXPERTS, TOP_K, HIDDEN, WIDTH = 128, 8, 2048, 768
# (block_n, num_warps, num_stages) of the matvec by slot.
BY_SLOT = [*itertools.product((8, 16, 32), (4, 8), (3,)), (16, 4, 1)]


def random_int4(n: int, k: int) -> Int4Weights:
    """Experts' weights [EXPERTS, n, k] in 4 bits: random bytes, scales about a normal weight's."""
    packed = torch.randint(0, 256, (EXPERTS, n, k // 2), dtype=torch.uint8, device="cuda")
    scales = torch.full((EXPERTS, n, k // GROUP_SIZE), 0.002, dtype=torch.bfloat16, device="cuda")
    return Int4Weights(packed, scales, -7.5 * scales, GROUP_SIZE)


def layer_bytes(index: torch.Tensor, layer: tuple[Int4Weights, Int4Weights]) -> int:
    """The bytes of the experts a step's routing reads (each used expert's weights once)."""
    per_expert = sum(w.packed[0].numel() + 2 * 2 * w.scales[0].numel() for w in layer)
    return int(index.unique().numel()) * per_expert


def measure(rows: int, layers: list, router: torch.Tensor, bias: torch.Tensor, arrived: torch.Tensor) -> dict:
    """One number of rows: each kernel's us a layer (and the experts' GB/s of the weights they read)."""
    x = torch.randn(rows, HIDDEN, device="cuda").to(torch.bfloat16)
    weights, index = kernels.route_experts(x, router, bias, TOP_K, 2.826)
    gigabytes = layer_bytes(index, layers[0]) / 1e9
    result: dict = {"slots": rows * TOP_K, "experts_read": int(index.unique().numel())}

    def rate(us: float) -> dict:
        return {"us": round(us, 2), "gb_s": round(gigabytes / (us * 1e-6), 1)}

    if rows * TOP_K <= EXPERTS:
        by_slot = {}
        for block_n, warps, stages in BY_SLOT:
            options = {"block_n": block_n, "num_warps": warps, "num_stages": stages}
            us = graph_time(
                layers, lambda layer, o=options: kernels.experts_by_slot(x, layer[0], layer[1], index, weights, **o)
            )
            by_slot[f"n{block_n}-w{warps}-s{stages}"] = rate(us)
        best = min(by_slot, key=lambda key: by_slot[key]["us"])
        result["by_slot"] = by_slot
        result["by_slot_best"] = {best: by_slot[best]}
        # The variants of bench/moe_gemv_variants.py at the tilings that won so far, and how far from the engine's.
        gate_up, down = layers[0]
        want = kernels.experts_by_slot(x, gate_up, down, index, weights)
        for variant, block_n in itertools.product(VARIANTS, (16, 32)):

            def call(layer, v=variant, n=block_n):
                return experts_by_slot_variant(x, layer[0], layer[1], index, weights, v, block_n=n)

            us = graph_time(layers, call)
            got = call(layers[0])
            gap = ((got - want).abs().max() / want.abs().max()).item()
            result[f"by_slot_{variant}_n{block_n}"] = {**rate(us), "gap": round(gap, 6)}
    sizes = block_sizes(rows * TOP_K, EXPERTS)
    grouped = {}
    for block_m in sorted({16, sizes["block_m"]}):
        options = dict(sizes, block_m=block_m, block_n=64 if block_m == 16 else 128)
        us = graph_time(
            layers, lambda layer, o=options: kernels.expert_outputs(x, layer[0], layer[1], index, weights, **o)
        )
        grouped[f"m{block_m}-n{options['block_n']}"] = rate(us)
    result["grouped"] = grouped
    routers = [router.clone() for _ in layers]  # each layer's own, as the model reads them
    result["route_torch_matmul_us"] = round(
        graph_time(routers, lambda r: kernels.route_experts(x, r, bias, TOP_K, 2.826)), 2
    )
    if rows <= arrived.numel():
        for part in (2, 4, 8, 16):
            result[f"route_one_kernel_parts_of_{part}_us"] = round(
                graph_time(routers, lambda r, p=part: kernels.route_experts(x, r, bias, TOP_K, 2.826, arrived, p)), 2
            )
    slots = [torch.randn(rows, TOP_K, HIDDEN, device="cuda") for _ in range(4)]
    hidden, shared = (torch.randn(rows, HIDDEN, device="cuda").to(torch.bfloat16) for _ in range(2))
    norm = torch.ones(HIDDEN, dtype=torch.bfloat16, device="cuda")

    def torch_end(s: torch.Tensor) -> object:
        routed = s.sum(dim=1).to(torch.bfloat16)
        return kernels.add_rms_norm(hidden, (routed.float() + shared.float()).to(torch.bfloat16), norm, 1e-6)

    result["layer_end_torch_us"] = round(graph_time(slots, torch_end), 2)
    result["layer_end_kernel_us"] = round(
        graph_time(slots, lambda s: kernels.combine_add_rms_norm(hidden, s, shared, norm, 1e-6)), 2
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--rows", default="1,2,4,8,16,32,64")
    args = parser.parse_args()
    kernels.enable_pdl(torch.device("cuda"))
    torch.manual_seed(0)
    layers = [(random_int4(2 * WIDTH, HIDDEN), random_int4(HIDDEN, WIDTH)) for _ in range(args.layers)]
    router = torch.randn(EXPERTS, HIDDEN, device="cuda").to(torch.bfloat16) * 0.02
    bias = torch.randn(EXPERTS, device="cuda") * 0.01
    arrived = torch.zeros(kernels.PROGRAMS, dtype=torch.int32, device="cuda")
    record: dict = {"gpu": torch.cuda.get_device_name(), "pdl": kernels.common.PDL, "rows": {}}
    for rows in (int(r) for r in args.rows.split(",")):
        result = measure(rows, layers, router, bias, arrived)
        record["rows"][rows] = result
        print(json.dumps({"rows": rows, **{k: v for k, v in result.items() if k != "by_slot"}}), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
