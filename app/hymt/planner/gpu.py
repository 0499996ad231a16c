"""What GPU this process sees and how much memory it has: NVML first, `nvidia-smi` second, none third."""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger("hymt.hardware")

GIB = 1024**3
# Held by the driver for the CUDA context and kernels, outside torch's allocator (measured about 0.5 GiB).
CUDA_CONTEXT_BYTES = int(0.6 * GIB)


@dataclass(frozen=True)
class GpuMemory:
    name: str
    total_bytes: int
    free_bytes: int
    source: str  # "nvml", "nvidia-smi" or "simulated"
    compute_capability: tuple[int, int] | None = None  # (8, 6) for an RTX 3090; None when unknown

    @classmethod
    def from_json(cls, data: dict) -> GpuMemory:
        capability = data["compute_capability"]  # a list in JSON
        return cls(**{**data, "compute_capability": tuple(capability) if capability else None})


def read_gpu(index: int = 0) -> GpuMemory | None:
    return _from_nvml(index) or _from_nvidia_smi(index)


def simulate(gpu: GpuMemory | None, card_gb: float) -> GpuMemory:
    """A card of `card_gb` GiB, empty, standing in for the real one (which must be at least as large to run)."""
    total = int(card_gb * GIB)
    name = f"simulated {card_gb:g} GiB" + (f" on {gpu.name}" if gpu else "")
    return GpuMemory(
        name=name,
        total_bytes=total,
        free_bytes=total,
        source="simulated",
        compute_capability=gpu.compute_capability if gpu else None,
    )


def _from_nvml(index: int) -> GpuMemory | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            info = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            try:
                capability = tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle))
            except pynvml.NVMLError:
                capability = None
            return GpuMemory(
                name=name,
                total_bytes=int(info.total),
                free_bytes=int(info.free),
                source="nvml",
                compute_capability=capability,
            )
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        return None


def _from_nvidia_smi(index: int) -> GpuMemory | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [
                exe,
                f"--id={index}",
                "--query-gpu=name,memory.total,memory.free,compute_cap",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        name, total_mib, free_mib, capability = (part.strip() for part in out.split(","))
        major, _, minor = capability.partition(".")
        return GpuMemory(
            name=name,
            total_bytes=int(float(total_mib)) * 1024**2,
            free_bytes=int(float(free_mib)) * 1024**2,
            source="nvidia-smi",
            compute_capability=(int(major), int(minor)) if major.isdigit() and minor.isdigit() else None,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def process_gpu_memory_bytes(pid: int, index: int = 0) -> int | None:
    """GPU memory held by one process, as the driver counts it (includes the CUDA context). None if unknown."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML library, no driver or no GPU: the figure is unknown
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == pid and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
        return 0
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()


def visible_gpu(card_gb: float | None) -> GpuMemory | None:
    """The card to plan for: a simulated one when `card_gb` is set, else the real one (NVML, then nvidia-smi),
    provided torch can use it."""
    real = read_gpu()
    if real is not None:
        try:
            import torch

            usable = torch.cuda.is_available()
        except ImportError:
            usable = False
        if not usable:
            log.warning("found %s, but this torch build cannot use CUDA: planning for the CPU", real.name)
            real = None
    return simulate(real, card_gb) if card_gb else real


def apply_memory_cap(card_gb: float | None) -> None:
    """Make torch's allocator behave like a card of `card_gb` GiB on a larger real one: on a real card the CUDA
    context takes its share of the card too, so the allocator gets the card less the context."""
    if not card_gb:
        return
    import torch

    if torch.cuda.is_available():
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, (card_gb * GIB - CUDA_CONTEXT_BYTES) / total))
