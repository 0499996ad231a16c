from hypothesis import example, given, settings, strategies as st

from hymt.segment import split


def chars(text: str) -> int:
    return len(text)


def roundtrip(text: str, max_tokens: int = 40, lang: str = "en") -> str:
    doc = split(text, chars, max_tokens, lang)
    return doc.join(doc.segments)


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab .。！?\n\r\t 你好།་ـا")) | st.characters(), max_size=300),
    st.integers(min_value=1, max_value=60),
)
@example("00000\x1eA", 1)
@example("a\u2028b\r\n\rc\x85", 2)
def test_split_then_join_gives_back_the_input(text, max_tokens):
    assert roundtrip(text, max_tokens) == text


NO_LINE_BREAKS = st.characters(
    blacklist_categories=("Cs",), blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=NO_LINE_BREAKS, max_size=80), max_size=30), st.integers(min_value=1, max_value=50))
def test_n_lines_in_n_lines_out_whatever_the_translation(lines, max_tokens):
    text = "\n".join(lines)
    doc = split(text, chars, max_tokens)
    translated = doc.join(["X\nY" for _ in doc.segments])  # even a translation with a line break
    assert translated.count("\n") == text.count("\n")
    for before, after in zip(text.split("\n"), translated.split("\n")):
        if before.strip() == "":
            assert after == before


def test_every_segment_fits_the_budget():
    text = "This is a sentence. " * 50 + "\n" + "x" * 500
    doc = split(text, chars, 64)
    assert all(len(s) <= 64 for s in doc.segments)
    assert doc.join(doc.segments) == text


def test_whitespace_between_and_around_segments_is_kept():
    text = "  Hello there.   How are you?\t\n\n\tIndented line.  \n"
    doc = split(text, chars, 14)
    assert doc.segments == ["Hello there.", "How are you?", "Indented line."]
    assert doc.join(["A", "B", "C"]) == "  A   B\t\n\n\tC  \n"


def test_sentences_are_grouped_up_to_the_budget():
    doc = split("One. Two. Three. Four.", chars, 10)
    assert doc.segments == ["One. Two.", "Three.", "Four."]


def test_chinese_and_japanese_split_on_their_punctuation():
    assert split("你好。我是学生！你呢？", chars, 6, "zh").segments == ["你好。", "我是学生！", "你呢？"]
    assert split("こんにちは。元気ですか？", chars, 8, "ja").segments == ["こんにちは。", "元気ですか？"]


def test_arabic_script_splits_on_its_question_mark():
    assert split("مرحبا. كيف حالك؟ أنا بخير", chars, 12, "ar").segments == ["مرحبا.", "كيف حالك؟", "أنا بخير"]


def test_tibetan_cut_at_shad_when_too_long():
    text = "བཀྲ་ཤིས་བདེ་ལེགས། ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།"
    doc = split(text, chars, 35, "bo")
    assert doc.segments == ["བཀྲ་ཤིས་བདེ་ལེགས།", "ཁྱེད་རང་སྐུ་གཟུགས་བདེ་པོ་ཡིན་པས།"]


def test_thai_cut_between_words_when_too_long():
    text = "สวัสดีครับ ผมชื่อสมชาย ยินดีที่ได้รู้จัก"
    doc = split(text, chars, 20, "th")
    assert doc.segments == ["สวัสดีครับ", "ผมชื่อสมชาย", "ยินดีที่ได้รู้จัก"]


def test_blank_and_whitespace_only_lines_are_not_segments():
    doc = split("\n   \n\t\n", chars, 10)
    assert doc.segments == []
    assert doc.join([]) == "\n   \n\t\n"


def test_character_cuts_keep_combining_marks_with_their_letter():
    doc = split("ยินดีที่ได้รู้จัก", chars, 5, "th")
    assert doc.join(doc.segments) == "ยินดีที่ได้รู้จัก"
    assert all(s[0] not in "ิีึืุูั่้๊๋็์" for s in doc.segments)
