"""schemathesis hooks (SCHEMATHESIS_HOOKS): a strategy for each media type the file endpoints accept, making
documents of that format from generated words, since random bytes are no document (fuzzing.py)."""

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
def filter_failure(context, failure, case, response) -> bool:
    """Every failure stands but one that a multipart form cannot show: a negative case whose mutations all turn a
    text field of the body into a number or boolean. A form part carries text, so the server receives the digits (or
    "true"), which is valid text for a text field; schemathesis 4.32.5 reads such a form as sent only where it can
    validate every part, which the documents these hooks make are not (their bytes stay unvalidated)."""
    if failure.code != "ST201" or not (case.media_type or "").startswith("multipart/form-data"):
        return True
    mutations = getattr(case.meta.phase.data, "mutations", ()) if case.meta else ()
    wire_identical = [
        m
        for m in mutations
        if m.operator == OperatorKind.CHANGE_TYPE
        and m.parameter_location == ParameterLocation.BODY
        and m.original_value == "string"
        and m.new_value in ("integer", "number", "boolean")
    ]
    return not mutations or len(wire_identical) < len(mutations)
