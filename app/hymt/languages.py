"""The 38 languages Hunyuan-MT-7B serves: codes, names in English, Chinese and the language itself, and aliases."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from .errors import BadRequest


@dataclass(frozen=True)
class Language:
    code: str
    english: str
    chinese: str
    native: str


LANGUAGES: tuple[Language, ...] = (
    Language("zh", "Chinese", "中文", "中文"),
    Language("en", "English", "英语", "English"),
    Language("fr", "French", "法语", "Français"),
    Language("pt", "Portuguese", "葡萄牙语", "Português"),
    Language("es", "Spanish", "西班牙语", "Español"),
    Language("ja", "Japanese", "日语", "日本語"),
    Language("tr", "Turkish", "土耳其语", "Türkçe"),
    Language("ru", "Russian", "俄语", "Русский"),
    Language("ar", "Arabic", "阿拉伯语", "العربية"),
    Language("ko", "Korean", "韩语", "한국어"),
    Language("th", "Thai", "泰语", "ไทย"),
    Language("it", "Italian", "意大利语", "Italiano"),
    Language("de", "German", "德语", "Deutsch"),
    Language("vi", "Vietnamese", "越南语", "Tiếng Việt"),
    Language("ms", "Malay", "马来语", "Bahasa Melayu"),
    Language("id", "Indonesian", "印尼语", "Bahasa Indonesia"),
    Language("tl", "Filipino", "菲律宾语", "Filipino"),
    Language("hi", "Hindi", "印地语", "हिन्दी"),
    Language("zh-Hant", "Traditional Chinese", "繁体中文", "繁體中文"),
    Language("pl", "Polish", "波兰语", "Polski"),
    Language("cs", "Czech", "捷克语", "Čeština"),
    Language("nl", "Dutch", "荷兰语", "Nederlands"),
    Language("km", "Khmer", "高棉语", "ភាសាខ្មែរ"),
    Language("my", "Burmese", "缅甸语", "မြန်မာဘာသာ"),
    Language("fa", "Persian", "波斯语", "فارسی"),
    Language("gu", "Gujarati", "古吉拉特语", "ગુજરાતી"),
    Language("ur", "Urdu", "乌尔都语", "اردو"),
    Language("te", "Telugu", "泰卢固语", "తెలుగు"),
    Language("mr", "Marathi", "马拉地语", "मराठी"),
    Language("he", "Hebrew", "希伯来语", "עברית"),
    Language("bn", "Bengali", "孟加拉语", "বাংলা"),
    Language("ta", "Tamil", "泰米尔语", "தமிழ்"),
    Language("uk", "Ukrainian", "乌克兰语", "Українська"),
    Language("bo", "Tibetan", "藏语", "བོད་ཡིག"),
    Language("kk", "Kazakh", "哈萨克语", "قازاق تىلى"),
    Language("mn", "Mongolian", "蒙古语", "ᠮᠣᠩᠭᠣᠯ"),
    Language("ug", "Uyghur", "维吾尔语", "ئۇيغۇرچە"),
    Language("yue", "Cantonese", "粤语", "粵語"),
)

BY_CODE: dict[str, Language] = {lang.code: lang for lang in LANGUAGES}

# Codes people and other tools send for the same languages (BCP 47 regions and scripts, ISO 639-2/3, LibreTranslate).
ALIASES: dict[str, str] = {
    "zh-cn": "zh",
    "zh-hans": "zh",
    "zh-sg": "zh",
    "zh-hans-cn": "zh",
    "zho": "zh",
    "chi": "zh",
    "cmn": "zh",
    "zh-tw": "zh-Hant",
    "zh-hk": "zh-Hant",
    "zh-mo": "zh-Hant",
    "zh-hant-tw": "zh-Hant",
    "zt": "zh-Hant",
    "yue-hk": "yue",
    "zh-yue": "yue",
    "en-us": "en",
    "en-gb": "en",
    "eng": "en",
    "pt-br": "pt",
    "pt-pt": "pt",
    "por": "pt",
    "es-es": "es",
    "es-mx": "es",
    "es-419": "es",
    "spa": "es",
    "fr-fr": "fr",
    "fr-ca": "fr",
    "fra": "fr",
    "fre": "fr",
    "de-de": "de",
    "de-at": "de",
    "de-ch": "de",
    "deu": "de",
    "ger": "de",
    "ja-jp": "ja",
    "jpn": "ja",
    "ko-kr": "ko",
    "kor": "ko",
    "ru-ru": "ru",
    "rus": "ru",
    "ar-sa": "ar",
    "ara": "ar",
    "tr-tr": "tr",
    "tur": "tr",
    "it-it": "it",
    "ita": "it",
    "vi-vn": "vi",
    "vie": "vi",
    "th-th": "th",
    "tha": "th",
    "ms-my": "ms",
    "msa": "ms",
    "may": "ms",
    "id-id": "id",
    "in": "id",
    "ind": "id",
    "fil": "tl",
    "tgl": "tl",
    "hi-in": "hi",
    "hin": "hi",
    "pl-pl": "pl",
    "pol": "pl",
    "cs-cz": "cs",
    "ces": "cs",
    "cze": "cs",
    "nl-nl": "nl",
    "nl-be": "nl",
    "nld": "nl",
    "dut": "nl",
    "km-kh": "km",
    "khm": "km",
    "my-mm": "my",
    "mya": "my",
    "bur": "my",
    "fa-ir": "fa",
    "fas": "fa",
    "per": "fa",
    "gu-in": "gu",
    "guj": "gu",
    "ur-pk": "ur",
    "urd": "ur",
    "te-in": "te",
    "tel": "te",
    "mr-in": "mr",
    "mar": "mr",
    "he-il": "he",
    "iw": "he",
    "heb": "he",
    "bn-bd": "bn",
    "bn-in": "bn",
    "ben": "bn",
    "ta-in": "ta",
    "tam": "ta",
    "uk-ua": "uk",
    "ukr": "uk",
    "bo-cn": "bo",
    "bod": "bo",
    "tib": "bo",
    "kk-cn": "kk",
    "kk-arab": "kk",
    "kaz": "kk",
    "mn-cn": "mn",
    "mn-mong": "mn",
    "mon": "mn",
    "ug-cn": "ug",
    "uig": "ug",
}


def _index() -> dict[str, str]:
    index = {lang.code.lower(): lang.code for lang in LANGUAGES}
    for lang in LANGUAGES:
        index.setdefault(lang.english.lower(), lang.code)
        index.setdefault(lang.chinese, lang.code)
        index.setdefault(lang.native.lower(), lang.code)
    index.update(ALIASES)
    return index


_INDEX = _index()


def resolve(code: str, field: str = "language") -> Language:
    """Map a code, alias or name ("zh-TW", "pt-BR", "German") to a Language, or raise BadRequest with close matches."""
    key = code.strip().replace("_", "-").lower() if isinstance(code, str) else ""
    if key in _INDEX:
        return BY_CODE[_INDEX[key]]
    close = difflib.get_close_matches(key, list(_INDEX), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(dict.fromkeys(_INDEX[c] for c in close))}?" if close else "."
    raise BadRequest(
        f"unsupported {field} {code!r}{hint} Supported: {', '.join(BY_CODE)}",
        error_type="unsupported_language",
    )


def is_chinese(lang: Language) -> bool:
    """Whether the official prompts treat this language as the Chinese side (ZH<=>XX template)."""
    return lang.code in ("zh", "zh-Hant", "yue")
