"""/health: cheap, never runs the model; 200 while serving (healthy or degraded), 503 while loading, broken or
draining, with what it knows (profile, GPU memory, queue, start-up). The engine's figures are read once, by
snapshot(), which /metrics (metrics.py) reads too."""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..engine.startup import Startup
from ..planner.gpu import GIB
from .service import Service


@dataclass(frozen=True)
class Snapshot:
    """The engine's figures at one moment; before it is loaded, the plan's where it has them, else none."""

    gpu_memory_used_gb: float
    gpu_memory_total_gb: float | None  # None without a GPU
    max_in_flight: int
    attention: str | None  # None until the engine is loaded
    queue_depth: int
    in_flight: int
    kv_cache_used_tokens: int
    oom_recoveries: int
    startup: Startup | None  # None until the engine is loaded


def snapshot(service: Service) -> Snapshot:
    engine = service.engine
    used, total = service.gpu_memory()
    if engine is None:
        return Snapshot(used, total, service.decision.max_in_flight, None, 0, 0, 0, 0, None)
    return Snapshot(
        used,
        total,
        engine.scheduler.max_in_flight,
        engine.attention,
        engine.queue_depth,
        engine.in_flight,
        engine.kv_used_tokens,
        engine.runner.stats.oom_events,
        engine.startup,
    )


async def health(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    status = service.status()
    now = snapshot(service)
    engine = service.engine
    decision = service.decision
    body = {
        "status": status,
        "phase": service.phase,
        "gpu_memory_used_gb": now.gpu_memory_used_gb,
        "gpu_memory_total_gb": now.gpu_memory_total_gb,
        "gpu": decision.gpu["name"] if decision.gpu else None,
        "profile": decision.profile,
        "weights": decision.weights,
        "kv_cache": decision.kv_cache,
        "kv_cache_tokens": decision.kv_cache_tokens,
        "kv_cache_gb": round(decision.kv_cache_bytes / GIB, 3),
        "max_in_flight": now.max_in_flight,
        "attention": now.attention,
        "model": service.settings.model,
        "model_family": engine.identified.to_json() if engine else None,
        "quality": service.quality_json(),
        "context": service.settings.context and bool(engine and engine.family.context),
        "glossaries": engine.glossaries.status() if engine and engine.glossaries else None,
        "queue_depth": now.queue_depth,
        "in_flight": now.in_flight,
        "kv_cache_used_tokens": now.kv_cache_used_tokens,
        "queue_limit": service.settings.max_queue_segments,
        "oom_recoveries": now.oom_recoveries,
        "startup": _startup(now.startup) if now.startup else None,
        "uptime_s": round(time.monotonic() - service.started_at, 1),
        "decision_reason": decision.reason,
    }
    if decision.gpu is None:
        body["note"] = "no GPU: CPU profile, gpu_memory_used_gb is 0"
    if service.load_error:
        body["error"] = service.load_error
    return JSONResponse(body, status_code=200 if status in ("healthy", "degraded") else 503)


def _startup(startup: Startup) -> dict:
    return {
        "total_s": round(startup.total_s, 2),
        "load_s": round(startup.load_s, 2),
        "graphs_s": round(startup.graphs_s, 2),
        "warmup_s": startup.warmup.get("seconds"),
        "steps": startup.steps,
    }
