import pytest

from hymt.errors import BadRequest
from hymt.languages import LANGUAGES, resolve


def test_thirty_eight_languages_with_three_names_each():
    assert len(LANGUAGES) == 38
    assert len({lang.code for lang in LANGUAGES}) == 38
    assert all(lang.english and lang.chinese and lang.native for lang in LANGUAGES)


@pytest.mark.parametrize(
    "alias,code",
    [
        ("zh-CN", "zh"),
        ("zh-TW", "zh-Hant"),
        ("zh_HK", "zh-Hant"),
        ("pt-BR", "pt"),
        ("yue", "yue"),
        ("EN", "en"),
        ("German", "de"),
        ("iw", "he"),
        ("fil", "tl"),
        ("藏语", "bo"),
        ("zt", "zh-Hant"),
    ],
)
def test_aliases(alias, code):
    assert resolve(alias).code == code


def test_unknown_code_lists_close_matches():
    with pytest.raises(BadRequest) as err:
        resolve("englsh")
    assert "did you mean en" in err.value.message
    assert err.value.error_type == "unsupported_language"


def test_unsupported_language_is_refused():
    with pytest.raises(BadRequest):
        resolve("xx-nope")


def test_unsupported_code_without_close_matches_ends_its_sentence():
    with pytest.raises(BadRequest) as err:
        resolve("zz", "target language")
    assert err.value.message.startswith("unsupported target language 'zz'. Supported: zh, en, ")
