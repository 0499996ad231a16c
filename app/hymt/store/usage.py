"""Characters translated, per API key and calendar month (UTC), as DeepL's /v2/usage reports them for its billing
period. The owner is a hash of the key, or "" when keys are off (one count for the whole server)."""

from __future__ import annotations

import time

from .backend import Backend


def period_of(now: float) -> str:
    """The month a moment falls in, as the table keys it: "2026-12"."""
    return time.strftime("%Y-%m", time.gmtime(now))


class UsageStore:
    def __init__(self, database: Backend):
        self.database = database

    def add(self, counts: dict[str, int], period: str) -> None:
        """Add each owner's characters to its count for the period, in one transaction."""
        with self.database.transaction() as cursor:
            cursor.executemany(
                "INSERT INTO usage (owner, period, characters) VALUES (?, ?, ?) "
                "ON CONFLICT (owner, period) DO UPDATE SET characters = usage.characters + excluded.characters",
                [(owner, period, n) for owner, n in counts.items()],
            )

    def characters(self, owner: str, period: str) -> int:
        with self.database.transaction() as cursor:
            row = cursor.execute(
                "SELECT characters FROM usage WHERE owner = ? AND period = ?", (owner, period)
            ).fetchone()
        return 0 if row is None else int(row[0])
