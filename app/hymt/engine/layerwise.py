"""A checkpoint read one decoder layer at a time, for the profiles that quantize (or place) each layer on the GPU.

transformers reads the checkpoint as always (its names, and its merging of a Mixture of Experts' experts into stacked
tensors, stay its own), each tensor when its parameter's turn comes (`HF_DEACTIVATE_ASYNC_LOAD`: its threads would
read the whole file ahead otherwise), in the order of the checkpoint's names, so one layer after another. As soon as
the last weight of a decoder layer has been read, the layer goes to `Placement.layer`, which puts it on the GPU in its
own format and lets its 16-bit weights go: the computer's memory holds about one layer of them at a time, where it
held every copy transformers makes of the file's weights before anything was quantized: the 30B-A3B's stacked experts
(56 GiB), an FP8 checkpoint's e4m3 weights read as bf16 (twice the file). The output head goes to `Placement.head`
the same way (first: its name sorts first).

What tells a layer's weights arriving is torch's global hooks on the registration of parameters and submodules
(transformers sets each weight on its module as a new parameter), so nothing of transformers' loading code is
copied or patched; `tests/engine/test_layerwise.py` fails if transformers stops reading one layer after another.
The hooks see every module of the process while they are on; they follow the loading thread's only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch.nn.modules import module as torch_module

from ..errors import ModelLoadError


@dataclass(frozen=True)
class Placement:
    """What becomes of each part as it is read: `layer(name, layer)` places a decoder layer (`name` as the
    checkpoint has it, "model.layers.3"); `head(head)` returns the output head's replacement (none: the head stays)."""

    layer: Callable[[str, torch.nn.Module], None]
    head: Callable[[torch.nn.Module], torch.nn.Module] | None = None


class _Watch:
    """Follows the model being built and read: who owns each module, and how many of each part's weights (a decoder
    layer, the head) are still to be read; places a part once its last weight is in it."""

    def __init__(self, placement: Placement):
        self.placement = placement
        # A module's owner and its name there; weak both ways, so that a placed layer's 16-bit modules can go.
        self.owners: weakref.WeakKeyDictionary[torch.nn.Module, tuple[weakref.ref[torch.nn.Module], str]] = (
            weakref.WeakKeyDictionary()
        )
        self.pending: dict[torch.nn.Module, int] = {}  # a part being read: its weights still on the meta device
        self.ready: list[torch.nn.Module] = []  # parts read whole, placed at the next event (see on_parameter)
        self.placed: weakref.WeakSet[torch.nn.Module] = weakref.WeakSet()
        self.placing = False
        self.thread = threading.get_ident()  # the loading thread; modules made on others are not this model's

    def on_module(self, owner: torch.nn.Module, name: str, module: torch.nn.Module | None) -> None:
        if module is not None and threading.get_ident() == self.thread:
            self.owners[module] = (weakref.ref(owner), name)

    def owner(self, module: torch.nn.Module) -> tuple[torch.nn.Module, str] | None:
        """The module `module` was registered in, and its name there; None for the model itself."""
        known = self.owners.get(module)
        if known is None:
            return None
        owner = known[0]()
        return None if owner is None else (owner, known[1])

    def on_parameter(self, module: torch.nn.Module, name: str, param: torch.nn.Parameter | None) -> None:
        # Called before the parameter is stored: a part read whole waits for the next parameter (or the end).
        if self.placing or threading.get_ident() != self.thread:  # a placement's own modules, or another thread's
            return
        self.place_ready()
        if param is None or param.is_meta:  # the model being built
            return
        part = self._part(module)
        if part is None or part in self.placed:
            return
        if part not in self.pending:
            self.pending[part] = sum(1 for p in part.parameters() if p.is_meta)
        previous = module._parameters.get(name)
        if previous is not None and previous.is_meta:
            self.pending[part] -= 1
            if self.pending[part] == 0:
                del self.pending[part]
                self.ready.append(part)

    def place_ready(self) -> None:
        while self.ready:
            self.place(self.ready.pop(0))

    def place(self, part: torch.nn.Module) -> None:
        if part in self.placed:
            return
        self.placing = True
        try:
            owner, name = self._known(part)
            if name == "lm_head":
                assert self.placement.head is not None
                replacement = self.placement.head(part)
                _initialized(replacement)
                setattr(owner, name, replacement)
                self.placed.add(replacement)
            else:
                self.placement.layer(self._name(part), part)
                _initialized(part)
            self.placed.add(part)
        finally:
            self.placing = False
        _give_back()

    def _part(self, module: torch.nn.Module) -> torch.nn.Module | None:
        """The decoder layer (an item of a ModuleList named `layers`) or head (`lm_head`) `module` is in, or None."""
        node, up = module, self.owner(module)
        while up is not None:
            owner, name = up
            if name == "lm_head" and self.placement.head is not None:
                return node
            above = self.owner(owner)
            if isinstance(owner, torch.nn.ModuleList) and above is not None and above[1] == "layers":
                return node
            node, up = owner, above
        return None

    def _name(self, module: torch.nn.Module) -> str:
        names = []
        up = self.owner(module)
        while up is not None:
            module, name = up
            names.append(name)
            up = self.owner(module)
        return ".".join(reversed(names))

    def _known(self, module: torch.nn.Module) -> tuple[torch.nn.Module, str]:
        up = self.owner(module)
        if up is None:
            raise ModelLoadError(f"{type(module).__name__} was not built while its checkpoint was being read")
        return up

    def finish(self, model) -> None:
        """Places what is left once transformers is done: the last part read, and any part with a weight the
        checkpoint lacks (transformers made it up) or shares (a head tied to the embeddings)."""
        self.place_ready()
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        parts = list(base.model.layers)
        if self.placement.head is not None:
            parts.insert(0, base.lm_head)
        for part in parts:
            self.place(part)


def _give_back() -> None:
    """Hands the memory of the 16-bit weights just let go back to the system: glibc keeps what the many tensors of a
    layer's experts freed in its heaps, and without this the process grew by about the model's size all the same
    (a 2.3 GB MoE read layer by layer on the CPU peaked at 1.7 GB, of which 1 GB was free in the heaps)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _initialized(part: torch.nn.Module) -> None:
    """Marks a placed part's modules as read, so that transformers does not initialize them (it initializes what
    its checkpoint lacked once it has read the rest, and placed modules hold none of the weights it knows)."""
    for module in part.modules():
        module._is_hf_initialized = True  # type: ignore[assignment]


@contextlib.contextmanager
def reading(placement: Placement) -> Iterator[_Watch]:
    """While a model is loaded (`from_pretrained`) inside this block, each of its decoder layers (and its head) is
    placed as soon as it has been read; call `finish(model)` on what it yields once the model is loaded."""
    watch = _Watch(placement)
    modules = torch_module.register_module_module_registration_hook(watch.on_module)
    parameters = torch_module.register_module_parameter_registration_hook(watch.on_parameter)
    previous = os.environ.get("HF_DEACTIVATE_ASYNC_LOAD")
    os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"
    try:
        yield watch
    finally:
        modules.remove()
        parameters.remove()
        if previous is None:
            del os.environ["HF_DEACTIVATE_ASYNC_LOAD"]
        else:
            os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = previous
