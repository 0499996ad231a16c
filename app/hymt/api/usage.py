"""Usage: the characters each API key has had translated this month (UTC), on every API, as DeepL's /v2/usage
reports them; with HYMT_CHARACTER_LIMIT, a key that has used its month's characters is refused (DeepL's 456).

A text request counts its characters when it is accepted, a document when its job is done. Counts are kept in
memory and written to the store every FLUSH_S seconds and at stop, so an answer
never waits on a disk write; a kill -9 loses at most the last FLUSH_S seconds of counts, never a translation.
Replicas sharing a database add to the same rows, so a key's count is its use on all of them (each one's last
FLUSH_S seconds aside).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..errors import QuotaExceeded, StoreUnavailable
from ..store.usage import UsageStore, period_of
from . import parsing

FLUSH_S = 5.0


class UsageMeter:
    def __init__(self, store: UsageStore, limit: int, clock: Callable[[], float] = time.time):
        self.store, self.limit, self.clock = store, limit, clock
        self._lock = threading.Lock()
        self._pending: dict[str, Counter[str]] = {}  # period -> owner -> characters not yet in the store

    def add(self, owner: str, characters: int) -> None:
        if characters <= 0:
            return
        with self._lock:
            self._pending.setdefault(period_of(self.clock()), Counter())[owner] += characters

    def used(self, owner: str) -> int:
        """The owner's characters this month, the unwritten ones included (reads the store: off the event loop)."""
        period = period_of(self.clock())
        with self._lock:
            pending = self._pending.get(period, Counter())[owner]
        return self.store.characters(owner, period) + pending

    def flush(self) -> None:
        """Write the pending counts (put back when the write fails, so the next flush tries them again)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        try:
            for period, counts in pending.items():
                self.store.add(dict(counts), period)
        except BaseException:
            with self._lock:
                for period, counts in pending.items():
                    self._pending.setdefault(period, Counter()).update(counts)
            raise

    async def run(self) -> None:
        """Flush every FLUSH_S seconds until cancelled; then once more."""
        try:
            while True:
                await asyncio.sleep(FLUSH_S)
                with contextlib.suppress(StoreUnavailable):  # the counts wait for the database in memory
                    await run_in_threadpool(self.flush)
        finally:
            with contextlib.suppress(Exception):
                self.flush()


def owner(request: Request) -> str:
    """Whose count a request adds to: its key's hash, or "" when keys are off."""
    return parsing.caller(request).key_hash or ""


def meter(request: Request) -> UsageMeter:
    return request.app.state.usage


async def check(request: Request) -> None:
    """Refuse (456) a translation by a key that has used this month's characters, when there is a limit."""
    usage = meter(request)
    if usage.limit:
        used = await run_in_threadpool(usage.used, owner(request))
        if used >= usage.limit:
            raise QuotaExceeded(
                f"the character quota of this key is used up this month ({used} of {usage.limit} characters)"
            )


def count(request: Request, texts: list[str]) -> None:
    """Count the characters of a text request's texts (once accepted)."""
    meter(request).add(owner(request), sum(len(t) for t in texts))


async def usage(request: Request) -> dict:
    """DeepL's usage body: this month's characters and the limit (DeepL reports an unlimited plan's limit as
    10^12, which its clients read as a limit not reached)."""
    usage = meter(request)
    used = await run_in_threadpool(usage.used, owner(request))
    return {"character_count": used, "character_limit": usage.limit or 1_000_000_000_000}
