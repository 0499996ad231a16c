"""schemathesis hooks (SCHEMATHESIS_HOOKS): a strategy for each media type the file endpoints accept, making
documents of that format from generated words, since random bytes are no document (fuzzing.py); and the failures
dropped because they say nothing wrong of the server, each for the reason its predicate gives."""

from __future__ import annotations

import os
import sys

import schemathesis
from hypothesis import strategies as st
from schemathesis.core.mutations import OperatorKind
from schemathesis.core.parameters import ParameterLocation

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import samples
from hymt.documents import media_types

# Words of any script, and punctuation that no format here needs escaped.
_WORD = st.text(st.characters(categories=("L", "Nd")), min_size=1, max_size=12)
_TEXT = st.lists(_WORD, min_size=1, max_size=5).map(" ".join)
_TEXTS = st.lists(_TEXT, min_size=1, max_size=3)

for media, ext in media_types().items():
    schemathesis.openapi.media_type(media, _TEXTS.map(lambda texts, ext=ext: samples.document(ext, texts)))


@schemathesis.hook
def before_load_schema(context, raw_schema) -> None:
    """The request bodies' examples (there for /docs) left out: schemathesis's coverage phase fills every case it
    derives from a body with them, which makes each of its hundreds of cases a real translation ("Hello, world!"
    where it would send a text of no letters, which needs none), several times the run; tests/server/test_docs.py
    checks the examples against their schemas and the server instead."""
    for item in raw_schema.get("paths", {}).values():
        for operation in (value for value in item.values() if isinstance(value, dict)):  # not its parameters
            for content in operation.get("requestBody", {}).get("content", {}).values():
                content.pop("example", None)
                for field in content.get("schema", {}).get("properties", {}).values():
                    field.pop("examples", None)


@schemathesis.hook
def filter_failure(context, failure, case, response) -> bool:
    """Every failure stands but those that say nothing wrong of the server (each predicate below says why)."""
    return (
        not _form_text_as_number(failure, case)
        and not _cancelled_job_still_shown(failure)
        and not _deepl_result_not_ready(failure, case, response)
    )


def _form_text_as_number(failure, case) -> bool:
    """A failure that a multipart form cannot show: a negative case whose mutations all turn a text field of the body
    into a number or boolean. A form part carries text, so the server receives the digits (or "true"), which is valid
    text for a text field; schemathesis 4.32.5 reads such a form as sent only where it can validate every part, which
    the documents these hooks make are not (their bytes stay unvalidated)."""
    if failure.code != "ST201" or not (case.media_type or "").startswith("multipart/form-data"):
        return False
    mutations = getattr(case.meta.phase.data, "mutations", ()) if case.meta else ()
    wire_identical = [
        m
        for m in mutations
        if m.operator == OperatorKind.CHANGE_TYPE
        and m.parameter_location == ParameterLocation.BODY
        and m.original_value == "string"
        and m.new_value in ("integer", "number", "boolean")
    ]
    return bool(mutations) and len(wire_identical) == len(mutations)


def _cancelled_job_still_shown(failure) -> bool:
    """use_after_free on a document job: DELETE /api/jobs/{job_id} cancels the job (an ended one stays as it was) and
    answers it; the job, cancelled or done, is kept for its owner to read (and a done one's file to fetch) until it
    expires, as the document says. That it is still there after the DELETE is the API, not a stale resource."""
    return failure.code == "ST301" and getattr(failure, "free", "").startswith("DELETE /api/jobs/")


def _deepl_result_not_ready(failure, case, response) -> bool:
    """not_a_server_error on DeepL's document result asked for before the document is translated: DeepL's API answers
    that with 503 {"message"} (documented there, and here), and its clients wait for the status "done" first; a
    stateful run asks for the result right after the upload. Only that answer: any other 5xx stands."""
    if failure.code != "ST101" or response.status_code != 503:
        return False
    if case.operation.method.upper() != "POST" or case.operation.path != "/v2/document/{document_id}/result":
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return body == {"message": "Document not ready."}
