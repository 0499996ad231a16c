"""The document jobs' worker. Every document (LibreTranslate's /translate_file, the page's upload, /api/jobs, DeepL's
/v2/document, `hymt translate --server`) is a job in the store (store/jobs.py), which this worker translates as
batch work on the service's translator, up to HYMT_MAX_RUNNING_JOBS at once; the next to start is the oldest job of
the client with the fewest running, so one client's pile of documents does not hold every place.

A job's translated texts are kept as they come (Resumable), so after a restart or a kill -9 every unfinished job
resumes where it stopped and reaches its end. Ended jobs are deleted HYMT_FILE_RETENTION_S after they ended.
Draining stops the running jobs without ending them: the next start resumes them. Runs on the server's event loop.

Replicas sharing a database (HYMT_DATABASE_URL) share one queue: each worker claims the jobs it starts (a lease it
renews every third of HYMT_JOB_LEASE_S), so a job accepted by one replica may be translated by another, and one a
dead replica held is resumed by another once its lease has run out. A drain releases its leases at once. A database
that cannot be reached stops the jobs here where they are (their leases run out; they resume once it answers).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from starlette.concurrency import run_in_threadpool

from ..documents.translate import OnText, Translate
from ..errors import HymtError, NotReady, StoreUnavailable
from ..languages import resolve
from ..store.backend import ping
from ..store.jobs import JobRecord, JobStore
from ..translation.jobs import Options
from . import pipeline
from .service import Service
from .usage import UsageMeter

log = logging.getLogger("hymt.jobs")

EXPIRE_EVERY_S = 60.0
# Translated texts are written to the store in batches: at most this many, or this many seconds apart.
CHECKPOINT_TEXTS = 64
CHECKPOINT_S = 1.0


@dataclass
class Progress:
    """A running job's texts settled, as its pipeline reports them, and since when this run translates."""

    done: int = 0
    total: int = 0
    started: float = field(default_factory=time.monotonic)
    kept: int = 0  # texts a resumed job had translated before: they say nothing of this run's rate

    def resumed(self, kept: int) -> None:
        """The texts kept from before are told; the clock of this run's rate starts now."""
        self.kept, self.started = kept, time.monotonic()

    def seconds_remaining(self) -> float | None:
        """From this run's rate so far; None until one of its texts has settled."""
        fresh = self.done - self.kept
        if fresh <= 0:
            return None
        rate = fresh / max(time.monotonic() - self.started, 1e-3)
        return round(max(0, self.total - self.done) / rate, 1)


class Resumable:
    """Wraps the pipeline's translating of texts so that what one job translated is kept in the store, phase by
    phase (the document pipeline's first pass, its stricter retry, its runs: each a call), and a resumed job sends
    only the texts its phase still lacks. The calls depend only on the earlier phases' results, so a resumed run
    makes the same calls in the same order."""

    def __init__(self, store: JobStore, job_id: str, progress: Progress, on_checkpoint: Callable[[], None]):
        self.store, self.job_id, self.progress, self.on_checkpoint = store, job_id, progress, on_checkpoint
        self._phases = itertools.count()

    def wrap(self, translate: Translate) -> Translate:
        async def through(texts: list[str], on_text: OnText | None) -> list[str]:
            phase = next(self._phases)
            done = await run_in_threadpool(self.store.texts, self.job_id, phase)
            missing = [i for i in range(len(texts)) if i not in done]
            for i, translation in sorted(done.items()):
                if on_text is not None:
                    on_text(i, translation)
            if phase == 0:
                self.progress.resumed(len(done))
            pending: dict[int, str] = {}
            writes: list[asyncio.Future] = []
            last = [time.monotonic()]

            def flush() -> None:
                batch = dict(pending)
                pending.clear()
                last[0] = time.monotonic()
                writes.append(asyncio.ensure_future(self._save(phase, batch)))

            def settled(k: int, translation: str) -> None:
                pending[missing[k]] = translation
                if on_text is not None:
                    on_text(missing[k], translation)
                if len(pending) >= CHECKPOINT_TEXTS or time.monotonic() - last[0] >= CHECKPOINT_S:
                    flush()

            try:
                translated = await translate([texts[i] for i in missing], settled)
            finally:
                if pending:
                    flush()
                await asyncio.gather(*writes)
            for k, translation in enumerate(translated):
                done[missing[k]] = translation
            await self._save(phase, {missing[k]: t for k, t in enumerate(translated)})
            return [done[i] for i in range(len(texts))]

        return through

    async def _save(self, phase: int, texts: dict[int, str]) -> None:
        if texts:
            await run_in_threadpool(self.store.save_texts, self.job_id, phase, texts)
            await run_in_threadpool(self.on_checkpoint)  # a database write: off the event loop


