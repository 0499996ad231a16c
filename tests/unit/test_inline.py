"""Property tests for the marker round trip: markup as numbered markers, and back on the translated words."""

from __future__ import annotations

from hypothesis import given, strategies as st

from hymt.documents import finish, open_document
from hymt.documents.inline import MARKER, Tag, Void, encode, fallback, plain, restore, voids

words = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


def trees(depth: int = 3):
    leaf = st.one_of(words, st.builds(lambda n: Void(n), st.integers(0, 99)))
    if depth == 0:
        return st.lists(leaf, max_size=4)
    return st.lists(
        st.one_of(leaf, st.builds(lambda n, c: Tag(n, c), st.integers(0, 99), trees(depth - 1))), max_size=4
    )


def shape(items):
    out = []
    for i in items:
        if isinstance(i, Tag):
            out.append(("tag", i.payload, shape(i.children)))
        elif isinstance(i, Void):
            out.append(("void", i.payload))
        elif out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + i)
        elif i:
            out.append(("text", i))
    return out


@given(trees())
def test_encode_then_restore_is_the_identity(items):
    encoded = encode(items)
    if encoded is None:  # the text itself contains something that reads as a marker
        assert any(isinstance(i, str) and MARKER.search(i) for i in _texts(items))
        return
    text, table = encoded
    assert shape(restore(text, table)) == shape(items)


@given(trees(), st.data())
def test_a_mangled_translation_is_refused_or_well_formed(items, data):
    encoded = encode(items)
    if encoded is None or not encoded[1]:
        return
    text, table = encoded
    markers = list(MARKER.finditer(text))
    victim = data.draw(st.sampled_from(markers))
    mangled = data.draw(
        st.sampled_from(
            [
                text[: victim.start()] + text[victim.end() :],  # dropped
                text + victim.group(0),  # repeated
                text[: victim.start()] + "<s999>" + text[victim.end() :],  # invented
            ]
        )
    )
    restored = restore(mangled, table)
    if restored is not None:  # only a harmless move is accepted: every marker once, well nested
        assert sorted(_ids(restored, table)) == sorted(table)
    safe = fallback(mangled, items)
    assert not MARKER.search(safe[0]) and len(safe) == 1 + len(voids(items))


@given(trees())
def test_translated_words_land_inside_their_markup(items):
    encoded = encode(items)
    if encoded is None:
        return
    text, table = encoded
    parts = MARKER.sub(lambda m: "\0" + m.group(0) + "\0", text).split("\0")
    translated = "".join(p if MARKER.fullmatch(p) else _doubled(p) for p in parts)
    restored = restore(translated, table)
    assert restored is not None and plain(restored) == _doubled(plain(items))
    assert [i.payload for i in voids(restored)] == [i.payload for i in voids(items)]


def _doubled(text: str) -> str:
    """A stand-in translation that changes every word and keeps the markers."""
    return "".join(c * 2 for c in text)


@given(
    st.lists(
        st.sampled_from(
            [
                "Press ",
                "<b>Save</b>",
                " now",
                "<br>",
                '<a href="/x">here</a>',
                "<i>x</i>",
                "<code>a&lt;b</code>",
                " and ",
            ]
        ),
        min_size=1,
        max_size=8,
    )
)
def test_html_fragments_keep_their_tags(parts):
    from lxml import html as lxml_html

    source = "<p>" + "".join(parts) + "</p>"
    prepared = open_document(".html", source.encode(), "de")
    result = finish(prepared, [t.upper().replace("<S", "<s").replace("</S", "</s") for t in prepared.texts])
    before, after = lxml_html.fragment_fromstring(source), lxml_html.fragment_fromstring(result.data.decode())
    assert [(e.tag, dict(e.attrib)) for e in after.iter()] == [(e.tag, dict(e.attrib)) for e in before.iter()]
    assert " ".join(after.text_content().lower().split()) == " ".join(before.text_content().lower().split())
    assert result.markup_fallbacks == 0


def _texts(items):
    for i in items:
        if isinstance(i, str):
            yield i
        elif isinstance(i, Tag):
            yield from _texts(i.children)


def _ids(items, table):
    by_payload = {id(v.payload): n for n, v in table.items()}
    for i in items:
        if isinstance(i, (Tag, Void)):
            yield by_payload.get(id(i.payload), -1)
        if isinstance(i, Tag):
            yield from _ids(i.children, table)
