"""The sampler's step on the GPU, as a decoding step's CUDA graph replays it, for 1 to 64 rows of the 7B's 128k
vocabulary with the official sampling: the kernels' whole draw (kernels.sample) against the vocabulary pass with
torch's top-k and draw after it (us per step), and of the kernels' draw its first kernel alone (each block's
candidates), so that the second's share is the difference; and the kernels' draw for the same rows greedy (each
block's best entry alone, no sort).

    PYTHONPATH=app python3 bench/sampling.py --out bench/results/sampling.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))

import torch

from hymt.engine import kernels
from hymt.engine.kernels.sampling import BLOCK, TOP, _vocabulary_pass
from hymt.engine.sampler import CAPTURED_TOP_K, Newcomer, Sampler
from hymt.engine.sampling_params import Sampling


def graph_us(call, replays: int = 50) -> float:
    """us a call, captured in a CUDA graph and replayed back to back."""
    call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    graph.replay()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return round(begin.elapsed_time(end) * 1000 / replays, 1)


@torch.inference_mode()
def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--vocab", type=int, default=128167)
    args = parser.parse_args()
    device = torch.device("cuda")
    kernels.enable_pdl(device)
    results = {"gpu": torch.cuda.get_device_name(0), "vocab": args.vocab, "rows": {}}
    for rows in (1, 4, 16, 64):
        sampler = Sampler(rows, args.vocab, stop_ids=[1], device=device)
        sampler.admit([Newcomer(row, Sampling(), 0, 0, list(range(0, 2000, 7))) for row in range(rows)])
        logits = torch.randn(rows, args.vocab, device=device, dtype=torch.bfloat16) * 3
        index = torch.arange(rows, device=device)
        # A bound past CAPTURED_TOP_K takes the torch path, with the same rows.
        kernel, torch_draw = (
            graph_us(lambda bound=bound, s=sampler, x=logits, i=index: s.sample(x, i, bound))
            for bound in (CAPTURED_TOP_K, CAPTURED_TOP_K + 1)
        )
        parts = -(-args.vocab // BLOCK)
        candidates = torch.empty((rows, parts * TOP), dtype=torch.int64, device=device)
        blocks = graph_us(
            lambda c=candidates, s=sampler, x=logits, i=index: _vocabulary_pass(
                x, i, s.seen, s.floats[2], s.ints[1], s.ints[2], s.stop_mask, (c, s.floats[3]), BLOCK, TOP
            )
        )
        # The same rows greedy: each block's best alone, no sort.
        sampler.admit([Newcomer(row, Sampling(greedy=True), 0, 0, list(range(0, 2000, 7))) for row in range(rows)])
        greedy = graph_us(lambda s=sampler, x=logits, i=index: s.sample(x, i, CAPTURED_TOP_K))
        results["rows"][rows] = {
            "kernels_us": kernel,
            "candidates_us": blocks,
            "torch_top_k_us": torch_draw,
            "greedy_kernels_us": greedy,
        }
        print(rows, results["rows"][rows], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
