"""Documents through the translator, one path for every caller (the document jobs' worker behind /translate_file,
/api/translate_file, /api/jobs and DeepL's /v2/document; `format: html` on /translate; and `hymt translate FILE`):
prepare the file off the event loop, translate its texts through the bridge as batch work (progress comes from
the translations' own events), and finish the file off the event loop again."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from .. import documents
from ..detect import detect
from ..documents import html as html_documents
from ..documents.translate import OnText, Translate, translate_document
from ..engine.sampling_params import Sampling
from ..languages import Language
from ..settings import Settings
from ..translation.jobs import Job, Options
from . import bridge
from .service import Service

Progress = tuple[int, int]  # (texts settled, texts in all)


@dataclass
class Upload:
    """A document read and ready to translate: its format, the name offered for its translation, its texts."""

    ext: str
    name: str
    prepared: documents.Prepared[bytes]
    source: Language | None  # the given language, else the one detected in the document; None: undetectable
    target: Language
    options: Options  # the request's glossary, context, style or background


async def open_upload(
    settings: Settings,
    ext: str,
    name: str,
    content: bytes,
    source: Language | None,
    target: Language,
    options: Options = Options(),
) -> Upload:
    """The document (of format `ext`, documents.extension) read after the hostile-file checks, and its language
    detected, off the event loop; `name`: the one offered for its translation (documents.download_name)."""
    prepared = await run_in_threadpool(
        documents.open_document, ext, content, target.code, documents.Limits.of(settings)
    )
    if source is None and prepared.texts:
        found = await run_in_threadpool(detect, prepared.sample())
        source = found.language if found else None
    return Upload(ext, name, prepared, source, target, options)


def report_json(result: documents.Result[bytes]) -> str:
    """What the translation of a file reports (segments, markup fallbacks), as a stored job keeps it."""
    return json.dumps(result.report())


async def translate(
    service: Service,
    upload: Upload,
    request: Request | None,
    on_progress: Callable[[int, int], None] | None = None,
    client: str = "",
    resume: Callable[[Translate], Translate] | None = None,
) -> documents.Result[bytes]:
    """The translated file; on_progress(settled, total) as its texts settle. A client that leaves has the
    translations cancelled (the bridge's). `client`: whose turn in the engine's fair order; `resume`: wraps the
    translating of texts (the document jobs keep what was translated, to resume from it)."""
    sampling = Sampling(greedy=service.settings.greedy)

    async def through_translator(texts: list[str], on_text: OnText | None) -> list[str]:
        return await bridge.translate_parts(
            service, texts, upload.source, upload.target, sampling, request, on_text, upload.options, client
        )

    through = resume(through_translator) if resume else through_translator
    translated = await translate_document(upload.prepared.texts, through, on_progress)
    return await run_in_threadpool(documents.finish, upload.prepared, translated.texts, translated.paths)


FragmentReader = Callable[[str, str], documents.Extraction[str]]  # (text, target code) -> its extraction


@dataclass
class Fragments:
    """Texts with markup translated as documents are: each written back, and what it reports."""

    results: list[documents.Result[str]]
    first_jobs: list[Job | None]  # per text, its first translation (its glossary report); None: no words in it


async def translate_fragments(
    service: Service,
    texts: list[str],
    sources: list[Language | None],
    target: Language,
    sampling: Sampling,
    request: Request | None,
    options: Options,
    quality: str,
    turn: bridge.Turn,
    read: FragmentReader = html_documents.read_fragment,
) -> Fragments:
    """Texts with markup (`format: html` on /translate; DeepL's tag_handling) the way documents take them: inline
    tags kept as markers, a text that lost them sent again with the stricter prompt, then run by run, and only then
    the safe form (documents.translate). The texts run side by side, each as interactive work of its own."""
    fragments = await run_in_threadpool(lambda: [documents.prepare(read(t, target.code)) for t in texts])
    options = dataclasses.replace(options, formatted=True)

    async def one(
        fragment: documents.Prepared[str], source: Language | None
    ) -> tuple[documents.Result[str], Job | None]:
        jobs: list[Job] = []

        async def through(pieces: list[str], on_text: OnText | None) -> list[str]:
            job = await bridge.run_to_end(
                service, [(p, source) for p in pieces], target, sampling, request, options, quality, turn
            )
            jobs.append(job)
            return job.texts()

        translated = await translate_document(fragment.texts, through) if fragment.texts else None
        result = await run_in_threadpool(
            documents.finish, fragment, translated.texts if translated else [], translated.paths if translated else None
        )
        return result, (jobs[0] if jobs else None)

    tasks = [asyncio.ensure_future(one(f, s)) for f, s in zip(fragments, sources)]
    try:
        done = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:  # one failed (or the client left): the others' work is not wanted either
            task.cancel()
        raise
    return Fragments([r for r, _ in done], [j for _, j in done])


async def read_fragments(texts: list[str], target: Language) -> list[documents.Prepared[str]]:
    """HTML fragments (`format: html`) read by a real HTML parser, off the event loop: each sentence with its
    inline tags as markers is one text."""
    return await run_in_threadpool(_read_fragments, texts, target)


def _read_fragments(texts: list[str], target: Language) -> list[documents.Prepared[str]]:
    return [documents.prepare(html_documents.read_fragment(t, target.code)) for t in texts]


async def write_fragments(
    texts: list[str], target: Language, fragments: list[documents.Prepared[str]], jobs: list[Job]
) -> list[list[documents.Result[str]]]:
    """Per job (each a candidate translation of all the fragments' texts, in order), the fragments written back,
    off the event loop. Each candidate after the first is written into its own fresh copy of the fragments."""
    return await run_in_threadpool(_write_fragments, texts, target, fragments, jobs)


def _write_fragments(
    texts: list[str], target: Language, fragments: list[documents.Prepared[str]], jobs: list[Job]
) -> list[list[documents.Result[str]]]:
    written = []
    for n, flat in enumerate([job.texts() for job in jobs] or [[]]):  # no jobs: no fragment had words
        pos, results = 0, []
        for fragment in fragments if n == 0 else _read_fragments(texts, target):
            results.append(documents.finish(fragment, flat[pos : pos + len(fragment.texts)]))
            pos += len(fragment.texts)
        written.append(results)
    return written
