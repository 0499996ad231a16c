"""What the model writes, made into a translation: scaffolding stripped, runaway loops cut, echoes marked."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# A special token written out as text: the 7B models' <|eos|>, the 1.8B models' full-width <｜hy_User｜>.
_SPECIAL = re.compile(r"<\|[A-Za-z_0-9]+\|>|<｜hy_[^｜<>]+｜>")
_MIN_REPEATS = 4
_MIN_LOOP_CHARS = 12


@dataclass(frozen=True)
class Cleaned:
    text: str
    loop_cut: bool
    echo: bool


def max_new_tokens(source_tokens: int, cap: int) -> int:
    """An output budget in proportion to the source: scripts differ in tokens per meaning (a CJK source can
    need three times its tokens in Hindi), plus room for short segments; never beyond HYMT_MAX_NEW_TOKENS."""
    return min(cap, 3 * source_tokens + 16)


def partial(raw: str) -> str:
    """Text generated so far, for a stream: markup dropped, and a character still being spelled out by its bytes
    (the decoder's replacement character at the end) held back."""
    return _SPECIAL.sub("", raw).lstrip().rstrip("\ufffd")


def clean(source: str, raw: str) -> Cleaned:
    text = _SPECIAL.sub("", raw)
    # A translation the model prefixes with the prompt's own scaffolding ("Translation:") is left as it is:
    # only markup the tokenizer failed to drop is removed here.
    text = text.strip()
    text, loop_cut = cut_repetition(text)
    return Cleaned(text=text, loop_cut=loop_cut, echo=is_echo(source, text))


def cut_repetition(text: str) -> tuple[str, bool]:
    """Cut a tail in which one unit repeats at least four times ("a b a b a b a b ..."), keeping one occurrence.

    The unit may be one character ("!!!!!!!!!!!!") or a phrase; at least 12 characters must repeat so that
    ordinary doubled words and numbers ("1000000") survive."""
    n = len(text)
    for period in range(1, n // _MIN_REPEATS + 1):
        unit = text[n - period :]
        repeats = 1
        pos = n - period
        while pos - period >= 0 and text[pos - period : pos] == unit:
            repeats += 1
            pos -= period
        if repeats >= _MIN_REPEATS and period * (repeats - 1) >= _MIN_LOOP_CHARS:
            if unit.isdigit():
                continue
            return text[: pos + period].rstrip(), True
    return text, False


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def is_echo(source: str, output: str) -> bool:
    """True when the output only repeats the source (the model declined to translate). Text without letters
    (numbers, symbols, code) is expected to come back unchanged and is not an echo."""
    src = _normalise(source)
    if not any(ch.isalpha() for ch in src):
        return False
    return src == _normalise(output)
