"""Offline language detection for `source: auto`, among the 38 languages the model translates, in three steps:
1. The script of the letters (Unicode character names). Where one of the 38 languages alone writes a script, the
   script decides (Tibetan, Burmese, Khmer, Mongolian, Thai, Korean, Hebrew, Bengali, Gujarati, Tamil, Telugu;
   kana says Japanese). A script none of them writes (Greek, Armenian...) gives no detection.
2. Explicit rules for the known confusions inside a script: Han (Cantonese words; Traditional against Simplified
   characters from hanzidentifier's CC-CEDICT tables), Arabic script (Uyghur and Kazakh letters and spelling, Urdu
   letters, Persian against Arabic letters), Cyrillic (Kazakh, Ukrainian and Mongolian letters), and the function
   or everyday words that part Hindi from Marathi and Malay from Indonesian.
3. Otherwise py3langid (its model ships inside the wheel), ranked among the languages that write that script. On
   one to three words its character n-grams alone guess badly ("Hello" read as Italian), so there its
   probabilities are multiplied by how often each language writes those words (wordfreq's word lists).
Accuracy by input length, beside the other detectors tried: docs/detection.md.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import hanzidentifier

from .languages import BY_CODE, Language


@dataclass(frozen=True)
class Detection:
    language: Language
    confidence: float  # 0..1


# First words of Unicode character names -> script; the name's first two words are looked at, so that
# "FULLWIDTH LATIN ..." and "HALFWIDTH KATAKANA ..." count as their script.
_SCRIPT_WORDS = {
    "LATIN": "Latin",
    "CYRILLIC": "Cyrillic",
    "ARABIC": "Arabic",
    "CJK": "Han",
    "IDEOGRAPHIC": "Han",
    "HIRAGANA": "Kana",
    "KATAKANA": "Kana",
    "KATAKANA-HIRAGANA": "Kana",
    "HANGUL": "Hangul",
    "DEVANAGARI": "Devanagari",
    "TIBETAN": "Tibetan",
    "MYANMAR": "Myanmar",
    "KHMER": "Khmer",
    "MONGOLIAN": "Mongolian",
    "THAI": "Thai",
    "HEBREW": "Hebrew",
    "BENGALI": "Bengali",
    "GUJARATI": "Gujarati",
    "TAMIL": "Tamil",
    "TELUGU": "Telugu",
}
# A Han, kana or Hangul character is a syllable or a word: it weighs as much as a few alphabetic letters, so that
# "我用iPhone发了消息" reads as Chinese.
_SYLLABLE_WEIGHT = {"Han": 3, "Hangul": 3}
# Which of the 38 languages write each script (kana and Han count together: Japanese mixes them).
_CANDIDATES = {
    "Latin": ("en", "fr", "pt", "es", "tr", "it", "de", "vi", "ms", "id", "tl", "pl", "cs", "nl"),
    "Cyrillic": ("ru", "uk", "kk", "mn"),
    "Arabic": ("ar", "fa", "ur", "ug", "kk"),
    "Devanagari": ("hi", "mr"),
    "Han": ("zh", "zh-Hant", "yue", "ja"),
    "Tibetan": ("bo",),
    "Myanmar": ("my",),
    "Khmer": ("km",),
    "Mongolian": ("mn",),
    "Thai": ("th",),
    "Hangul": ("ko",),
    "Hebrew": ("he",),
    "Bengali": ("bn",),
    "Gujarati": ("gu",),
    "Tamil": ("ta",),
    "Telugu": ("te",),
}

# Written Cantonese: characters standard written Chinese does not use (its negation, copula, particles, pronouns).
# 係 counts apart from 關係 and 聯係 (Traditional Mandarin), 唔 only before a word (Mandarin writes it as "hmm,");
# then Cantonese words made of characters Mandarin also writes (呢個 "this", 點解 "why", 食飯 "eat").
_CANTONESE = frozenset("嘅咗喺冇佢哋嚟啲乜嘢睇噉嗰咩畀攞諗搵瞓啱㗎喎嘥冚攰咁餸嬲咪揾谂")
_CANTONESE_IN_CONTEXT = re.compile(
    r"(?<![關关聯联])係|唔(?=\w)|呢[個个度排]|而家|[點点][解樣样]|[邊边][度個个]|成日|[琴尋寻聽听]日"
    r"|[鍾钟]意|食[飯饭]|[返放]工"
)

# Arabic script. Letters of the Turkic alphabets (Uyghur, Kazakh) that Arabic, Persian and Urdu do not write;
# NFKC has already split Kazakh's hamza letters (ٵ ٶ ٷ ٸ) into a base letter and the high hamza ٴ.
_TURKIC = frozenset("ەۇۋڭۆۈېٴ")
_UYGHUR = frozenset("ېۈغخ")  # é, ü, and gh/x where Kazakh writes ع and ح
_KAZAKH = frozenset("ٴعح")  # the front-vowel mark, and ғ/х
# Urdu's retroflex letters, nasal noon, bari ye, heh goal and do-chashmi heh: no Persian or Arabic word has them.
_URDU = frozenset("ٹڈڑںےۓہھ")
_PERSIAN = frozenset("پچژگیک")  # its four added letters, and its own ye and kaf (Arabic writes ي and ك)
_ARABIC = frozenset("ةأإؤ")  # ta marbuta and the hamza seats; not ي ك ى, which old Persian text writes too
_TURKIC_VOWELS = frozenset("اەوۇۆۈىې")  # Uyghur writes ئ before a word's first vowel, Kazakh does not
_MEDIAL_ALEF_MAKSURA = re.compile(r"ى\w")  # Arabic writes ى only at a word's end, Uyghur and Kazakh anywhere (ı, i)

# Cyrillic letters that only some of ru, uk, kk, mn use.
_KAZAKH_CYRILLIC = frozenset("әғқңұһ")
_UKRAINIAN = frozenset("іїєґ")
_MONGOLIAN_CYRILLIC = frozenset("өү")

# Malay and Indonesian share most words; these are the everyday ones where they part (ms kedai, id toko).
_MALAY_WORDS = frozenset(
    "kerana hendak mahu sahaja awak kedai bandar kerajaan selepas semasa berhampiran pejabat baharu sila seronok "
    "percuma wang tandas basikal teksi polis telefon hospital kaunter stesen majlis hujung borang hantar dihantar "
    "menghantar kanak-kanak universiti kualiti aktiviti bas lori esok faham kasut seluar tuala tingkap ogos mac "
    "disember julai jun berjaya kerap pawagam jualan membeli-belah beratur tempahan bilik encik mula berjimat "
    "mesyuarat jadual muzium bapa".split()
)
_INDONESIAN_WORDS = frozenset(
    "karena mau bisa toko kota pemerintah provinsi setelah kantor silakan formulir loket mobil uang sepeda taksi "
    "telepon ponsel halte bus nggak enggak gak banget sih dong kok aja gimana ketemu kapan besok sore kulkas sepatu "
    "celana handuk liburan libur sulit gampang agustus maret desember juli juni universitas kualitas aktivitas "
    "fasilitas apotek rupiah bioskop antre kamar bapak mulai berhemat jadwal museum diperbarui".split()
)
# Hindi and Marathi share the Devanagari script and much vocabulary; their function words part.
_HINDI_WORDS = frozenset("है हैं था थी थे और नहीं में को से ने यह वह कि भी हम मैं क्या आप तुम".split())
_MARATHI_WORDS = frozenset("आहे आहेत होते होता होती आणि नाही मी मला तुम्ही आम्ही आपण त्या काय खूप".split())
# wordfreq's small lists (the words of frequency 1e-6 and more) for the languages that share a script with others;
# Kazakh, Mongolian and Marathi have none, so any word counts as at the cut-off for them.
_WORD_LISTS = {code: code for code in "en fr pt es tr it de vi ms id pl cs nl ru uk ar fa ur hi".split()}
_WORD_LISTS["tl"] = "fil"  # wordfreq's code for Filipino
_UNLISTED = 1e-6
_UNKNOWN_WORD = 1e-7  # a word missing from a list: rarer there than the list's cut-off
_MAX_WORDS = 3
_SHORT_CHARS = 64  # three words fit, a long German compound among them; it also bounds what the word cache holds
_DEVANAGARI_WORD = re.compile(r"[\u0900-\u0963\u0966-\u097F]+")
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")
_ARABIC_WORD = re.compile(r"[\u0600-\u06FF]+")


def _script(ch: str) -> str | None:
    words = unicodedata.name(ch, "").split(" ", 2)[:2]
    return next((_SCRIPT_WORDS[w] for w in words if w in _SCRIPT_WORDS), None)


@lru_cache(maxsize=1)
def _identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages([code for code in BY_CODE if code in identifier.labels])
    return identifier


def prepare() -> None:
    """Load the models now (a few seconds of CPU) rather than inside the first requests."""
    _identifier()
    for code in _WORD_LISTS:
        _frequency("a", code)


def _statistical(text: str, candidates: tuple[str, ...]) -> tuple[str, float]:
    """py3langid's best among `candidates`, weighed by word frequencies on 1-3 words, renormalized over them."""
    scores = {code: p for code, p in _identifier().rank(text) if code in candidates}
    words = _words(text) if len(text) <= _SHORT_CHARS else []
    if 0 < len(words) <= _MAX_WORDS:
        listed = {code: [_frequency(word, code) for word in words] for code in candidates if code in _WORD_LISTS}
        # Only where every word is one a list knows: longer inputs are left to the character model, which is right
        # on them already, and so are words cut short as someone types, which would weigh as rare words.
        if listed and all(map(any, zip(*listed.values()))):
            for code in scores:
                weights = [max(f, _UNKNOWN_WORD) for f in listed[code]] if code in listed else [_UNLISTED] * len(words)
                scores[code] *= math.prod(weights)
    total = sum(scores.values())
    code = max(scores, key=scores.__getitem__)
    return code, scores[code] / total if total > 0 else 1 / len(scores)


