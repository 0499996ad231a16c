"""humming-kernels' 4-bit matmul (and the head's 8-bit one) at one row, as the int4 profiles decode a single segment:
the configuration humming's heuristics pick for each layer shape of the 7B, against candidates around it (one
setting changed at a time, the best kept: block shape, stages, CTAs per SM, stream-K), each timed in a CUDA graph
of 20 calls and checked against the heuristic's output. Prints one JSON line per candidate and per shape's best,
so that a cut-off run still says what it found (issue #33: the 4-bit step at 43 % of the memory bandwidth).

    python bench/tune_int4.py [--budget-s 300] [--shapes 7b|1.8b]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

SHAPES = {  # (n, k, weight dtype): qkv, o, gate/up, down, the head (its rows padded to 128 as weights.Int8Head does)
    "7b": [(6144, 4096, "uint4"), (4096, 4096, "uint4"), (28672, 4096, "uint4"), (4096, 14336, "uint4")]
    + [(128256, 4096, "uint8")],
    "1.8b": [(3072, 2048, "uint4"), (2048, 2048, "uint4"), (12288, 2048, "uint4"), (2048, 6144, "uint4")]
    + [(120832, 2048, "uint8")],
}
STEPS = {  # one setting at a time
    "num_ctas_per_sm": (1, 2, 3, 4),
    "num_stages": (2, 3, 4, 6, 8),
    "use_stream_k": (True, False),
    "block_n": (64, 128, 256),
    "block_k": (64, 128, 256),
}


def timed(fn, calls: int = 20, replays: int = 10) -> float:
    """Microseconds a call, from a CUDA graph of `calls` calls replayed `replays` times (the median replay)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return sorted(times)[len(times) // 2]


def changed(config: dict, key: str, value) -> dict | None:
    """The config with one setting changed; None where that is the config itself."""
    new = json.loads(json.dumps(config))
    if key in ("block_n", "block_k"):
        block, warp = list(new["block_shape"]), list(new["warp_shape"])
        axis = 1 if key == "block_n" else 2
        block[axis] = value
        warp[axis] = min(warp[axis], value)
        new["block_shape"], new["warp_shape"] = block, warp
    else:
        new[key] = value
    return None if new == config else new


def tune(n: int, k: int, dtype: str, deadline: float) -> dict:
    from humming.layer import HummingLayer
    from humming.tune import get_heuristics_config

    torch.manual_seed(0)
    layer = HummingLayer(
        shape_n=n, shape_k=k, weight_config={"dtype": dtype, "group_size": 128}, torch_dtype=torch.bfloat16
    ).cuda()
    layer.load_from_unquantized(torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.02)
    layer.transform()
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    heuristic = get_heuristics_config(layer.humming_config, shape_m=1)
    if isinstance(heuristic, list):  # intervals of rows: the one that holds a single row
        heuristic = next(c for lo, hi, c in heuristic if lo <= 1 <= hi)
    want = layer(x).float()
    weight_bytes = n * k * (4 if dtype == "uint4" else 8) / 8 + n * (k // 128) * 2
    base_us = timed(lambda: layer(x))
    best, best_us, tried = heuristic, base_us, 0
    print(json.dumps({"n": n, "k": k, "dtype": dtype, "heuristic": heuristic, "us": round(base_us, 2)}), flush=True)
    for key, values in STEPS.items():
        for value in values:
            candidate = changed(best, key, value)
            if candidate is None or time.monotonic() > deadline:
                continue
            tried += 1
            try:
                got = layer(x, tuning_config=candidate).float()
                torch.cuda.synchronize()
                if not torch.allclose(got, want, rtol=2e-2, atol=2e-2 * want.abs().max().item()):
                    print(json.dumps({"n": n, "k": k, key: value, "error": "differs"}), flush=True)
                    continue
                us = timed(lambda c=candidate: layer(x, tuning_config=c))
            except Exception as exc:  # noqa: BLE001 - a configuration humming cannot build is skipped
                print(json.dumps({"n": n, "k": k, key: value, "error": f"{type(exc).__name__}: {exc}"[:200]}))
                continue
            print(json.dumps({"n": n, "k": k, key: value, "us": round(us, 2)}), flush=True)
            if us < best_us:
                best, best_us = candidate, us
    return {
        "n": n,
        "k": k,
        "dtype": dtype,
        "heuristic_us": round(base_us, 2),
        "heuristic_tb_s": round(weight_bytes / base_us / 1e6, 2),
        "best_us": round(best_us, 2),
        "best_tb_s": round(weight_bytes / best_us / 1e6, 2),
        "tried": tried,
        "best": best,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", choices=list(SHAPES), default="7b")
    parser.add_argument("--budget-s", type=float, default=300)
    args = parser.parse_args()
    shapes = SHAPES[args.shapes]
    began = time.monotonic()
    for i, (n, k, dtype) in enumerate(shapes):
        # Each shape its share of what is left, so that every shape is tried.
        left = args.budget_s - (time.monotonic() - began)
        result = tune(n, k, dtype, time.monotonic() + left / (len(shapes) - i))
        print(json.dumps({"best_of": f"{n}x{k}", **result}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
