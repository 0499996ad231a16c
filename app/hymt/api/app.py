"""The app factory: routes and error handlers as data, a lifespan that loads the engine in the background."""

from __future__ import annotations

import asyncio
import contextlib
import time

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from ..errors import HymtError
from ..planner.decision import Decision
from ..settings import Settings
from ..store import open_store
from . import deepl, deepl_glossaries, deepl_text, files, health, jobs, libre, openai_compat, page
from .failures import http_error, hymt_error, unexpected_error
from .metrics import Metrics
from .openapi import build_spec
from .service import Service
from .usage import UsageMeter
from .worker import JobWorker


async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> JSONResponse:
    # Built per request: whether quality best is offered, and which instructions the model has prompts for, are
    # known only once the server (and its fusion model) is up.
    service = request.app.state.service
    family = service.translator.family if service.translator else None
    offered = frozenset(name for name in ("style", "background") if family and getattr(family, name))
    return JSONResponse(build_spec(service.settings, service.quality_json()["best"], offered))


ROUTES = [
    Route("/", page.index),
    Route("/docs", page.docs),
    Mount("/docs/assets", page.ExplorerAssets(), name="docs_assets"),
    Route("/openapi.json", openapi),
    Route("/health", health.health),
    Route("/metrics", metrics),
    Route("/translate", libre.translate, methods=["POST"]),
    Route("/detect", libre.detect_language, methods=["POST"]),
    Route("/languages", libre.languages, methods=["GET", "POST"]),
    Route("/frontend/settings", libre.frontend_settings),
    Route("/suggest", page.suggest, methods=["POST"]),
    Route("/api/translate", page.translate, methods=["POST"]),
    Route("/translate_file", files.translate_file, methods=["POST"]),
    Route("/api/translate_file", files.translate_file_stream, methods=["POST"]),
    Route("/download_file/{file_id}/{name}", files.download_file, name="download_file"),
    Route("/api/jobs", jobs.jobs, methods=["GET", "POST"]),
    Route("/api/jobs/{job_id}", jobs.job, methods=["GET", "DELETE"]),
    Route("/api/jobs/{job_id}/result", jobs.job_result, name="job_result"),
    Route("/v2/translate", deepl_text.translate, methods=["POST"]),
    Route("/v2/languages", deepl.languages),
    Route("/v2/usage", deepl_text.usage_report),
    Route("/v2/glossary-language-pairs", deepl_glossaries.language_pairs),
    Route("/v2/glossaries", deepl_glossaries.glossaries, methods=["GET", "POST"]),
    Route("/v2/glossaries/{glossary_id}", deepl_glossaries.glossary, methods=["GET", "DELETE"]),
    Route("/v2/glossaries/{glossary_id}/entries", deepl_glossaries.entries),
    Route("/v2/document", deepl.upload, methods=["POST"]),
    Route("/v2/document/{document_id}", deepl.status, methods=["POST"]),
    Route("/v2/document/{document_id}/result", deepl.result, methods=["POST"]),
    Route("/v1/chat/completions", openai_compat.chat_completions, methods=["POST"]),
    Route("/v1/models", openai_compat.models),
    Mount("/static", page.Assets(directory=page.UI_DIR), name="static"),
]


class _Observe:
    """ASGI middleware: counts each request by route and status and times it."""

    def __init__(self, app, metrics_of):
        self.app, self.metrics_of = app, metrics_of

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), [500]

        async def capture(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            endpoint = getattr(route, "path", "other")
            m = self.metrics_of()
            m.requests.labels(endpoint, str(status[0])).inc()
            m.latency.labels(endpoint).observe(time.perf_counter() - started)


def create_app(settings: Settings, decision: Decision, factory=None, on_fatal=None) -> Starlette:
    """The app; `factory` stands in for translation.translator.start (tests)."""
    service = Service(settings=settings, decision=decision, on_fatal=on_fatal)
    store = open_store(settings.data_folder, settings.file_retention_s, settings.database_url)
    service.database = store.database
    usage = UsageMeter(store.usage, settings.character_limit)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        loader = service.load_in_background(factory)
        app.state.worker.start()  # unfinished jobs resume once the translator is ready
        flusher = asyncio.ensure_future(usage.run())
        yield
        await app.state.worker.stop()
        flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flusher  # its last flush: the counts of the last seconds
        loader.join(timeout=0)
        service.stop_translators()
        store.database.close()

    app = Starlette(
        routes=ROUTES,
        # Starlette types a handler as taking any Exception; each here is registered for, and takes, its own type.
        exception_handlers={HymtError: hymt_error, HTTPException: http_error, Exception: unexpected_error},  # type: ignore[dict-item]
        lifespan=lifespan,
    )
    app.state.service = service
    app.state.jobs = store.jobs
    app.state.glossaries = store.glossaries
    app.state.usage = usage
    app.state.worker = JobWorker(service, store.jobs, usage)
    app.state.metrics = Metrics(service)
    app.add_middleware(_Observe, metrics_of=lambda: app.state.metrics)
    if "none" not in settings.cors_origins:
        # Added last, so outermost: preflights are answered before routing (and counted by no route), and the
        # 4xx answers carry the headers too, so a page on another origin can read why it was refused. Every
        # method and header a client asks for is allowed (Authorization included: the requested headers are
        # echoed, as a wildcard would not cover it); cookies never are, so "*" stays safe.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_methods=["*"],
            allow_headers=["*"],
            allow_credentials=False,
            expose_headers=["Retry-After", "Content-Disposition"],
            max_age=600,
        )
    return app