class JobWorker:
    def __init__(self, service: Service, store: JobStore, usage: UsageMeter):
        self.service, self.store, self.usage = service, store, usage
        self.lease_s = service.settings.job_lease_s
        self.progress: dict[str, Progress] = {}  # by job id, while it runs
        self.draining = False
        self._tasks: dict[str, asyncio.Task] = {}
        self._clients: dict[str, str] = {}  # job id -> client, while it runs
        self._finishing: set[str] = set()  # jobs whose result is being stored: their lease ends with it, not lost
        self._ended: dict[str, asyncio.Event] = {}  # job id -> set when it ends (or the worker drains)
        self._wake = asyncio.Event()
        self._main: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._main = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        """Drain: the running jobs stop where they are, unfinished in the store (the next start resumes them), and
        whoever waits on one hears that the server is stopping."""
        self.draining = True
        if self._main is not None:
            self._main.cancel()
        held = list(self._tasks)
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        try:
            await run_in_threadpool(self.store.release, held)  # another replica need not wait the leases out
        except StoreUnavailable:
            pass  # they run out by themselves
        for ended in self._ended.values():
            ended.set()

    def stop_from_thread(self, timeout: float) -> None:
        """stop() from another thread (the drain's), waiting for it at most `timeout` seconds."""
        if self._loop is not None and not self._loop.is_closed():
            asyncio.run_coroutine_threadsafe(self.stop(), self._loop).result(timeout)

    async def cancel(self, job_id: str) -> JobRecord | None:
        record = await run_in_threadpool(self.store.cancel, job_id)
        task = self._tasks.get(job_id)
        if task is not None:
            task.cancel()
        self._signal(job_id)
        return record

    async def wait(self, job_id: str) -> JobRecord:
        """The job once it has ended; NotReady when the server drains first (the job resumes after the restart).
        A job this worker runs wakes the wait as it ends; one another replica runs is read again from the store
        after a tenth of the time waited so far (half a second to 5 s), so its end is seen late by at most about
        a tenth of the wait, with few reads of the store."""
        began = time.monotonic()
        while True:
            record = await run_in_threadpool(self.store.get, job_id)
            if record is None or record.finished:
                assert record is not None  # the caller made it, and nothing deletes an unfinished job
                return record
            if self.draining:
                raise NotReady(
                    f"the server is restarting; document job {job_id} is kept and resumes after the restart",
                    max(1, round(self.service.settings.drain_grace_s)),
                    error_type="draining",
                )
            ended = self._ended.setdefault(job_id, asyncio.Event())
            try:
                await asyncio.wait_for(ended.wait(), timeout=min(5.0, max(0.5, (time.monotonic() - began) / 10)))
            except TimeoutError:
                pass

    def seconds_remaining(self, record: JobRecord) -> float | None:
        progress = self.progress.get(record.id)
        return progress.seconds_remaining() if progress is not None else None

    def segments_done(self, record: JobRecord) -> int:
        progress = self.progress.get(record.id)
        return progress.done if progress is not None else record.segments_done

    # -- the worker's loop ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        expired = renewed = 0.0
        while not self.draining:
            try:
                if time.monotonic() - expired > EXPIRE_EVERY_S:
                    expired = time.monotonic()
                    gone = await run_in_threadpool(self.store.expire)
                    if gone:
                        log.info("%d ended document jobs expired", gone)
                if time.monotonic() - renewed > self.lease_s / 3:
                    renewed = time.monotonic()
                    await self._renew()
                if self.service.translator is not None:
                    await self._start_jobs()
                else:
                    await run_in_threadpool(ping, self.store.database)  # /health tells a lost database anyway
            except StoreUnavailable:
                pass  # /health says so (the database's error); the next round tries again
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=1.0)
            except TimeoutError:
                pass

    async def _renew(self) -> None:
        """Renew the leases of the jobs running here; stop those this replica no longer holds (cancelled through
        another replica, or taken by one after this one's lease ran out)."""
        running = list(self._tasks)
        if not running:
            return
        for job_id in await run_in_threadpool(self.store.renew, running, self.lease_s):
            task = self._tasks.get(job_id)
            if task is not None and job_id not in self._finishing:
                log.info("document job %s ended or moved to another replica: stopped here", job_id)
                task.cancel()

    async def _start_jobs(self) -> None:
        limit = self.service.settings.max_running_jobs
        while len(self._tasks) < limit and not self.draining:
            running = Counter(self._clients.values())
            record = await run_in_threadpool(self.store.claim, running, set(self._tasks), self.lease_s)
            if record is None:
                return
            self._clients[record.id] = record.client
            self._tasks[record.id] = asyncio.ensure_future(self._translate(record))

    async def _translate(self, record: JobRecord) -> None:
        job_id = record.id
        progress = self.progress[job_id] = Progress()
        try:
            await run_in_threadpool(self.store.start, job_id)
            content = await run_in_threadpool(self.store.original, job_id)
            source = resolve(record.source, "source language") if record.source else None
            upload = await pipeline.open_upload(
                self.service.settings,
                record.ext,
                record.name,
                content,
                source,
                resolve(record.target, "target language"),
                Options.from_json(record.options),
            )
            progress.total = len(upload.prepared.texts)

            def on_progress(done: int, total: int) -> None:
                progress.done, progress.total = done, total

            def checkpointed() -> None:
                self.store.progress(job_id, progress.done, progress.total)

            resumable = Resumable(self.store, job_id, progress, checkpointed)
            result = await pipeline.translate(
                self.service, upload, None, on_progress, record.client, resume=resumable.wrap
            )
            await run_in_threadpool(self.store.progress, job_id, progress.total, progress.total)
            self._finishing.add(job_id)
            if await run_in_threadpool(self.store.finish, job_id, result.data, pipeline.report_json(result)):
                self.usage.add(record.owner or "", record.billed_characters)
        except asyncio.CancelledError:
            pass  # cancelled by its owner (the store says so) or stopped by a drain (resumed at the next start)
        except StoreUnavailable as exc:
            log.warning("document job %s stopped: %s", job_id, exc.message)  # resumed once the database answers
        except HymtError as exc:
            log.warning("document job %s failed: %s", job_id, exc.message)
            await run_in_threadpool(self.store.fail, job_id, exc.message)
        except Exception:  # a job that breaks fails alone; the worker goes on
            log.exception("document job %s failed", job_id)
            await run_in_threadpool(self.store.fail, job_id, "internal error while translating the document")
        finally:
            self._tasks.pop(job_id, None)
            self._clients.pop(job_id, None)
            self._finishing.discard(job_id)
            self.progress.pop(job_id, None)
            self._signal(job_id)
            self._wake.set()

    def _signal(self, job_id: str) -> None:
        ended = self._ended.pop(job_id, None)
        if ended is not None:
            ended.set()
