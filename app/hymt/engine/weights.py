"""How the decoder's projections are stored for the decoding step, on a GPU.

- Fused: q, k and v as one matrix, gate and up as another, so each layer runs four matmuls instead of seven. On an
  H200 one step's linear layers took 3.77 ms instead of 4.27 at one row in bf16 (`bench/kernels.py`). In 16 bits
  the separate modules stay, as views into the fused matrix: no extra memory, and transformers' own forward (and
  a LoRA wrapper) still sees them.
- INT4 (`int4` tiers): the fused matrices quantized to 4 bits per weight with a bf16 scale per group of 128, served
  by humming-kernels (vLLM's quantized-GEMM library; its kernels are compiled at run time with NVRTC, cached on
  disk, and run inside CUDA graphs). On the H200 its step took 1.87 ms at 1 row and 2.89 at 64, where
  bitsandbytes' NF4 took 3.5 and 12.0 and torchao's tinygemm 2.4 and 31 (`bench/results/kernels.json`). Each
  layer is quantized on the GPU as soon as the checkpoint has been read to its end (layerwise.py), so the 16-bit
  weights never need to fit on the card, nor the whole of them in the computer's memory. The output head goes to 8
  bits per weight (groups of 128, as llama.cpp's Q4_K_M keeps its head in 6 bits): read at every step, in bf16 it
  was a tenth of the 4-bit step (1 GB of 128,167 x 4096 weights, 0.33 ms on the H200). A Mixture of Experts'
  routed experts go to 4 bits of hymt's own format (experts_int4.py, read by the grouped matmul of kernels/moe.py),
  a few experts at a time on the GPU, its shared expert as their last; its dense first layer's are linear layers
  like any other.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from ..errors import ModelLoadError
from .experts_int4 import Int4Experts
from .model import PROJECTIONS, owner_path
from .moe import is_moe

log = logging.getLogger("hymt.loader")

GROUP_SIZE = 128


def _layers(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.model.layers


def fuse(model) -> bool:
    """Fuse each layer's projections in place where they are plain 16-bit linear layers; False where they are not
    (quantized or wrapped layers keep their own modules). A Mixture of Experts' shared expert is fused as a dense
    MLP is; its routed experts are stacked already (gate and up in one matrix per expert)."""
    for layer in _layers(model):
        if hasattr(layer.self_attn, "qkv_proj"):  # fused already (int4 quantizes the fused matrices)
            return False
        groups = [(layer.get_submodule(owner_path(layer, o)), f, n) for o, f, n in PROJECTIONS if len(n) > 1]
        for owner, _, names in groups:
            for name in names:
                module = getattr(owner, name)
                if (
                    type(module) is not torch.nn.Linear
                    or module.bias is not None
                    or module.weight.dtype not in (torch.bfloat16, torch.float16)
                ):
                    return False
        for owner, fused_name, names in groups:
            parts = [getattr(owner, name) for name in names]
            weight = torch.cat([p.weight.data for p in parts])
            fused = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta")
            fused.weight = torch.nn.Parameter(weight, requires_grad=False)
            offset = 0
            for part in parts:
                rows = part.weight.shape[0]
                part.weight.data = weight[offset : offset + rows]
                offset += rows
            setattr(owner, fused_name, fused)
    return True


def int4_unavailable() -> str | None:
    """Why the int4 profiles cannot load here (humming-kernels missing), or None."""
    if importlib.util.find_spec("humming") is None:
        return "the int4 profiles need humming-kernels (pip install 'hymt[gpu]')"
    return None


# The ranges of rows a humming layer's kernels serve, (up to, tuned for): each runs humming's own choice for the
# row count named, so the decoding step's 1 row and the powers of two its graphs and the prefill buckets fall on are
# served as humming would serve them. humming's own table tells 92 ranges apart on Hopper, 33 distinct kernels a
# layer shape (154 for the 7B's five shapes), and compiles them all at the shape's first call, 2-5 s each with NVRTC:
# most of an int4 first start. These ranges come to at most 10 a shape.
ROW_RANGES = ((1, 1), (8, 8), (16, 16), (32, 32), (64, 64), (128, 128), (256, 256), (512, 512), (1024, 1024))
ROWS_ABOVE = 2048  # what the rows beyond the last range are served as
# Each layer shape's table, made once (the 7B's 129 humming layers are five shapes; the loader's thread alone adds).
_ROW_TABLES: dict[tuple, str] = {}


def row_table(heuristics: Callable[[int], dict]) -> str:
    """humming's tuning table over ROW_RANGES, `heuristics(rows)` giving its configuration for that many rows: the
    JSON list of [above, up to, configuration] that humming's forward takes (up to 0: no limit)."""
    table, low = [], 0
    for high, rows in (*ROW_RANGES, (0, ROWS_ABOVE)):
        table.append([low, high, heuristics(rows)])
        low = high
    return json.dumps(table)


def _humming(weight: torch.Tensor, dtype: str):
    """A humming layer holding `weight` [n, k] (bf16, on the GPU) quantized to `dtype` in groups of GROUP_SIZE,
    its kernels over ROW_RANGES (humming's own table where that cannot be made)."""
    from humming.layer import HummingLayer
    from humming.tune import get_heuristics_config

    layer = HummingLayer(
        shape_n=weight.shape[0],
        shape_k=weight.shape[1],
        weight_config={"dtype": dtype, "group_size": GROUP_SIZE},
        torch_dtype=torch.bfloat16,
    ).to(weight.device)
    layer.load_from_unquantized(weight)
    layer.transform()
    key = (*weight.shape, dtype, weight.device)  # what humming's configuration follows from: one table a shape
    try:
        if key not in _ROW_TABLES:
            _ROW_TABLES[key] = row_table(
                lambda rows: get_heuristics_config(layer.humming_config, shape_m=rows, device=weight.device)
            )
    except Exception:  # fewer kernels is a faster start: humming's own table serves where it cannot be made
        log.exception("humming's row ranges for %s could not be made; its own serve", tuple(weight.shape))
    else:
        layer.forward = functools.partial(layer.forward, tuning_config=_ROW_TABLES[key])
    return layer