def _words(text: str) -> list[str]:
    return [word for word in text.split() if any(ch.isalpha() for ch in word)]


# Bounded: the words are anyone's. wordfreq's own cache (word_frequency) can lose an entry to another thread
# clearing it between storing and reading it, so the lists are read directly.
@lru_cache(maxsize=65536)
def _frequency(word: str, code: str) -> float:
    """How often the language writes `word`, folded as wordfreq folds it for that language (Turkish İ, Arabic marks);
    a word it splits (l'ami, apa-apa) is as rare as 1/f = 1/f1 + 1/f2, wordfreq's rule."""
    from wordfreq import get_frequency_dict, lossy_tokenize

    language = _WORD_LISTS[code]
    frequencies = get_frequency_dict(language, "small")
    tokens = lossy_tokenize(word, language)
    if not tokens or any(token not in frequencies for token in tokens):
        return 0.0
    return 1 / sum(1 / frequencies[token] for token in tokens)


def detect(text: str) -> Detection | None:
    """The most likely supported language of `text`, or None when it has no letters of a script the 38 write."""
    text = unicodedata.normalize("NFKC", text)
    scripts = Counter(_script(ch) for ch in text if ch.isalpha())  # None: a script none of the 38 write
    kana = scripts.pop("Kana", 0)
    if kana:
        scripts["Han"] += kana
    weights = {script: n * (1 if script is None else _SYLLABLE_WEIGHT.get(script, 1)) for script, n in scripts.items()}
    script = max(weights, key=weights.__getitem__, default=None)
    if script is None:
        return None
    count = scripts[script]
    share = weights[script] / sum(weights.values())
    candidates = _CANDIDATES[script]
    if len(candidates) == 1:
        code, certainty = candidates[0], 1.0
    elif script == "Han":
        code, certainty = ("ja", 1.0) if kana >= 0.1 * count else _chinese(text, count)
    elif script == "Arabic":
        code, certainty = _arabic(text, count)
    elif script == "Cyrillic":
        code, certainty = _cyrillic(text, count)
    elif script == "Devanagari":
        code, certainty = _hindi_or_marathi(text)
    else:
        code, certainty = _statistical(text, candidates)
        if code in ("ms", "id"):
            code, certainty = _malay_or_indonesian(text, code, certainty)
    return Detection(BY_CODE[code], round(min(1.0, share * certainty), 3))


