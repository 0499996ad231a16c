"""Per-key and per-address request-rate limits: a token bucket each, refilled continuously, so a client may send
its minute's allowance in a burst and then one request per (60 / limit) seconds. Pure bookkeeping with an
injected clock, tested without a server."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ..errors import Overloaded

# Buckets kept at most; when over, the full ones (clients idle for a minute or more) are forgotten.
MAX_BUCKETS = 10_000


class Bucket:
    __slots__ = ("tokens", "at")

    def __init__(self, tokens: float, at: float):
        self.tokens, self.at = tokens, at


class RateLimit:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic):
        self.per_minute = per_minute
        self.clock = clock
        self._buckets: dict[str, Bucket] = {}
        self._lock = threading.Lock()

    def retry_after_s(self, who: str) -> int:
        """Take one request from `who`'s allowance: 0 if allowed, else the seconds until the next one is."""
        rate = self.per_minute / 60.0
        now = self.clock()
        with self._lock:
            bucket = self._buckets.get(who)
            if bucket is None:
                if len(self._buckets) >= MAX_BUCKETS:
                    self._forget_full(now, rate)
                bucket = self._buckets[who] = Bucket(float(self.per_minute), now)
            bucket.tokens = min(float(self.per_minute), bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                return 0
            return max(1, math.ceil((1.0 - bucket.tokens) / rate))

    def _forget_full(self, now: float, rate: float) -> None:
        self._buckets = {who: b for who, b in self._buckets.items() if b.tokens + (now - b.at) * rate < self.per_minute}


class Limits:
    """The limits a request passes before it is parsed further: its key's and its address's (each optional)."""

    def __init__(self, per_key: int, per_address: int, clock: Callable[[], float] = time.monotonic):
        self.per_key = RateLimit(per_key, clock) if per_key > 0 else None
        self.per_address = RateLimit(per_address, clock) if per_address > 0 else None
        self.refused = 0

    def check(self, key_index: int | None, address: str | None) -> None:
        """Raise Overloaded (429, Retry-After) when the key or the address is over its limit. Keys are known by
        their position in HYMT_API_KEYS, so no key value is ever held here (or logged)."""
        for limit, who, what in ((self.per_key, key_index, "API key"), (self.per_address, address, "address")):
            if limit is None or who is None:
                continue
            wait = limit.retry_after_s(str(who))
            if wait:
                self.refused += 1
                raise Overloaded(
                    f"rate limit of this {what} reached ({limit.per_minute} requests a minute); try again in {wait} s",
                    wait,
                    error_type="rate_limited",
                )
