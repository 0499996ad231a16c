"""Start-up: load the planned tier, fuse or quantize its projections, allocate its KV arena, capture its decoding
graphs and prove the plan with a full-size warm-up; on out-of-memory shrink the arena, then step down a tier.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .. import fp8_checkpoint
from ..errors import HymtError, ModelLoadError
from ..planner.decision import Decision
from ..planner.gpu import apply_memory_cap
from ..planner.plan import in_flight, segment_kv_tokens
from ..settings import Settings
from ..tiers import TIERS, Tier
from . import adapters as adapter_registry, fp8, weights
from .engine import Engine
from .loader import load
from .runner import ModelRunner, RunnerPlan

log = logging.getLogger("hymt.engine")


@dataclass
class Startup:
    """What start-up did and how long each part took (seconds)."""

    load_s: float = 0.0
    graphs_s: float = 0.0
    warmup: dict = field(default_factory=dict)
    total_s: float = 0.0
    steps: list[str] = field(default_factory=list)  # out-of-memory step-downs on the way


def start(settings: Settings, decision: Decision, on_phase: Callable[[str], None] | None = None) -> Engine:
    """Load the decided tier, allocate its KV arena, capture its graphs and prove it with a full-size warm-up;
    on out-of-memory shrink the arena, then step down to the next tier."""
    began = time.perf_counter()
    phase = on_phase or (lambda text: None)
    if settings.compile_cache_dir:
        # Compiled kernels persist across restarts here (a volume in the image): torch.compile's, humming's, Triton's.
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", settings.compile_cache_dir)
        os.environ.setdefault("HUMMING_CACHE_DIR", os.path.join(settings.compile_cache_dir, "humming"))
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(settings.compile_cache_dir, "triton"))
    # Planned for HYMT_GPU_MEMORY_GB's card: on a larger real one, torch's allocator is held to it.
    apply_memory_cap(settings.gpu_memory_gb)
    tiers = tiers_to_try(decision, settings.profile == "auto")
    adapters = adapter_registry.read_manifest(settings.adapters) if settings.adapters else []
    startup = Startup()
    int4_refused = weights.int4_unavailable() if decision.device == "cuda" else None
    fp8_refused = fp8.unavailable(torch.device("cuda", 0)) if any(t.weights == "fp8" for t in tiers) else None
    for tier in tiers:
        if tier is not decision.tier:
            decision = decision.with_tier(tier, f"stepped down: {'; '.join(startup.steps)}")
        refused = {"int4": int4_refused, "fp8": fp8_refused}.get(tier.weights)
        if refused:
            startup.steps.append(f"{tier.name}: {refused}")
            continue
        if tier.weights in ("int4", "fp8") and adapters:  # their fused layers are no modules LoRA can wrap
            startup.steps.append(f"{tier.name}: takes no LoRA adapters")
            continue
        phase(f"loading weights ({tier.name})")
        try:
            loaded = load(settings.model, tier, settings.model_family)
        except torch.OutOfMemoryError:
            startup.steps.append(f"{tier.name} weights did not fit")
            log.warning("out of memory loading %s; trying the next tier", tier.name)
            _release()
            continue
        except ModelLoadError as exc:
            if tier.weights != "int4" or tier is tiers[-1]:
                raise
            int4_refused = exc.message  # its kernels cannot run here: NF4 stands in
            startup.steps.append(f"{tier.name}: {exc.message}")
            log.warning("%s; trying the next tier", exc.message)
            _release()
            continue
        startup.load_s = loaded.load_s
        loaded.model = adapter_registry.attach(loaded.model, adapters)
        if tier.device == "cuda" and not adapters:
            weights.fuse(loaded.model)
        if tier.device == "cuda":
            torch.backends.cuda.enable_cudnn_sdp(settings.cudnn_attention)
        kv_tokens = decision.kv_cache_tokens
        while kv_tokens > decision.max_seq_tokens:
            runner = None
            try:
                runner = ModelRunner(loaded, _runner_plan(settings, decision, tier, kv_tokens, adapters))
                if runner.device.type == "cuda":
                    phase("compiling and capturing CUDA graphs")
                startup.graphs_s = runner.capture_graphs()
                phase("warming up")
                startup.warmup = runner.warm_up()
                if kv_tokens != decision.kv_cache_tokens:
                    decision = decision.with_kv_tokens(
                        kv_tokens, runner.plan.max_in_flight, f"{decision.reason}; warm-up: {'; '.join(startup.steps)}"
                    )
                startup.total_s = time.perf_counter() - began
                log.info(
                    "profile %s ready in %.1f s: %d KV tokens, %d segments in flight, attention %s",
                    decision.profile,
                    startup.total_s,
                    kv_tokens,
                    runner.plan.max_in_flight,
                    runner.attention,
                )
                return Engine(settings, decision, runner, adapters, startup)
            except torch.OutOfMemoryError:
                startup.steps.append(f"{tier.name} out of memory with {kv_tokens} KV tokens")
                log.warning("warm-up out of memory with %d KV tokens on %s", kv_tokens, tier.name)
                del runner
                _release()
                kv_tokens = kv_tokens * 3 // 4
        startup.steps.append(f"{tier.name} has no room for one full segment")
        del loaded
        _release()
    raise HymtError(f"no profile survived its warm-up: {'; '.join(startup.steps)}", error_type="out_of_memory")


def tiers_to_try(decision: Decision, auto: bool) -> list[Tier]:
    """The decided tier and, where the planner chose it (`auto`) on a GPU, the tiers below it that this GPU runs:
    what start-up steps down through on out-of-memory. Tencent's FP8 weights load in the fp8 tiers alone."""
    tiers = [decision.tier]
    if decision.device == "cuda" and auto:
        below = TIERS[TIERS.index(decision.tier) + 1 :]
        tiers += [t for t in below if (t.auto or decision.weights == fp8_checkpoint.FORMAT) and decision.allows(t)]
    if decision.weights == fp8_checkpoint.FORMAT:
        tiers = [t for t in tiers if t.weights == "fp8"]
    return tiers


def _runner_plan(settings: Settings, decision: Decision, tier, kv_tokens: int, adapters: list) -> RunnerPlan:
    on_gpu = tier.device == "cuda"
    # LoRA wrappers choose their adapter in Python at every call, which a captured graph would freeze.
    graphs = on_gpu and settings.cuda_graphs and not adapters
    return RunnerPlan(
        kv_tokens=kv_tokens,
        max_in_flight=in_flight(kv_tokens, decision.max_in_flight),
        prefill_tokens=decision.prefill_tokens,
        max_seq_tokens=segment_kv_tokens(settings),
        kv_cache=tier.kv_cache,
        cuda_graphs=graphs,
        compiled=on_gpu and settings.compile,
    )


def _release() -> None:
    import gc

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
