"""From a request's texts to the token engine's requests: segmenting, each segment's official prompt (with its
glossary entries, or the request's style or background, or the document's preceding text as context, or the
formatted-translation prompt for inline markers), its tokens and its output budget; the fusion prompts of quality
"best"; and the stricter prompt a segment gets again when its translation missed a glossary term. Each segment
becomes a token engine Request. Text work only: it runs on the caller's thread (submitting) or the text worker's
(retries), never on the engine's.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable

from .. import cleanup, glossary, prompts, segment
from ..engine import adapters as adapter_registry
from ..engine.requests import Priority, Request
from ..engine.sampling_params import Sampling
from ..errors import BadRequest
from ..glossary import Glossaries, Term
from ..languages import Language
from .jobs import Event, Job, Options

# Instructions whose tokens a prompter keeps at most.
MAX_INSTRUCTIONS = 256


class Prompter:
    def __init__(
        self,
        settings,
        family,
        tokenizer,
        encode: Callable[[str], list[int]],
        max_seq_tokens: int,
        adapters: list,
        glossaries: Glossaries | None,
    ):
        self.settings, self.family, self.tokenizer, self.encode = settings, family, tokenizer, encode
        self.max_seq_tokens, self.adapters, self.glossaries = max_seq_tokens, adapters, glossaries
        self._ids = itertools.count(1)
        self._request_ids = itertools.count(1)
        # (source, target, style, background) -> that prompt's tokens without text; emptied past MAX_INSTRUCTIONS
        # (styles and backgrounds are the clients' own words).
        self._instructions: dict[tuple, list[int]] = {}

    def job(
        self,
        items: list[tuple[str, Language | None]],
        target: Language,
        sampling: Sampling,
        listener: Callable[[Event], None] | None,
        min_new_tokens: int,
        stream: bool,
        options: Options,
        priority: Priority,
        client: str,
    ) -> Job:
        """Segment texts (each with its source language, None if unknown) into a job with one sequence per
        segment. Each segment's prompt holds the glossary entries occurring in it, or else (where the model has a
        context prompt) the document's preceding source segments; a segment with inline markup markers
        (options.formatted) gets the formatted-translation prompt instead. A style or background the model has no
        official prompt for is refused (422) before any work. A request of more segments than
        HYMT_INTERACTIVE_MAX_SEGMENTS runs as batch work, whatever class it asked for."""
        self.check_instructions(options)
        # A document's segments are counted again as the context of the ones after them.
        count = functools.cache(self.count_tokens)
        max_tokens = options.max_segment_tokens or self.settings.max_segment_tokens
        documents = [segment.split(text, count, max_tokens, src.code if src else "en") for text, src in items]
        job = Job(
            id=next(self._ids),
            target=target,
            documents=documents,
            refs=[(d, s) for d, doc in enumerate(documents) for s in range(len(doc.segments))],
            listener=listener,
            stream=stream,
            client=client,
        )
        job.priority = Priority.BATCH if job.num_segments > self.settings.interactive_max_segments else priority
        job.results = [None] * job.num_segments
        job.tokens = [[] for _ in range(job.num_segments)]
        entries: dict[str | None, list[Term]] = {}
        for d, s in job.refs:
            source, text = items[d][1], documents[d].segments[s]
            key = source.code if source else None
            if key not in entries:
                server = self.glossaries.terms(source, target) if self.glossaries else []
                entries[key] = list(options.glossary) + server
            # Markers are kept only by the formatted prompt, and no official prompt combines it with terms.
            marked = options.formatted and prompts.has_markers(text)
            terms = [] if marked else glossary.applicable(entries[key], text)
            instructed = terms or marked or options.style or options.background
            context = (
                self._context(documents[d], s, count, options.preceding) if options.context and not instructed else ""
            )
            message = prompts.segment_message(
                self.family,
                source,
                target,
                text,
                terms,
                context,
                formatted=marked,
                style=options.style,
                background=options.background,
            )
            wanted, prompt_ids = self._wanted(text, count), self._prompt(message)
            if context and not self._fits_whole_budget(prompt_ids, wanted):
                prompt_ids = self._prompt(prompts.segment_message(self.family, source, target, text, terms))
                context = ""
            shared = 0 if terms or marked or context else self._instruction_tokens(prompt_ids, source, target, options)
            job.sources.append(source)
            job.terms.append(terms)
            job.requests.append(self._request(job, prompt_ids, wanted, source, sampling, min_new_tokens, shared))
        return job

    def fusion_job(self, candidates: list[Job], sampling: Sampling, listener: Callable[[Event], None] | None) -> Job:
        """The same texts' candidate translations (jobs done, one per decoding setting) fused segment by segment
        with Chimera's prompt. The fused job has the candidates' documents, so it reads back like any job; its
        glossary misses are reported, not retried. A segment whose prompt would not leave its output budget keeps
        its greedy candidate (the first), counted in the job's flags as unfused."""
        first = candidates[0]
        job = Job(
            id=next(self._ids),
            target=first.target,
            documents=first.documents,
            refs=first.refs,
            listener=listener,
            priority=first.priority,
            client=first.client,
            sources=first.sources,
            terms=first.terms,
            retry_terms=False,
        )
        job.results = [None] * job.num_segments
        job.tokens = [[] for _ in range(job.num_segments)]
        for n, (d, s) in enumerate(job.refs):
            text = first.documents[d].segments[s]
            source = first.sources[n]
            if source is None:
                raise BadRequest(
                    "quality best needs the source language (it could not be detected): give source",
                    error_type="unknown_source_language",
                )
            message = prompts.fusion_message(source, job.target, text, [c.result(n).text for c in candidates])
            wanted, prompt_ids = self._wanted(text), self._prompt(message)
            if self._fits_whole_budget(prompt_ids, wanted):
                job.requests.append(self._request(job, prompt_ids, wanted, source, sampling, 0))
                continue
            job.unfused.add(n)
            job.results[n] = first.results[n]
            job.requests.append(Request(id=0, prompt_ids=[], max_new_tokens=0))  # never sent: its result is set
        return job

    def retry(self, job: Job, n: int) -> Request:
        """Segment n once more, with a prompt that insists on the glossary terms its translation missed."""
        text, previous = job.source_text(n), job.requests[n]
        message = prompts.segment_message(self.family, job.sources[n], job.target, text, job.terms[n], strict=True)
        return self._request(
            job, self._prompt(message), self._wanted(text), job.sources[n], previous.sampling, previous.min_new_tokens
        )

    def check_instructions(self, options: Options) -> None:
        """The request's style and background need the served model's official prompt for them; no official prompt
        combines the two (a 422 that says why). Also for a document's request, before its file is read."""
        asked = [name for name in ("style", "background") if getattr(options, name)]
        for name in asked:
            if not getattr(self.family, name):
                raise BadRequest(
                    f"{name} needs a model with an official {name} prompt (Hy-MT2-7B, Hy-MT2-1.8B"
                    f"{'; HY-MT1.5 for background' if name == 'background' else ''}); the model served "
                    f"is {self.family.name}",
                    error_type=f"unsupported_{name}",
                    status=422,
                )
        if len(asked) == 2:
            raise BadRequest(
                "style and background cannot be combined: no official prompt gives both",
                error_type="unsupported_combination",
                status=422,
            )

    def count_tokens(self, text: str) -> int:
        return len(self.encode(text))

    def _context(
        self, document: segment.Document, index: int, count: Callable[[str], int], preceding: str | None = None
    ) -> str:
        """The segments before this one in its document, after the client's own preceding text (its lines), newest
        first, as many as fit HYMT_CONTEXT_TOKENS; only source text, so that the segments of a document still run
        side by side in one batch (HY-MT1.5's context prompt asks the model not to translate the text above, which
        is what source text is)."""
        before = (preceding or "").splitlines() + document.segments[:index]
        if not (self.family.context and self.settings.context and before):
            return ""
        chosen: list[str] = []
        left = self.settings.context_tokens
        for text in reversed(before):
            text = text.strip()
            if not text:
                continue
            tokens = count(text)
            if tokens > left:
                break
            chosen.append(text)
            left -= tokens
        return "\n".join(reversed(chosen))

    def _prompt(self, message: str) -> list[int]:
        return self.encode(prompts.render(self.tokenizer, message, self.family))

    def _instruction_tokens(
        self, prompt_ids: list[int], source: Language | None, target: Language, options: Options
    ) -> int:
        """How many leading tokens a prompt with no terms or context shares with every other to the same target
        from the same side, in the same style or with the same background: those it has in common with the same
        prompt without text (the template and the instruction), which the engine prefills once
        (engine/prefixes.py)."""
        key = (source, target, options.style, options.background)
        if key not in self._instructions:
            if len(self._instructions) >= MAX_INSTRUCTIONS:
                self._instructions.clear()
            message = prompts.segment_message(
                self.family, source, target, "", [], style=options.style, background=options.background
            )
            self._instructions[key] = self._prompt(message)
        instruction = self._instructions[key]
        common = (i for i, (a, b) in enumerate(zip(prompt_ids, instruction)) if a != b)
        return next(common, min(len(prompt_ids), len(instruction)))

    def _wanted(self, text: str, count: Callable[[str], int] | None = None) -> int:
        """The output budget a segment's source text asks for, within the model's recommended output cap."""
        cap = min(self.settings.max_new_tokens, self.family.max_new_tokens or self.settings.max_new_tokens)
        return cleanup.max_new_tokens((count or self.count_tokens)(text), cap)

    def _fits_whole_budget(self, prompt_ids: list[int], wanted: int) -> bool:
        """Whether a prompt (with context, or fusing candidates) leaves the segment its whole output budget in its
        KV range."""
        return self.max_seq_tokens - len(prompt_ids) >= wanted

    def _request(
        self,
        job: Job,
        prompt_ids: list[int],
        wanted: int,
        source: Language | None,
        sampling: Sampling,
        min_new_tokens: int,
        prefix_tokens: int = 0,
    ) -> Request:
        """A segment of a job as a request for the token engine: its prompt tokens and output budget (`wanted`,
        cut to what its KV range leaves), in the job's class, client and group."""
        budget = min(wanted, self.max_seq_tokens - len(prompt_ids))
        if budget < 1:
            raise BadRequest(
                f"a segment of {len(prompt_ids)} prompt tokens leaves no room to translate it",
                error_type="segment_too_long",
            )
        return Request(
            id=next(self._request_ids),
            prompt_ids=prompt_ids,
            max_new_tokens=budget,
            sampling=sampling,
            min_new_tokens=min(min_new_tokens, budget),
            adapter=adapter_registry.choose(self.adapters, source.code if source else None, job.target.code),
            priority=job.priority,
            client=job.client,
            group=job.id,
            stream=job.stream,
            prefix_tokens=prefix_tokens,
        )
