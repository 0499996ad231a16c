"""The fp8 tiers' weights, made at load: each layer's projections become Fp8Linear modules (engine/fp8.py), fused
(q, k and v as one, gate and up as one, as weights.py fuses 16-bit ones) and built on the GPU one layer at a time as
the checkpoint is read (layerwise.py), so that neither the card nor the computer holds a 16-bit copy of the model.
The embeddings, norms and output head stay 16-bit (the caller moves them), as in Tencent's FP8 checkpoints, which
leave the head out.

- From a bf16 checkpoint (`quantize_layer`): each row of a weight scaled by its own amax / 448.
- From Tencent's FP8 checkpoint (`place_published`): the e4m3 weights and their `weight_scale` read as published
  from its safetensors files (transformers reads the rest); a part of a fused layer keeps its own per-tensor scale
  on its rows. The static `input_scale` is not read: the activations are quantized per token (engine/fp8.py).
- The CPU (fp32, no FP8 arithmetic) reads such a checkpoint dequantized (`dequantize_published`): weight * scale.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from ..errors import ModelLoadError
from ..fp8_checkpoint import Fp8Scheme
from .fp8 import Fp8Linear
from .model import PROJECTIONS, owner_path


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _parts(layer, owner: str, names: tuple[str, ...]) -> list[torch.nn.Linear]:
    parts = [getattr(layer.get_submodule(owner), name) for name in names]
    for part in parts:
        if type(part) is not torch.nn.Linear or part.bias is not None:
            raise ModelLoadError(f"the fp8 profiles take linear layers without bias, not {part}")
    return parts


def _replace(layer, owner: str, fused: str, names: tuple[str, ...], module: Fp8Linear) -> None:
    holder = layer.get_submodule(owner)
    for name in names:
        delattr(holder, name)
    setattr(holder, fused, module)


def quantize_layer(layer: torch.nn.Module, device: torch.device) -> None:
    """Replace a decoder layer's projections (fused) by Fp8Linear modules on `device`, each row of a weight scaled by
    its own amax / 448."""
    for path, fused, names in PROJECTIONS:
        owner = owner_path(layer, path)
        weight = torch.cat([part.weight.data for part in _parts(layer, owner, names)]).to(device, torch.bfloat16)
        _replace(layer, owner, fused, names, Fp8Linear.quantized(weight))
        del weight


def place_published(layer: torch.nn.Module, name: str, published: Published, device: torch.device) -> None:
    """Replace decoder layer `name`'s projections (fused) by Fp8Linear modules on `device` holding the checkpoint's
    own e4m3 weights and scales."""
    for path, fused, parts in PROJECTIONS:
        owner = owner_path(layer, path)
        read = [
            published.read(f"{name}.{owner}.{part}", module.weight.shape)
            for part, module in zip(parts, _parts(layer, owner, parts))
        ]
        weight = torch.cat([w.to(device) for w, _ in read])
        scale = torch.cat([s for _, s in read]).to(device)
        _replace(layer, owner, fused, parts, Fp8Linear(weight, scale))


def dequantize_published(model, checkpoint: Path, scheme: Fp8Scheme) -> None:
    """Each projection's weight, read as e4m3 from the checkpoint, times its scale, in the model's own dtype."""
    base = _base(model)
    with Published(checkpoint, scheme) as published:
        for name, module in base.named_modules():
            if isinstance(module, torch.nn.Linear) and module is not base.lm_head:
                weight, scale = published.read(name, module.weight.shape)
                module.weight.data = (weight.float() * scale[:, None]).to(module.weight.dtype)


class Published(contextlib.ExitStack):
    """A checkpoint's safetensors files, opened as needed: a projection's e4m3 weight and its scale per row."""

    def __init__(self, checkpoint: Path, scheme: Fp8Scheme):
        super().__init__()
        self.checkpoint, self.scheme = checkpoint, scheme
        index = checkpoint / "model.safetensors.index.json"
        if index.is_file():
            self.files = {name: checkpoint / file for name, file in json.loads(index.read_text())["weight_map"].items()}
        else:
            self.files = {}
            for file in sorted(checkpoint.glob("*.safetensors")):
                with _open(file) as handle:
                    self.files.update(dict.fromkeys(handle.keys(), file))
        self.handles: dict[Path, object] = {}

    def _tensor(self, name: str) -> torch.Tensor:
        file = self.files.get(name)
        if file is None:
            raise ModelLoadError(f"{self.checkpoint} has no tensor {name}: not an FP8 checkpoint of this model")
        if file not in self.handles:
            self.handles[file] = self.enter_context(_open(file))
        return self.handles[file].get_tensor(name)  # type: ignore[attr-defined]

    def read(self, module: str, shape: torch.Size) -> tuple[torch.Tensor, torch.Tensor]:
        """Module `module`'s e4m3 weight (checked against the model's `shape`) and its float32 scale per row."""
        weight = self._tensor(f"{module}.weight")
        if weight.dtype != torch.float8_e4m3fn or weight.shape != shape:
            raise ModelLoadError(
                f"{self.checkpoint}: {module}.weight is {weight.dtype} {tuple(weight.shape)}, where the fp8 profiles "
                f"take float8_e4m3fn {tuple(shape)}"
            )
        scale = self._tensor(f"{module}.weight_scale").float()
        rows = shape[0]
        expected = (1,) if self.scheme.strategy == "tensor" else (rows,)
        if scale.numel() != expected[0] or not bool(torch.isfinite(scale).all() and (scale > 0).all()):
            raise ModelLoadError(
                f"{self.checkpoint}: {module}.weight_scale is {tuple(scale.shape)} {scale.flatten()[:4].tolist()}, "
                f"where a {self.scheme.strategy} scale is {expected[0]} positive value(s)"
            )
        return weight, scale.reshape(-1).expand(rows).contiguous()


def _open(file: Path):
    from safetensors import safe_open

    return safe_open(file, framework="pt")
