"""An XML fragment as DeepL's tag_handling "xml" reads one: text with elements of any names in it, written back with
every element where it was. Elements are inline (inside the sentence) unless named in `splitting` (each one's content
stands apart); those named in `ignore` are carried whole, untranslated. Attributes are never translated, whitespace
is kept as it was, and no entity is resolved (the guard's parser). A text that is not well-formed XML is translated
as plain text, every character of it kept, rather than refused: "a < b" is a sentence, not broken markup.
"""

from __future__ import annotations

from lxml import etree

from .base import NOT_XML, Extraction
from .guard import parser
from .html import Collector, Rules
from .xmlinline import localname

# The fragment is parsed inside this element (a name no client's XML has: it is not an XML name one can declare).
_WRAPPER = "hymt-fragment"


def rules(splitting: frozenset[str], ignore: frozenset[str]) -> Rules:
    def named(el: etree._Element, names: frozenset[str]) -> bool:
        return isinstance(el.tag, str) and localname(el) in names

    return Rules(
        inline=lambda el: not named(el, splitting) or named(el, ignore),
        classify=lambda el: "tag" if isinstance(el.tag, str) and not named(el, ignore) else "void",
        no_translate=lambda el: named(el, ignore),
        html=False,
    )


def read_fragment(text: str, target: str, splitting: frozenset[str], ignore: frozenset[str]) -> Extraction[str]:
    """The fragment's runs of text as segments; written back as the fragment, nothing added."""
    text = NOT_XML.sub("", text)
    if not text.strip():
        return Extraction([], lambda outcomes: text)
    try:
        wrapper = etree.fromstring(f"<{_WRAPPER}>{text}</{_WRAPPER}>", parser())
    except etree.XMLSyntaxError:
        # Not XML after all ("a < b"): translated as the plain text it is, every character kept.
        return Extraction([[text]], lambda outcomes: outcomes[0].text if outcomes else text)
    collector = Collector(rules(splitting, ignore))
    collector.block(wrapper)

    def serialize() -> str:
        return (wrapper.text or "") + "".join(etree.tostring(c, encoding="unicode") for c in wrapper)

    return collector.extraction(serialize)
