"""The engine's job types: importable without torch, and streamed text decoded a few tokens at a time."""

import subprocess
import sys

from hymt.cleanup import Cleaned
from hymt.languages import resolve
from hymt.segment import split
from hymt.translation.jobs import IncrementalText, Job


def test_the_api_parsing_and_job_types_import_without_torch():
    code = "import sys, hymt.api.parsing, hymt.translation.jobs; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_incremental_text_decodes_only_new_tokens_and_waits_for_whole_characters():
    # A byte-level vocabulary: each token is one UTF-8 byte; "é" is two tokens.
    text = "caf\u00e9 ok"
    ids = list(text.encode("utf-8"))
    calls = []

    def decode(tokens):
        calls.append(len(tokens))
        return bytes(tokens).decode("utf-8", errors="replace")

    partial = IncrementalText()
    seen = [partial.update(ids[:n], decode) for n in range(1, len(ids) + 1)]
    assert seen[-1] == text
    assert "\ufffd" not in "".join(seen)  # half a character is never shown
    assert seen[3] == "caf"  # the first byte of "é" alone: held back
    assert max(calls) <= 3  # never the whole output again
    assert partial.update(ids[:2], decode) == "ca"  # translated again (a glossary retry): starts over


def test_a_document_is_put_together_once_all_its_segments_are_translated():
    documents = [split(text, lambda t: len(t.split()), 64) for text in ("One. Two.\nThree.", "Four.")]
    refs = [(d, s) for d, doc in enumerate(documents) for s in range(len(doc.segments))]
    job = Job(id=1, target=resolve("de", "target language"), documents=documents, refs=refs)
    job.results = [None] * len(refs)
    assert len(documents[0].segments) >= 2
    for n, (d, _) in enumerate(refs):
        if d == 0:
            assert job.document_text(0) is None  # a segment of it is not translated yet
        job.results[n] = Cleaned(f"<{n}>", loop_cut=False, echo=False)
    assert job.document_text(0) == job.texts()[0] and "<0>" in job.texts()[0]
    assert job.document_text(1) == job.texts()[1] == f"<{len(refs) - 1}>"
