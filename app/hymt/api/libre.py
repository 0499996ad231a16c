"""LibreTranslate-compatible endpoints, so existing LibreTranslate clients and plugins work unchanged."""

from __future__ import annotations

from dataclasses import replace

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from .. import documents
from ..detect import Detection, detect
from ..engine.sampling_params import Sampling
from ..errors import BadRequest
from ..languages import LANGUAGES, Language
from ..translation.jobs import Options
from . import glossaries, parsing, pipeline, preamble, usage
from .alternatives import ALTERNATIVES_LIMIT, rank, translate_candidates
from .bridge import run_to_end
from .preamble import turn
from .service import Service


def _service(request: Request) -> Service:
    return request.app.state.service


def detected_json(d: Detection | None) -> dict:
    # LibreTranslate reports confidence in percent.
    return (
        {"language": d.language.code, "confidence": round(d.confidence * 100, 1)}
        if d
        else {"language": "auto", "confidence": 0.0}
    )


async def translate(request: Request) -> JSONResponse:
    service, data = await preamble.begin(request)
    settings = service.settings
    texts, as_list = parsing.texts(data, "q", settings)
    source = parsing.language(data, "source", allow_auto=True, default="auto")
    target = parsing.language(data, "target", allow_auto=False)
    fmt = parsing.choice(data, "format", ("text", "html"), "text")
    options, quality = parsing.options(data, settings), parsing.quality(data)
    alternatives = parsing.count(data, "alternatives", ALTERNATIVES_LIMIT) or 0
    if alternatives and quality == "best":
        raise BadRequest(
            "alternatives cannot be combined with quality best (which fuses its candidates into one translation)",
            error_type="invalid_value",
        )
    sampling = Sampling(greedy=settings.greedy)
    sources, detections = await preamble.sources(service, quality, texts, source)
    options = await glossaries.with_stored(request, glossaries.ids_of(data), options, source, target)
    await usage.check(request)
    usage.count(request, texts)

    if fmt == "html" and not alternatives:
        # The documents' path: links and inline tags kept, the safe form only as a last resort.
        fragments = await pipeline.translate_fragments(
            service, texts, sources, target, sampling, request, options, quality, turn(request)
        )
        results = [r.data for r in fragments.results]
        fallbacks: int | None = sum(r.markup_fallbacks for r in fragments.results)
        report = _fragments_report(fragments)
        chosen = [[0]] * len(texts)
        candidates: list[list[str]] = [results]
    else:
        results, chosen, candidates, fallbacks, report = await _translate(
            service, request, texts, sources, target, sampling, options, quality, fmt, alternatives
        )
    body: dict = {"translatedText": results if as_list else results[0]}
    if source is None:
        found = [detected_json(d) for d in detections]
        body["detectedLanguage"] = found if as_list else found[0]
    if fallbacks is not None:
        body["markup_fallback_segments"] = fallbacks
    if report is not None:
        body["glossary"] = report
    if "alternatives" in data:
        others = [[candidates[j][i] for j in order[1 : alternatives + 1]] for i, order in enumerate(chosen)]
        body["alternatives"] = others if as_list else others[0]
    return JSONResponse(body)


async def _translate(
    service: Service,
    request: Request,
    texts: list[str],
    sources: list[Language | None],
    target: Language,
    sampling: Sampling,
    options: Options,
    quality: str,
    fmt: str,
    alternatives: int,
) -> tuple[list[str], list[list[int]], list[list[str]], int | None, dict | None]:
    """Plain texts, or HTML with alternatives (each candidate's fragments written back, the safe form where a
    candidate lost the markup): the chosen translations, per text the candidates' order, the candidates, the
    markup fallbacks and the glossary report."""
    if fmt == "html":
        docs = await pipeline.read_fragments(texts, target)
        items = [(text, src) for doc, src in zip(docs, sources) for text in doc.texts]
        options = replace(options, formatted=True)
    else:
        items = list(zip(texts, sources))
    if not items:
        jobs = []
    elif alternatives:
        jobs = await translate_candidates(service, items, target, options, request, turn(request))
    else:
        jobs = [await run_to_end(service, items, target, sampling, request, options, quality, turn(request))]

    fallbacks = None
    if fmt == "html":
        written = await pipeline.write_fragments(texts, target, docs, jobs)
        candidates = [[r.data for r in results] for results in written]
        fallbacks_of = [[r.markup_fallbacks for r in results] for results in written]
    else:
        candidates = [job.texts() for job in jobs]
    # Per text: the candidates' distinct translations, best first.
    chosen = (
        [rank([c[i] for c in candidates]) or [0] for i in range(len(texts))] if alternatives else [[0]] * len(texts)
    )
    results = [candidates[order[0]][i] for i, order in enumerate(chosen)]
    if fmt == "html":
        fallbacks = sum(fallbacks_of[order[0]][i] for i, order in enumerate(chosen))
    report = _glossary_report(jobs, [order[0] for order in chosen], docs if fmt == "html" else None)
    return results, chosen, candidates, fallbacks, report


def _fragments_report(fragments: pipeline.Fragments) -> dict | None:
    """The glossary report of texts translated as fragments: each text's first translation's misses, numbered by
    text piece across all the texts, as one job of all the pieces would number them."""
    applied = segments = offset = 0
    misses: list[dict] = []
    for result, job in zip(fragments.results, fragments.first_jobs):
        report = job.glossary_report() if job else None
        if report is not None:
            applied += report["terms_applied"]
            segments += report["segments_with_terms"]
            misses += [{**miss, "document": miss["document"] + offset} for miss in report["misses"]]
        offset += result.segments
    return {"terms_applied": applied, "segments_with_terms": segments, "misses": misses} if applied else None


def _glossary_report(jobs: list, chosen: list[int], docs) -> dict | None:
    """The glossary report of the translations given: each text's misses from the candidate chosen for it (a
    job's documents are the texts, or with format html the text pieces of each fragment in turn)."""
    reports = [job.glossary_report() for job in jobs]
    if not reports or reports[0] is None:
        return None
    owner = [d for d, doc in enumerate(docs) for _ in doc.texts] if docs else list(range(len(chosen)))
    misses = [
        miss for j, report in enumerate(reports) for miss in report["misses"] if chosen[owner[miss["document"]]] == j
    ]
    return {**reports[0], "misses": misses}


async def detect_language(request: Request) -> JSONResponse:
    service = _service(request)
    data = await parsing.read_request(request, service.settings, service.limits)
    texts, _ = parsing.texts(data, "q", service.settings)
    found = await run_in_threadpool(detect, "\n".join(texts))
    return JSONResponse([detected_json(found)] if found else [])


def language_list() -> list[dict]:
    codes = [lang.code for lang in LANGUAGES]
    return [
        {
            "code": lang.code,
            "name": lang.english,
            "native": lang.native,
            "chinese": lang.chinese,
            "targets": [c for c in codes if c != lang.code],
        }
        for lang in LANGUAGES
    ]


async def languages(request: Request) -> JSONResponse:
    return JSONResponse(language_list())


async def frontend_settings(request: Request) -> JSONResponse:
    settings = _service(request).settings
    return JSONResponse(
        {
            "charLimit": settings.max_chars,
            "frontendTimeout": 500,
            "apiKeys": bool(settings.api_keys),
            "keyRequired": bool(settings.api_keys),
            "suggestions": False,
            "filesTranslation": True,
            "supportedFilesFormat": list(documents.FORMATS),
            "language": {
                "source": {"code": "auto", "name": "Auto Detect"},
                "target": {"code": "en", "name": "English"},
            },
        }
    )
