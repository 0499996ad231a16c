"""A document's texts through the engine, in parts that fit its queue: a long document is not refused because it
is longer than the queue, and other requests keep their turn between its parts. Progress counts document segments
(paragraphs, cells, cues) done of total. Blocking: the CLI calls it directly, the API from a worker thread."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Callable

from ..engine.jobs import Options
from ..errors import Cancelled, Overloaded
from ..languages import Language
from ..prompts import Sampling

# How long a one-segment part may wait for room in a full queue before the document fails with the queue's error.
MAX_QUEUE_WAIT_S = 120.0
_RETRY_S = 0.5


def translate_texts(engine, texts: list[str], source: Language | None, target: Language, sampling: Sampling,
                    on_progress: Callable[[int, int], None] | None = None,
                    stop: threading.Event | None = None) -> list[str]:
    stop = stop or threading.Event()
    results: list[str] = []
    part_size = max(1, engine.settings.max_queue_segments // 4)
    waited = 0.0
    while len(results) < len(texts):
        if stop.is_set():
            raise Cancelled("the request was cancelled")
        base = len(results)
        part = texts[base:base + part_size]
        seen: Counter = Counter()
        units_done = [base]

        def listener(event, seen=seen, units_done=units_done) -> None:
            if event.kind != "segment" or on_progress is None:
                return
            d = event.job.refs[event.index][0]
            seen[d] += 1
            if seen[d] == len(event.job.documents[d].segments):
                units_done[0] += 1
                on_progress(units_done[0], len(texts))

        try:
            job = engine.submit([(t, source) for t in part], target, sampling, listener=listener,
                                options=Options(formatted=True))
        except Overloaded:
            if part_size > 1:
                part_size = max(1, part_size // 2)
            elif waited >= MAX_QUEUE_WAIT_S:
                raise
            else:
                stop.wait(_RETRY_S)
                waited += _RETRY_S
            continue
        while not job.done.wait(_RETRY_S):
            if stop.is_set():
                engine.cancel(job)
        if job.error is not None:
            raise job.error
        results.extend(job.texts())
        if on_progress is not None:
            on_progress(len(results), len(texts))
    return results
