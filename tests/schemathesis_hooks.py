"""schemathesis hooks (SCHEMATHESIS_HOOKS): a strategy for each media type the file endpoints accept, making
documents of that format from generated words, since random bytes are no document (fuzzing.py)."""

from __future__ import annotations

import os
import sys

import schemathesis
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import samples
from hymt.documents import media_types

# Words of any script, and punctuation that no format here needs escaped.
_WORD = st.text(st.characters(categories=("L", "Nd")), min_size=1, max_size=12)
_TEXT = st.lists(_WORD, min_size=1, max_size=5).map(" ".join)
_TEXTS = st.lists(_TEXT, min_size=1, max_size=3)

for media, ext in media_types().items():
    schemathesis.openapi.media_type(media, _TEXTS.map(lambda texts, ext=ext: samples.document(ext, texts)))
