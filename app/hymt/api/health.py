"""/health: cheap, never runs the model; 200 while serving (healthy or degraded), 503 while loading, broken or
draining, with what it knows (profile, GPU memory, queue by class, start-up). The engine's figures are read once
(the translator's snapshot), by figures(), which /metrics (metrics.py) reads too."""

from __future__ import annotations

import time
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..engine.requests import Snapshot
from ..engine.startup import Startup
from ..planner.gpu import GIB
from .service import Service


@dataclass(frozen=True)
class Figures:
    """What the service knows at one moment: GPU memory, and the engine's snapshot once it is loaded."""

    gpu_memory_used_gb: float
    gpu_memory_total_gb: float | None  # None without a GPU
    max_in_flight: int  # the plan's until the engine is loaded
    attention: str | None  # None until the engine is loaded
    engine: Snapshot | None
    startup: Startup | None


def figures(service: Service) -> Figures:
    translator = service.translator
    used, total = service.gpu_memory()
    if translator is None:
        return Figures(used, total, service.decision.max_in_flight, None, None, None)
    now = translator.snapshot()
    return Figures(used, total, now.max_in_flight, translator.attention, now, translator.startup)


async def health(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    status = service.status()
    now = figures(service)
    translator, engine = service.translator, now.engine
    decision = service.decision
    body = {
        "status": status,
        "phase": service.phase,
        "gpu_memory_used_gb": now.gpu_memory_used_gb,
        "gpu_memory_total_gb": now.gpu_memory_total_gb,
        "gpu": decision.gpu.name if decision.gpu else None,
        "profile": decision.profile,
        "weights": decision.weights,
        "kv_cache": decision.kv_cache,
        "kv_cache_tokens": decision.kv_cache_tokens,
        "kv_cache_gb": round(decision.kv_cache_bytes / GIB, 3),
        "max_in_flight": now.max_in_flight,
        "attention": now.attention,
        "model": service.settings.model,
        "model_family": translator.identified.to_json() if translator else None,
        "quality": service.quality_json(),
        "context": service.settings.context and bool(translator and translator.family.context),
        "glossaries": translator.glossaries.status() if translator and translator.glossaries else None,
        "queue_depth": engine.queue_depth if engine else 0,
        "queue_by_class": engine.waiting if engine else None,
        "in_flight": engine.in_flight if engine else 0,
        "in_flight_by_class": engine.running if engine else None,
        "kv_cache_used_tokens": engine.kv_used_tokens if engine else 0,
        "queue_limit": service.settings.max_queue_segments,
        "batch_queue_limit": service.settings.max_batch_queue_segments,
        "oom_recoveries": engine.oom_events if engine else 0,
        "startup": _startup(now.startup) if now.startup else None,
        "uptime_s": round(time.monotonic() - service.started_at, 1),
        "decision_reason": decision.reason,
        "database": service.database.name if service.database else None,
        "database_error": service.database.error if service.database else None,
    }
    if decision.gpu is None:
        body["note"] = "no GPU: CPU profile, gpu_memory_used_gb is 0"
    if service.load_error:
        body["error"] = service.load_error
    elif service.database is not None and service.database.error is not None:
        body["error"] = service.database.error
    return JSONResponse(body, status_code=200 if status in ("healthy", "degraded") else 503)


def _startup(startup: Startup) -> dict:
    return {
        "total_s": round(startup.total_s, 2),
        "load_s": round(startup.load_s, 2),
        "graphs_s": round(startup.graphs_s, 2),
        "warmup_s": startup.warmup.get("seconds"),
        "steps": startup.steps,
    }
