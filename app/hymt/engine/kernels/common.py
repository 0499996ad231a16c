"""What the kernel modules share: whether Triton is here, and whether their kernels launch with programmatic
dependent launch (PDL, Hopper and later): each kernel's programs then start while the kernel before it finishes,
read what no kernel writes (a matvec's first tile of weights) and wait for the kernel before only where they need
its output. In a decoding step of some 380 small kernels, that is the start and the tail of each one hidden.
"""

from __future__ import annotations

import importlib.util
import logging

import torch

log = logging.getLogger("hymt.kernels")

AVAILABLE = importlib.util.find_spec("triton") is not None
PDL = False  # set once at start-up by enable_pdl, for the GPU the kernels run on

if AVAILABLE:
    import triton
    import triton.language as tl

    @triton.jit
    def wait_for_inputs(PDL: tl.constexpr):
        """Under PDL: wait until the kernel before has finished (its writes visible), then let the next one start.
        Every kernel calls it before its first store, so no kernel writes while the one before still reads."""
        if PDL:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()

    @triton.jit
    def _probe(X, PDL: tl.constexpr):
        wait_for_inputs(PDL)
        tl.store(X, tl.load(X) + 1)


def launch(kernel, grid, *args, **meta) -> None:
    kernel[grid](*args, PDL=PDL, launch_pdl=PDL, **meta)


def enable_pdl(device: torch.device) -> bool:
    """PDL for every kernel from here on where the GPU has it (compute capability 9 and up) and a CUDA graph of two
    dependent launches runs right here; otherwise (and on any error, logged) plain launches."""
    global PDL
    PDL = False
    if not AVAILABLE or device.type != "cuda" or torch.cuda.get_device_capability(device)[0] < 9:
        return False
    try:
        x = torch.zeros(1, dtype=torch.int32, device=device)
        for _ in range(2):
            _probe[(1,)](x, PDL=True, launch_pdl=True)
        torch.cuda.synchronize(device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(2):
                _probe[(1,)](x, PDL=True, launch_pdl=True)
        graph.replay()
        torch.cuda.synchronize(device)
        if x.item() != 4:  # two launches, then two replayed
            raise RuntimeError(f"two eager and two replayed dependent launches counted {x.item()}, not 4")
    except Exception:  # PDL is a speed-up: plain launches serve where it cannot run
        log.exception("programmatic dependent launch does not run here; kernels launch one after another")
        return False
    PDL = True
    return True
