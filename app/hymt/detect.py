"""Offline language detection for `source: auto`: script rules for the scripts the statistical model does not know
(Tibetan, Burmese, Khmer, Mongolian), py3langid (its model ships inside the wheel) restricted to the languages
the model translates, and a character test that tells Traditional Chinese and Cantonese from Mandarin."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .languages import BY_CODE, Language

_SCRIPTS = (("bo", re.compile(r"[\u0F00-\u0FFF]")), ("my", re.compile(r"[\u1000-\u109F]")),
            ("km", re.compile(r"[\u1780-\u17FF]")), ("mn", re.compile(r"[\u1800-\u18AF]")))
_CANTONESE = set("嘅咗喺冇唔佢哋嚟啲乜嘢咁睇噉")
_TRADITIONAL = set("們這個會說來時對國學開關為後與愛當實點還頭聽見歡樂電話書號車東長門問間讓從體現發經過")
_SIMPLIFIED = set("们这个会说来时对国学开关为后与爱当实点还头听见欢乐电话书号车东长门问间让从体现发经过")


@dataclass(frozen=True)
class Detection:
    language: Language
    confidence: float  # 0..1


@lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages([code for code in BY_CODE if code in identifier.labels])
    return identifier


def detect(text: str) -> Detection | None:
    """The most likely supported language of `text`, or None when it has no letters to judge by."""
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return None
    for code, pattern in _SCRIPTS:
        share = len(pattern.findall(text)) / len(letters)
        if share > 0.3:
            return Detection(BY_CODE[code], round(min(1.0, share), 3))
    code, probability = _identifier().classify(text)
    if code in ("zh", "yue"):
        # The statistical model confuses written Cantonese with Traditional Chinese; their characters do not.
        code = _chinese_variant(text)
    return Detection(BY_CODE[code], round(float(probability), 3))


def _chinese_variant(text: str) -> str:
    chars = set(text)
    if chars & _CANTONESE:
        return "yue"
    return "zh-Hant" if len(chars & _TRADITIONAL) > len(chars & _SIMPLIFIED) else "zh"