def _evidence(votes: dict[str, int], fallback: tuple[str, float]) -> tuple[str, float]:
    """The language with the most votes and its share of them; `fallback` when no language got any."""
    total = sum(votes.values())
    if not total:
        return fallback
    code = max(votes, key=votes.__getitem__)
    return code, votes[code] / total


def _chinese(text: str, num_han: int) -> tuple[str, float]:
    """yue where Cantonese words are at least 2% of the characters; else the script, character by character."""
    markers = sum(ch in _CANTONESE for ch in text) + len(_CANTONESE_IN_CONTEXT.findall(text))
    if markers and markers >= 0.02 * num_han:
        return "yue", 1.0
    kinds = Counter(hanzidentifier.identify(ch) for ch in text if hanzidentifier.has_chinese(ch))
    # Characters both systems write say nothing; a text made only of them reads as Simplified, at even odds.
    return _evidence(
        {"zh-Hant": kinds[hanzidentifier.TRADITIONAL], "zh": kinds[hanzidentifier.SIMPLIFIED]}, ("zh", 0.5)
    )


def _arabic(text: str, num_arabic: int) -> tuple[str, float]:
    letters = Counter(text)
    turkic = sum(letters[ch] for ch in _TURKIC)
    # ى inside a word adds to the evidence but never decides alone: old Persian text writes its ye as ى too.
    if turkic and turkic + len(_MEDIAL_ALEF_MAKSURA.findall(text)) >= 0.02 * num_arabic:
        # Uyghur or Kazakh: their own letters, and how a word that starts with a vowel is spelled.
        initials = Counter(word[0] for word in _ARABIC_WORD.findall(text))
        votes = {
            "ug": sum(letters[ch] for ch in _UYGHUR) + initials["ئ"],
            "kk": sum(letters[ch] for ch in _KAZAKH) + sum(initials[ch] for ch in _TURKIC_VOWELS),
        }
        return _evidence(votes, ("ug", 0.5))
    if any(letters[ch] for ch in _URDU):
        return "ur", 1.0
    persian, arabic = (sum(letters[ch] for ch in group) for group in (_PERSIAN, _ARABIC))
    if arabic > persian:
        return "ar", arabic / (arabic + persian)
    # Urdu writes the Persian letters too: without a letter of its own, the statistical model tells them apart.
    return _statistical(text, ("fa", "ur") if persian else ("ar", "fa", "ur"))


