"""The computer's memory a Mixture of Experts takes to load for a GPU profile, on the CPU: read whole and placed
afterwards (what hymt did before engine/layerwise.py), against read layer by layer with each layer placed as soon as
it has been read (what the int4 and fp8 profiles do). Placing here quantizes a layer's experts to 4 bits and lets
them go, as the GPU takes them; the number is the process's peak anonymous memory (the file's own pages, which the
system can drop at any time, are not counted), sampled every 5 ms.

    python bench/host_memory.py [--layers 12 --experts 32] [--out FILE.json]

Each way runs in a fresh process of its own, twice. A scaled-down Hy-MT2-30B-A3B (hidden 1,024, experts of 768,
random bf16 weights) is built under a temporary folder first."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

WAYS = ("whole", "layerwise")


def build(directory: Path, layers: int, experts: int) -> float:
    """A checkpoint of the 30B-A3B's family at `layers` x `experts`; its size in GB."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from hymt.testmodel import make_test_model

    tiny = make_test_model(directory / "tiny", family="hy-mt2-30b-a3b")
    config = AutoConfig.from_pretrained(tiny)
    config.hidden_size, config.intermediate_size, config.num_hidden_layers = 1024, 2048, layers
    config.num_attention_heads, config.num_key_value_heads, config.head_dim = 8, 2, 128
    config.num_experts, config.moe_intermediate_size, config.expert_hidden_dim = experts, 768, 768
    config.mlp_layer_types = ["dense"] + ["sparse"] * (layers - 1)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(directory / "moe")
    return sum(p.numel() for p in model.parameters()) * 2 / 1e9


class PeakAnonymous:
    """The process's peak anonymous memory (RssAnon) above what it was on entry, in GB (1e9), sampled every 5 ms
    while the block runs: the memory loading really takes, not the file's pages that the system can drop."""

    def __init__(self) -> None:
        self.gb = 0.0
        self._before = self._peak = 0
        self._running = False

    @staticmethod
    def _now() -> int:
        status = Path("/proc/self/status").read_text()
        return int(re.search(r"RssAnon:\s+(\d+)", status).group(1)) * 1024  # type: ignore[union-attr]

    def _sample(self) -> None:
        while self._running:
            self._peak = max(self._peak, self._now())
            time.sleep(0.005)

    def __enter__(self) -> PeakAnonymous:
        self._before = self._peak = self._now()
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._running = False
        self._thread.join()
        self._peak = max(self._peak, self._now())
        self.gb = (self._peak - self._before) / 1e9


def measure(way: str, checkpoint: Path) -> dict:
    """Loads `checkpoint` one `way` in this process: peak anonymous memory and seconds."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from hymt.engine import layerwise, loader
    from hymt.engine.experts_int4 import Int4Experts

    def place(name: str, layer) -> None:
        if hasattr(layer.mlp, "experts"):
            experts = layer.mlp.experts
            Int4Experts(experts.gate_up_proj.data, experts.down_proj.data, torch.device("cpu"))
            layer.mlp.experts = torch.nn.Identity()

    started = time.perf_counter()
    with PeakAnonymous() as peak:
        if way == "whole":
            model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16)
            for i, layer in enumerate(model.model.layers):
                place(str(i), layer)
        else:
            config = AutoConfig.from_pretrained(checkpoint)
            loader._read(checkpoint, config, torch.bfloat16, None, None, layerwise.Placement(layer=place))
    return {"way": way, "peak_gb": round(peak.gb, 2), "s": round(time.perf_counter() - started, 1)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--experts", type=int, default=32)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--measure", choices=WAYS, help=argparse.SUPPRESS)  # one way, in a process of its own
    parser.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.checkpoint)))
        return 0
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        size = build(folder, args.layers, args.experts)
        print(f"checkpoint: {size:.2f} GB of bf16 ({args.layers} layers, {args.experts} experts)", flush=True)
        records = []
        for way in WAYS * 2:
            run = [sys.executable, __file__, "--measure", way, "--checkpoint", str(folder / "moe")]
            done = subprocess.run(run, capture_output=True, text=True, check=True)
            record = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{way:>10}: {record['peak_gb']:.2f} GB above the process before loading, in {record['s']} s")
            records.append({**record, "checkpoint_gb": round(size, 2), "layers": args.layers, "experts": args.experts})
    if args.out:
        args.out.write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
