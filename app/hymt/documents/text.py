"""Plain text (.txt): each line a segment; line breaks, blank lines and indentation stay as they were."""

from __future__ import annotations

import re

from .base import Extraction, Outcome

_LINES = re.compile(r"(\r\n|\n|\r)")


def decode_utf8(data: bytes, kind: str) -> str:
    from ..errors import BadRequest

    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise BadRequest(f"the {kind} file is not UTF-8 text", error_type="invalid_file") from None


def read(data: bytes, target: str) -> Extraction[bytes]:
    parts = _LINES.split(decode_utf8(data, ".txt"))
    lines = parts[0::2]

    def write(outcomes: list[Outcome]) -> bytes:
        out = list(parts)
        for i, outcome in enumerate(outcomes):
            out[2 * i] = outcome.text
        return "".join(out).encode("utf-8")

    return Extraction([[line] for line in lines], write)
