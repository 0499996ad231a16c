"""How every translation route begins: a 503 while the engine loads (before any parsing or detection work), the
body read under the request limits (its API key, the rate limits, its size), and, once the route has parsed its
fields, quality "best" checked (a 422 at once when no fusion model is available) and the sources detected off the
event loop."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..detect import Detection, detect
from ..languages import Language
from . import parsing
from .bridge import Turn
from .service import Service


async def begin(request: Request, forms: bool = True, limit: int | None = None) -> tuple[Service, dict]:
    """The service, ready, and the request's body."""
    service: Service = request.app.state.service
    service.ready_translator()
    data = await parsing.read_request(request, service.settings, service.limits, forms=forms, limit=limit)
    return service, data


def turn(request: Request) -> Turn:
    """An interactive request's place in the engine's fair order: its client's turn (a request of many segments
    is batch work all the same: the translator decides)."""
    return Turn(client=parsing.caller(request).client)


async def sources(
    service: Service, quality: str, texts: list[str], source: Language | None
) -> tuple[list[Language | None], list[Detection | None]]:
    """Per text, its source language: the given one, or the one detected (None when undetectable) with the
    detection. Quality "best" is refused here first, before any detection work, when it is unavailable."""
    if quality == "best":
        service.fusion_translator()
    return await run_in_threadpool(_detect_sources, texts, source)


def _detect_sources(texts: list[str], source: Language | None) -> tuple[list[Language | None], list[Detection | None]]:
    if source is not None:
        return [source] * len(texts), [None] * len(texts)
    found = [detect(text) for text in texts]
    return [d.language if d else None for d in found], found
