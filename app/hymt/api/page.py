"""The web page's own endpoint (with Server-Sent Events), the static page itself, the API explorer (/docs), and
LibreTranslate's /suggest as its servers answer it with suggestions off."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from openapi_ui_bundles import swagger_ui
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from ..engine.sampling_params import Sampling
from ..errors import HymtError
from . import glossaries, parsing, preamble, sse, usage
from .bridge import candidates_done, events_until_done, queue_candidates, run_to_end, submit, submit_fusion
from .libre import detected_json
from .preamble import turn
from .service import Service

UI_DIR = Path(__file__).resolve().parent.parent / "ui"


def _result(job, detected: dict | None, quality: str) -> dict:
    (text,) = job.texts()
    return {
        "translatedText": text,
        "segments": job.num_segments,
        **job.flags(),
        "detectedLanguage": detected,
        "quality": quality,
        "glossary": job.glossary_report(),
    }


async def translate(request: Request) -> Response:
    service, data = await preamble.begin(request, forms=False)
    translator = service.ready_translator()  # ready: begin() has just made sure
    settings = service.settings
    (text,), _ = parsing.texts(data, "text", settings)
    source = parsing.language(data, "source", allow_auto=True, default="auto")
    target = parsing.language(data, "target", allow_auto=False)
    sampling = Sampling(greedy=parsing.flag(data, "greedy", settings.greedy))
    options, quality = parsing.options(data, settings), parsing.quality(data)
    (src,), (found,) = await preamble.sources(service, quality, [text], source)
    options = await glossaries.with_stored(request, glossaries.ids_of(data), options, source, target)
    await usage.check(request)
    usage.count(request, [text])
    detected = detected_json(found) if found else None
    if not parsing.flag(data, "stream"):
        job = await run_to_end(service, [(text, src)], target, sampling, request, options, quality, turn(request))
        return JSONResponse(_result(job, detected, quality))
    if quality == "best":
        queued = await queue_candidates(service, [(text, src)], target, options, turn(request))  # full: 429 at once
        return sse.response(request, _best_stream(service, request, queued, sampling, detected))

    job, events = await submit(service, [(text, src)], target, sampling, True, options, turn(request))

    async def stream():
        yield sse.event("start", {"segments": job.num_segments, "detectedLanguage": detected})
        async for event in events_until_done(job, events, request):
            if event.kind in ("token", "segment"):
                # "token": the text so far, the segment being generated included; "progress": a segment ended.
                (partial,) = job.settled_texts(translator.decode if event.kind == "token" else None)
                yield sse.event(
                    "progress" if event.kind == "segment" else "token",
                    {"done": event.num_done, "total": job.num_segments, "partial": partial},
                )
            elif event.kind == "error":
                assert event.error is not None  # an error event carries its error
                raise event.error
            elif event.kind == "done":
                yield sse.event("done", _result(job, detected, quality))

    return sse.response(request, stream())


async def _best_stream(service: Service, request: Request, queued, sampling, detected):
    """Quality "best" as events: "start", "candidates" when the six are done, "progress" as each segment is
    fused (with the fused text so far), then "done" (or "error")."""
    yield sse.event("start", {"segments": queued[0][0].num_segments, "detectedLanguage": detected, "quality": "best"})
    jobs = await candidates_done(queued, request)
    yield sse.event("candidates", {"done": len(jobs), "total": len(jobs)})
    job, events = await submit_fusion(service, jobs, sampling)
    async for event in events_until_done(job, events, request):
        if event.kind == "segment":
            (partial,) = job.settled_texts()
            yield sse.event("progress", {"done": event.num_done, "total": job.num_segments, "partial": partial})
        elif event.kind == "error":
            assert event.error is not None  # an error event carries its error
            raise event.error
        elif event.kind == "done":
            yield sse.event("done", _result(job, detected, "best"))


async def index(request: Request) -> FileResponse:
    return FileResponse(UI_DIR / "index.html", headers={"Cache-Control": "no-cache"})


class Assets(StaticFiles):
    """The page's modules, style and icons, revalidated on every load (a 304 while unchanged), as the page is: a
    browser that kept an upgraded server's old modules would run a page of two versions."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.setdefault("Cache-Control", "no-cache")
        return response


class ExplorerAssets(Assets):
    """Swagger UI's script and style, from its package (pinned in pyproject.toml), so that /docs works offline.
    Only those two: the package's demo page would load a document from the internet."""

    FILES = frozenset({"swagger-ui-bundle.js", "swagger-ui.css"})

    def __init__(self) -> None:
        super().__init__(directory=swagger_ui.static_path)

    async def get_response(self, path: str, scope: Scope) -> Response:
        if path not in self.FILES:
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)


async def docs(request: Request) -> FileResponse:
    return FileResponse(UI_DIR / "docs.html", headers={"Cache-Control": "no-cache"})


async def suggest(request: Request) -> NoReturn:
    # LibreTranslate's answer with suggestions off (its message word for word): hymt keeps none, and its
    # /frontend/settings says "suggestions": false. As there, nothing is checked first: not the key, not the body.
    raise HymtError("Suggestions are disabled on this server.", error_type="suggestions_disabled", status=403)
