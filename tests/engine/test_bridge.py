"""Documents on the service's job bridge: documents/ knows no engine, a document's progress comes from its jobs'
events, a consumer that leaves stops the work, and `format: html` prepares its fragments off the event loop."""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

import pytest

import hymt
import samples

DOCUMENTS = Path(hymt.__file__).parent / "documents"


def _imported(path: Path) -> set[str]:
    """The modules a file imports, relative ones resolved against the hymt package."""
    package = "hymt." + ".".join(path.relative_to(DOCUMENTS.parent).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
    return found


def test_documents_import_nothing_from_the_engine():
    assert _imported(DOCUMENTS / "translate.py") >= {"hymt.prompts", "hymt.documents.inline"}  # the resolver works
    for path in sorted(DOCUMENTS.glob("*.py")):
        below = sorted(m for m in _imported(path) if m.split(".")[:2] in (["hymt", "engine"], ["hymt", "translation"]))
        assert not below, f"{path.name} imports {below}"


@pytest.fixture
def service(translator):
    from hymt.api.service import Service

    return Service(settings=translator.settings, decision=translator.decision, translator=translator)


def _upload(service, lines: int):
    from hymt.api import pipeline
    from hymt.languages import resolve

    text = "\n".join(f"Line {i} of a document to translate." for i in range(lines)).encode()
    return asyncio.run(pipeline.open_upload(service.settings, ".txt", "doc.txt", text, resolve("en"), resolve("de")))


def test_progress_comes_from_the_jobs_as_each_text_settles(service):
    from hymt import documents
    from hymt.api import pipeline

    upload = _upload(service, 12)
    seen: list = []
    result = asyncio.run(pipeline.translate(service, upload, None, lambda done, total: seen.append((done, total))))
    assert seen == [(n, 12) for n in range(1, 13)]
    assert isinstance(result, documents.Result) and result.segments == 12
    assert result.data.decode().count("\n") == 11


def test_a_consumer_that_leaves_stops_the_document(service, translator):
    from hymt.api import bridge, pipeline

    upload = _upload(service, 1000)  # eight parts: three at a time in the engine
    before = translator.snapshot().segments

    async def leave_after_the_first_step():
        first: asyncio.Future = asyncio.get_running_loop().create_future()

        def progress(done, total):
            if not first.done():
                first.set_result((done, total))

        work = asyncio.ensure_future(pipeline.translate(service, upload, None, progress))
        settled = await first
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        return settled

    assert asyncio.run(leave_after_the_first_step())[1] == 1000
    deadline = time.monotonic() + 10
    while (translator.snapshot().queue_depth or translator.snapshot().in_flight) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert translator.snapshot().queue_depth == 0 and translator.snapshot().in_flight == 0
    assert translator.snapshot().segments - before <= (bridge.PARTS_AHEAD + 1) * bridge.PART_TEXTS


def test_html_fragments_are_read_and_written_off_the_event_loop(in_process, monkeypatch):
    from hymt import documents
    from hymt.documents import html

    on_loop = []

    def watched(function):
        def call(*args, **kwargs):
            try:
                asyncio.get_running_loop()
                on_loop.append(function.__name__)
            except RuntimeError:  # a worker thread: no event loop runs here
                pass
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(html, "read_fragment", watched(html.read_fragment))
    monkeypatch.setattr(documents, "finish", watched(documents.finish))
    response = in_process.post(
        "/translate", json={"q": "<p>Hello <b>world</b>.</p>", "source": "en", "target": "de", "format": "html"}
    )
    assert response.status_code == 200 and response.json()["translatedText"].startswith("<p>")
    assert on_loop == []


def test_bold_italic_and_link_keep_their_words_on_the_test_model(translator):
    from hymt.api import pipeline
    from hymt.api.service import Service
    from hymt.languages import resolve

    service = Service(settings=translator.settings, decision=translator.decision, translator=translator)
    upload = asyncio.run(
        pipeline.open_upload(
            service.settings, ".docx", "three.docx", samples.docx_three_runs(), resolve("en"), resolve("de")
        )
    )
    result = asyncio.run(pipeline.translate(service, upload, None))
    assert result.markup_fallbacks == 0 and sum(result.paths.values()) == 1
    runs, links = samples.docx_formatting(result.data)
    bold = [text for text, b, _ in runs if b]
    italic = [text for text, _, i in runs if i]
    assert len(bold) == 1 and bold[0].strip() and bold[0] != "Save"
    assert len(italic) == 1 and italic[0].strip() and italic[0] != "cancel"
    assert len(links) == 1 and links[0].strip() and links[0] != "the site"


def test_a_documents_glossary_and_context_go_with_each_of_its_parts(translator, monkeypatch):
    """The request's options reach every job of a document (with the formatted prompt for texts with markup), and
    a glossary term that occurs in a text goes into that text's prompt."""
    from hymt.api import pipeline
    from hymt.api.service import Service
    from hymt.glossary import Term
    from hymt.languages import resolve
    from hymt.translation.jobs import Options

    submitted = []
    submit = translator.submit

    def recording(*args, **kwargs):
        job = submit(*args, **kwargs)
        submitted.append((kwargs["options"], job))
        return job

    monkeypatch.setattr(translator, "submit", recording)
    service = Service(settings=translator.settings, decision=translator.decision, translator=translator)
    options = Options(glossary=(Term("GPU", "Grafikkarte"),), context=False)
    text = b"The GPU is fast.\n\nA line without the term.\n"
    upload = asyncio.run(
        pipeline.open_upload(service.settings, ".txt", "gpu.txt", text, resolve("en"), resolve("de"), options)
    )
    asyncio.run(pipeline.translate(service, upload, None))
    assert submitted and all(o.glossary == options.glossary and o.formatted and not o.context for o, _ in submitted)
    applied = [terms for _, job in submitted for terms in job.terms]
    assert [t.target for terms in applied for t in terms] == ["Grafikkarte"]