class Int8Head(torch.nn.Module):
    """The output head in 8 bits; its rows padded to a multiple of 128 for the kernel, the logits cut back to the
    vocabulary."""

    def __init__(self, weight: torch.Tensor, device: torch.device):
        super().__init__()
        self.vocab = weight.shape[0]
        padded = -self.vocab % 128
        if padded:  # in the computer's memory, so the card holds one copy of the 16-bit head at a time
            weight = torch.cat([weight, weight.new_zeros(padded, weight.shape[1])])
        self.layer = _humming(weight.to(device, torch.bfloat16), "uint8")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)[..., : self.vocab]


class KernelBuilds:
    """humming compiles a layer shape's kernels (one for each range of rows, with NVRTC, 3 to 7 s each, side by side
    within the shape) at that shape's first call, so capturing the graphs compiled the shapes one after another: the
    7B's five (q/k/v, o, gate/up, down, the head), the likeliest part of the 63 s by which an int4 first start's
    graphs outlasted fp8's (90 s against 27; not yet timed apart). Here each new shape gets its first call, on one
    row of zeros, on a thread of its own as soon as its layer is placed: the shapes compile side by side, while the
    rest of the checkpoint is read. On leaving the block with the model read, its builds are waited for, and a kernel
    that cannot be built on this GPU is a ModelLoadError, as one that cannot be made is; leaving on an error drops
    the builds not begun."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="hymt-humming-build")
        self.shapes: set[tuple[int, ...]] = set()
        self.builds: list[Future] = []

    def add(self, layer: torch.nn.Module, shape: tuple[int, ...]) -> None:
        if shape not in self.shapes:
            self.shapes.add(shape)
            self.builds.append(self.pool.submit(_first_call, layer, shape[1]))

    def __enter__(self) -> KernelBuilds:
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                for build in self.builds:
                    _built(build.result)
        finally:
            self.pool.shutdown(cancel_futures=True)


def _first_call(layer: torch.nn.Module, k: int) -> None:
    """One call on a row of zeros, which compiles the shape's kernels; where those of ROW_RANGES fail, the humming
    layer (`layer`, or the head's) goes back to humming's own table and is called again."""
    device = next(itertools.chain(layer.buffers(), layer.parameters())).device
    x = torch.zeros(1, k, dtype=torch.bfloat16, device=device)
    with torch.inference_mode():
        try:
            layer(x)
        except torch.OutOfMemoryError:
            raise
        except Exception:
            humming = getattr(layer, "layer", layer)
            if "forward" not in vars(humming):  # humming's own table failed: nothing to go back to
                raise
            log.exception("humming's kernels over hymt's row ranges failed for %s; its own table serves", k)
            del humming.forward
            layer(x)
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()


def int8_head(head: torch.nn.Module, device: torch.device, builds: KernelBuilds | None = None) -> Int8Head:
    """The output head in 8 bits on `device`. Placed first, on an empty card: quantizing its 1 GB of 16-bit weights
    takes more than that for a moment, which beside the quantized layers overflowed an 8 GB card. The caller has
    checked int4_unavailable() once, before loading."""
    quantized = _built(Int8Head, head.weight.data, device)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if builds is not None:
        builds.add(quantized, (quantized.layer.shape_n, quantized.layer.shape_k, 8))
    return quantized


def int4_layer(layer, device: torch.device, builds: KernelBuilds | None = None) -> None:
    """Replace a decoder layer's projections (fused) by 4-bit humming layers on `device`, and a Mixture of Experts'
    routed and shared experts by 4-bit ones there (Int4Experts); the layer's other weights stay where they are (the
    caller moves them). Raises ModelLoadError when its kernels cannot be built on this GPU (the caller has checked
    int4_unavailable() once, before loading). With `builds`, each new shape's kernels start compiling at once."""
    if is_moe(layer.mlp):  # its shared expert becomes the 4-bit experts' last (Int4Experts' `shared`)
        experts, shared = layer.mlp.experts, layer.mlp.shared_experts
        gate_up = torch.cat([shared.gate_proj.weight.data, shared.up_proj.weight.data])
        layer.mlp.experts = _built(
            Int4Experts,
            experts.gate_up_proj.data,
            experts.down_proj.data,
            device,
            (gate_up, shared.down_proj.weight.data),
        )
        for name in ("gate_proj", "up_proj", "down_proj"):
            delattr(shared, name)
        del experts, gate_up
    for path, fused_name, names in PROJECTIONS:
        if path == "mlp" and is_moe(layer.mlp):
            continue
        owner = layer.get_submodule(owner_path(layer, path))
        weight = torch.cat([getattr(owner, name).weight.data for name in names]).to(device, torch.bfloat16)
        quantized = _built(_humming, weight, "uint4")
        if builds is not None:
            builds.add(quantized, (*weight.shape, 4))
        del weight
        for name in names:
            delattr(owner, name)
        setattr(owner, fused_name, quantized)


def _built(make, *args):
    """make(*args), a humming layer, or one clear error where its kernels cannot be built on this GPU."""
    try:
        return make(*args)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - a kernel that cannot be built here is one clear error
        raise ModelLoadError(
            f"humming-kernels cannot serve int4 on this GPU: {type(exc).__name__}: {exc}"[:400]
        ) from None
