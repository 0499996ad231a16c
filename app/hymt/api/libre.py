"""LibreTranslate-compatible endpoints, so existing LibreTranslate clients and plugins work unchanged."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import markup
from ..detect import Detection, detect
from ..languages import LANGUAGES, Language
from ..prompts import Sampling
from . import parsing
from .service import Service, run_to_end


ALTERNATIVES_MAX = 10


def _service(request: Request) -> Service:
    return request.app.state.service


def detect_sources(texts: list[str], source: Language | None) -> tuple[list[Language | None], list[Detection | None]]:
    """Per-text source languages: the given one, or each text's detected language (None when undetectable)."""
    if source is not None:
        return [source] * len(texts), [None] * len(texts)
    found = [detect(text) for text in texts]
    return [d.language if d else None for d in found], found


def detected_json(d: Detection | None) -> dict:
    # LibreTranslate reports confidence in percent.
    return {"language": d.language.code, "confidence": round(d.confidence * 100, 1)} if d else \
        {"language": "auto", "confidence": 0.0}


async def translate(request: Request) -> JSONResponse:
    service = _service(request)
    service.ready_engine()  # 503 while loading, before any parsing or detection work
    settings = service.settings
    data = await parsing.read_request(request, settings, service.limits)
    texts, as_list = parsing.texts(data, "q", settings)
    source = parsing.language(data, "source", allow_auto=True, default="auto")
    target = parsing.language(data, "target", allow_auto=False)
    fmt = parsing.choice(data, "format", ("text", "html"), "text")
    alternatives = parsing.count(data, "alternatives", ALTERNATIVES_MAX)
    sampling = Sampling(greedy=settings.greedy)
    sources, detections = await run_in_threadpool(detect_sources, texts, source)

    if fmt == "html":
        docs = [markup.split_html(t) for t in texts]
        items = [(pieces[i], src) for (pieces, idx), src in zip(docs, sources) for i in idx]
        job = await run_to_end(service, items, target, sampling, request) if items else None
        flat = job.texts() if job else []
        results, pos = [], 0
        for pieces, idx in docs:
            results.append(markup.join_html(pieces, idx, flat[pos:pos + len(idx)]))
            pos += len(idx)
    else:
        job = await run_to_end(service, list(zip(texts, sources)), target, sampling, request)
        results = job.texts()

    body: dict = {"translatedText": results if as_list else results[0]}
    if source is None:
        found = [detected_json(d) for d in detections]
        body["detectedLanguage"] = found if as_list else found[0]
    if alternatives is not None:  # LibreTranslate clients may ask; one model gives one translation
        body["alternatives"] = [[] for _ in results] if as_list else []
    return JSONResponse(body)


async def detect_language(request: Request) -> JSONResponse:
    service = _service(request)
    data = await parsing.read_request(request, service.settings, service.limits)
    texts, _ = parsing.texts(data, "q", service.settings)
    found = await run_in_threadpool(detect, "\n".join(texts))
    return JSONResponse([detected_json(found)] if found else [])


def language_list() -> list[dict]:
    codes = [lang.code for lang in LANGUAGES]
    return [{"code": lang.code, "name": lang.english, "native": lang.native, "chinese": lang.chinese,
             "targets": [c for c in codes if c != lang.code]} for lang in LANGUAGES]


async def languages(request: Request) -> JSONResponse:
    return JSONResponse(language_list())


async def frontend_settings(request: Request) -> JSONResponse:
    settings = _service(request).settings
    return JSONResponse({
        "charLimit": settings.max_chars, "frontendTimeout": 500, "apiKeys": bool(settings.api_keys),
        "keyRequired": bool(settings.api_keys), "suggestions": False, "filesTranslation": False,
        "supportedFilesFormat": [".txt", ".md", ".srt"],
        "language": {"source": {"code": "auto", "name": "Auto Detect"}, "target": {"code": "en", "name": "English"}},
    })
