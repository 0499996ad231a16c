from hymt.cleanup import clean, cut_repetition, is_echo, max_new_tokens


def test_runaway_phrase_loop_is_cut_to_one_occurrence():
    text, cut = cut_repetition("The cat sat. " + "and then " * 30)
    assert cut
    assert text == "The cat sat. and then"


def test_loop_cut_with_a_partial_last_unit():
    text, cut = cut_repetition("你好。" + "谢谢你的帮助，" * 10 + "谢谢")
    assert cut
    assert text.count("谢谢你的帮助") == 1


def test_single_character_loop():
    assert cut_repetition("Wow" + "!" * 40) == ("Wow!", True)


def test_ordinary_text_and_numbers_are_kept():
    for text in ("Hello world.", "1000000000000000000", "ha ha ha", "He said no, no, no!"):
        assert cut_repetition(text) == (text, False)


def test_special_tokens_and_outer_space_are_stripped():
    result = clean("Hallo", "  Hello<|eos|><|extra_0|> ")
    assert result.text == "Hello"
    assert not result.echo and not result.loop_cut
    # The 1.8B models' tokens (full-width bars); a text between ASCII bars that merely looks alike stays.
    assert clean("Hallo", "Hello<｜hy_place▁holder▁no▁2｜><｜hy_User｜>").text == "Hello"
    assert clean("Hallo", "a <|not a token|> b").text == "a <|not a token|> b"


def test_echo_detection():
    assert is_echo("Bonjour le monde !", "bonjour le monde")
    assert not is_echo("Bonjour le monde", "Hello world")
    assert not is_echo("12:30", "12:30")  # nothing to translate is not an echo


def test_output_budget_scales_with_the_source():
    assert max_new_tokens(10, 1024) == 46
    assert max_new_tokens(1000, 1024) == 1024
    assert max_new_tokens(0, 1024) == 16
    assert max_new_tokens(100, 8) == 8  # the setting is a cap, also below the room for short segments
