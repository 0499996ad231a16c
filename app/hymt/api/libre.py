"""LibreTranslate-compatible endpoints, so existing LibreTranslate clients and plugins work unchanged."""

from __future__ import annotations

from dataclasses import replace

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import documents
from ..documents import html as html_documents
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
    options, quality = parsing.options(data, settings), parsing.quality(data)
    alternatives = parsing.count(data, "alternatives", ALTERNATIVES_MAX)
    sampling = Sampling(greedy=settings.greedy)
    if quality == "best":
        service.fusion_engine()  # 422 at once when the mode is unavailable
    sources, detections = await run_in_threadpool(detect_sources, texts, source)

    fallbacks = None
    if fmt == "html":
        # A real HTML parser; each sentence with its inline tags as markers is one segment.
        docs = [documents.prepare(html_documents.read_fragment(t, target.code)) for t in texts]
        items = [(text, src) for doc, src in zip(docs, sources) for text in doc.texts]
        job = await run_to_end(service, items, target, sampling, request, replace(options, formatted=True),
                               quality) if items else None
        flat = job.texts() if job else []
        finished, pos = [], 0
        for doc in docs:
            finished.append(documents.finish(doc, flat[pos:pos + len(doc.texts)]))
            pos += len(doc.texts)
        results = [r.data for r in finished]
        fallbacks = sum(r.markup_fallbacks for r in finished)
    else:
        job = await run_to_end(service, list(zip(texts, sources)), target, sampling, request, options, quality)
        results = job.texts()

    body: dict = {"translatedText": results if as_list else results[0]}
    if source is None:
        found = [detected_json(d) for d in detections]
        body["detectedLanguage"] = found if as_list else found[0]
    if fallbacks is not None:
        body["markup_fallback_segments"] = fallbacks
    report = job.glossary_report() if job else None
    if report is not None:
        body["glossary"] = report
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
        "keyRequired": bool(settings.api_keys), "suggestions": False, "filesTranslation": True,
        "supportedFilesFormat": list(documents.FORMATS),
        "language": {"source": {"code": "auto", "name": "Auto Detect"}, "target": {"code": "en", "name": "English"}},
    })