def _cyrillic(text: str, num_cyrillic: int) -> tuple[str, float]:
    lower = Counter(text.lower())
    least = max(1, 0.01 * num_cyrillic)
    if sum(lower[ch] for ch in _KAZAKH_CYRILLIC) >= least:
        return "kk", 1.0
    if lower["і"] and any(lower[ch] for ch in "ыэёъөү"):
        return "kk", 1.0  # і is Kazakh's and Ukrainian's, and Ukrainian has none of these
    if sum(lower[ch] for ch in _UKRAINIAN) >= least:
        return "uk", 1.0
    if sum(lower[ch] for ch in _MONGOLIAN_CYRILLIC) >= least:
        return _statistical(text, ("kk", "mn"))  # a Kazakh text short enough to show none of its own letters
    return _statistical(text, ("ru", "uk", "kk", "mn"))


def _hindi_or_marathi(text: str) -> tuple[str, float]:
    words = _DEVANAGARI_WORD.findall(text)
    votes = {
        "hi": sum(w in _HINDI_WORDS for w in words),
        # ळ is a Marathi letter; -च्या its genitive ending
        "mr": sum(w in _MARATHI_WORDS or w.endswith("च्या") for w in words) + text.count("ळ"),
    }
    return _evidence(votes, _statistical(text, ("hi", "mr")))


def _malay_or_indonesian(text: str, code: str, certainty: float) -> tuple[str, float]:
    words = _WORD.findall(text.lower())
    votes = {"ms": sum(w in _MALAY_WORDS for w in words), "id": sum(w in _INDONESIAN_WORDS for w in words)}
    return _evidence(votes, (code, certainty))
