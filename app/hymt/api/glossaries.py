"""Stored glossaries in translation requests: `glossary_id` (or DeepL's `glossary_ids`) on every translation route
(DeepL's /v2/translate and /v2/document, hymt's /translate, /translate_file, /api/jobs and the page). The stored
entries join the request's own terms (these first: where both give a source term, the request's wins) and reach the
prompt as inline ones do. They are made and managed through DeepL's /v2/glossaries (deepl_glossaries.py).

A glossary belongs to the key that made it (everyone's when keys are off): another key's is a 404, as an unknown one
is.
"""

from __future__ import annotations

import dataclasses

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..errors import BadRequest, HymtError
from ..glossary import Term
from ..languages import Language
from ..store.glossaries import GlossaryRecord, GlossaryStore
from ..translation.jobs import Options
from . import parsing

# DeepL's glossaries take up to five ids per request (glossary_ids); one (glossary_id) is the common case.
MAX_GLOSSARIES = 5


class GlossaryNotFound(HymtError):
    status = 404
    error_type = "not_found"

    def __init__(self) -> None:
        super().__init__("Glossary not found.")


def store(request: Request) -> GlossaryStore:
    return request.app.state.glossaries


async def owned(request: Request, glossary_id: object) -> GlossaryRecord:
    """The caller's glossary of that id (a request read by read_request), or a 404."""
    if not isinstance(glossary_id, str):
        raise BadRequest("glossary_id must be a string", error_type="invalid_type")
    record = await run_in_threadpool(store(request).get, glossary_id.strip())
    key = parsing.caller(request).key_hash
    if record is None or (record.owner is not None and record.owner != key):
        raise GlossaryNotFound()
    return record


def ids_of(data: dict) -> list[object]:
    """The glossary ids a translation request names: `glossary_id` (empty or null: none), or DeepL's
    `glossary_ids` (a list, or in a form one field given several times or comma-separated; empty or null: none);
    not both fields, whatever their values."""
    single, many = data.get("glossary_id"), data.get("glossary_ids")
    if "glossary_id" in data and "glossary_ids" in data:
        raise BadRequest("glossary_id and glossary_ids cannot be combined.", error_type="invalid_value")
    if single not in (None, ""):
        return [single]
    if isinstance(many, str) and isinstance(data, parsing.FormData):
        many = many.split(",") if many else []
    if many is None:
        return []
    if not isinstance(many, list):
        raise BadRequest("glossary_ids must be a list of glossary ids", error_type="invalid_type")
    if len(many) > MAX_GLOSSARIES:
        raise BadRequest(f"glossary_ids names more than {MAX_GLOSSARIES} glossaries.", error_type="invalid_value")
    return many


async def stored_terms(
    request: Request, ids: list[object], source: Language | None, target: Language
) -> tuple[Term, ...]:
    """The entries of the named glossaries, each checked to be the caller's and for the request's languages (its
    target; its source when one is given)."""
    terms: list[Term] = []
    for glossary_id in ids:
        record = await owned(request, glossary_id)
        if record.target != target.code or (source is not None and record.source != source.code):
            raise HymtError(  # 409: the glossary as it is conflicts with the request, not the request's form
                f"glossary {record.id} is for {record.source} to {record.target}; the request is "
                f"{source.code if source else 'auto'} to {target.code}",
                error_type="glossary_language_mismatch",
                status=409,
            )
        rows = await run_in_threadpool(store(request).entries, record.id)
        terms += [Term(s, t) for s, t in rows]
    return tuple(terms)


async def with_stored(
    request: Request, ids: list[object], options: Options, source: Language | None, target: Language
) -> Options:
    """The options with the stored glossaries named by `ids` (ids_of a request) after the request's own terms."""
    if not ids:
        return options
    stored = await stored_terms(request, ids, source, target)
    return dataclasses.replace(options, glossary=options.glossary + stored)
