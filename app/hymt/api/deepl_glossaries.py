"""DeepL's glossary API on the stored glossaries: /v2/glossaries (create from TSV or CSV entries, list, get, entries,
delete) and /v2/glossary-language-pairs. A glossary's languages are hymt's, written as DeepL writes a glossary's:
lower case, no region ("en", "zh-hant"). Like DeepL's, a glossary is never edited: a change is a new one.
"""

from __future__ import annotations

import datetime

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from ..errors import BadRequest, HymtError
from ..glossary import ENTRY_FORMATS, parse_entries
from ..languages import LANGUAGES
from ..store.glossaries import GlossaryRecord
from . import deepl, parsing
from .glossaries import owned, store
from .service import Service

MAX_NAME_CHARS = 1024


def code(language: str) -> str:
    """A hymt code as a DeepL glossary writes it."""
    return language.lower()


def info_json(record: GlossaryRecord) -> dict:
    created = datetime.datetime.fromtimestamp(record.created_at, datetime.UTC)
    return {
        "glossary_id": record.id,
        "name": record.name,
        "ready": True,
        "source_lang": code(record.source),
        "target_lang": code(record.target),
        "creation_time": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "entry_count": record.entry_count,
    }


async def _read(request: Request) -> tuple[Service, dict]:
    service: Service = request.app.state.service
    return service, await parsing.read_request(request, service.settings, service.limits)


async def glossaries(request: Request) -> Response:
    """GET: the caller's glossaries; POST: a new one."""
    return await (_create(request) if request.method == "POST" else _listing(request))


@deepl.deepl_errors
async def _create(request: Request) -> JSONResponse:
    service, data = await _read(request)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise BadRequest("Parameter 'name' not specified.", error_type="missing_field")
    if len(name) > MAX_NAME_CHARS:
        raise BadRequest(f"Parameter 'name' is over {MAX_NAME_CHARS} characters.", error_type="invalid_value")
    source = deepl.language(data, "source_lang", required=True)
    target = deepl.language(data, "target_lang", required=True)
    assert source is not None and target is not None  # required
    entries = data.get("entries")
    if not isinstance(entries, str) or not entries.strip():
        raise BadRequest("Parameter 'entries' not specified.", error_type="missing_field")
    entries_format = data.get("entries_format", "tsv")
    if entries_format not in ENTRY_FORMATS:
        raise BadRequest("Value for 'entries_format' not supported.", error_type="invalid_value")
    terms = parse_entries(entries, entries_format, service.settings.max_glossary_entries)
    record = await run_in_threadpool(
        lambda: store(request).create(
            owner=parsing.caller(request).key_hash,
            name=name.strip(),
            source=source.code,
            target=target.code,
            entries=[(t.source, t.target) for t in terms],
        )
    )
    return JSONResponse(info_json(record), status_code=201)


@deepl.deepl_errors
async def _listing(request: Request) -> JSONResponse:
    await _read(request)
    records = await run_in_threadpool(store(request).list, parsing.caller(request).key_hash)
    return JSONResponse({"glossaries": [info_json(r) for r in records]})


@deepl.deepl_errors
async def glossary(request: Request) -> Response:
    await _read(request)
    record = await owned(request, request.path_params["glossary_id"])
    if request.method == "DELETE":
        await run_in_threadpool(store(request).delete, record.id)
        return Response(status_code=204)
    return JSONResponse(info_json(record))


@deepl.deepl_errors
async def entries(request: Request) -> Response:
    await _read(request)
    record = await owned(request, request.path_params["glossary_id"])
    accept = request.headers.get("accept", "*/*")
    if not any(
        kind.split(";")[0].strip() in ("text/tab-separated-values", "*/*", "text/*") for kind in accept.split(",")
    ):
        raise HymtError("Entries are only given as text/tab-separated-values.", error_type="not_acceptable", status=415)
    rows = await run_in_threadpool(store(request).entries, record.id)
    return PlainTextResponse(
        "".join(f"{s}\t{t}\n" for s, t in rows), media_type="text/tab-separated-values; charset=utf-8"
    )


@deepl.deepl_errors
async def language_pairs(request: Request) -> JSONResponse:
    await _read(request)
    codes = [code(lang.code) for lang in LANGUAGES]
    return JSONResponse(
        {"supported_languages": [{"source_lang": s, "target_lang": t} for s in codes for t in codes if s != t]}
    )
