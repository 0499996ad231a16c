"""DeepL's text API: POST /v2/translate (form or JSON, `text` once or many times) and GET /v2/usage.

What maps: `source_lang` (absent: detected), `target_lang` (DeepL's codes, regional ones included), `tag_handling`
xml or html (the documents' path: tags kept; `ignore_tags` left untranslated, and for xml `splitting_tags` holding
sentences apart), `context` (text before the texts, through the model's context prompt where it has one),
`formality` (the model's style prompt where it has one), `glossary_id` / `glossary_ids` (stored glossaries).
Accepted and left to hymt's own rules (docs/api.md says how): `split_sentences`, `preserve_formatting`,
`outline_detection`, `non_splitting_tags`, `model_type`, `show_billed_characters` (billed characters are always
given: the deepl package reads them).
"""

from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import JSONResponse

from ..documents import html as html_documents, xmlfragment
from ..engine.sampling_params import Sampling
from ..errors import BadRequest
from ..translation.jobs import Options
from . import deepl, glossaries, parsing, pipeline, preamble, usage
from .bridge import run_to_end
from .service import Service

SPLIT_SENTENCES = ("0", "1", "nonewlines")
TAG_HANDLINGS = ("xml", "html")
FORM_FLAGS = ("0", "1", "true", "false")
MAX_CONTEXT_CHARS = 4000


@deepl.deepl_errors
async def translate(request: Request) -> JSONResponse:
    service, data = await preamble.begin(request)
    settings = service.settings
    if data.get("text") in (None, "", []):
        raise BadRequest("Parameter 'text' not specified.", error_type="missing_field")
    texts, _ = parsing.texts(data, "text", settings)
    source = deepl.language(data, "source_lang", required=False)
    target = deepl.language(data, "target_lang", required=True)
    assert target is not None  # required
    tags = _choice(data, "tag_handling", TAG_HANDLINGS)
    _choice(data, "split_sentences", SPLIT_SENTENCES)
    for name in ("preserve_formatting", "outline_detection", "show_billed_characters"):
        _flag(data, name)
    ignore, splitting = _tags(data, "ignore_tags"), _tags(data, "splitting_tags")
    _tags(data, "non_splitting_tags")  # every element not splitting is inline here
    options = Options(
        context=settings.context,
        style=deepl.formality_style(data, service),
        preceding=_context(data),
    )
    options = await glossaries.with_stored(request, glossaries.ids_of(data), options, source, target)
    await usage.check(request)
    usage.count(request, texts)
    sources, detections = await preamble.sources(service, "standard", texts, source)
    sampling = Sampling(greedy=settings.greedy)
    if tags is None:
        job = await run_to_end(
            service, list(zip(texts, sources)), target, sampling, request, options, "standard", preamble.turn(request)
        )
        results = job.texts()
    else:
        read = (
            functools.partial(xmlfragment.read_fragment, splitting=splitting, ignore=ignore)
            if tags == "xml"
            else functools.partial(html_documents.read_fragment, rules=html_documents.html_rules(ignore))
        )
        fragments = await pipeline.translate_fragments(
            service, texts, sources, target, sampling, request, options, "standard", preamble.turn(request), read
        )
        results = [r.data for r in fragments.results]
    return JSONResponse(
        {
            "translations": [
                {
                    "detected_source_language": deepl.code_of(found) if found else "",
                    "text": text,
                    "billed_characters": len(original),
                }
                for found, text, original in zip(sources, results, texts)
            ]
        }
    )


def _choice(data: dict, field: str, allowed: tuple[str, ...]) -> str | None:
    value = data.get(field)
    if value in (None, ""):
        return None
    if value not in allowed:
        raise BadRequest(f"Value for '{field}' not supported.", error_type="invalid_value")
    return value


def _flag(data: dict, field: str) -> None:
    """A flag DeepL takes as a boolean: in JSON true or false, in a form "0", "1", "true" or "false"."""
    value = data.get(field)
    if value is None or isinstance(value, bool):
        return
    if isinstance(data, parsing.FormData) and value in FORM_FLAGS:
        return
    raise BadRequest(f"Value for '{field}' not supported.", error_type="invalid_value")


def _tags(data: dict, field: str) -> frozenset[str]:
    """A list of element names: a JSON list, or in a form one comma-separated field (or the field given again)."""
    value = data.get(field)
    if value in (None, ""):
        return frozenset()
    parts = value if isinstance(value, list) else [value]
    if not all(isinstance(p, str) for p in parts):
        raise BadRequest(f"Value for '{field}' not supported.", error_type="invalid_type")
    return frozenset(name.strip() for p in parts for name in p.split(",") if name.strip())


def _context(data: dict) -> str | None:
    value = data.get("context")
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise BadRequest("Value for 'context' not supported.", error_type="invalid_type")
    if len(value) > MAX_CONTEXT_CHARS:
        raise BadRequest(f"Parameter 'context' is over {MAX_CONTEXT_CHARS} characters.", error_type="text_too_long")
    return value


@deepl.deepl_errors
async def usage_report(request: Request) -> JSONResponse:
    service: Service = request.app.state.service
    await parsing.read_request(request, service.settings, service.limits)
    return JSONResponse(await usage.usage(request))
