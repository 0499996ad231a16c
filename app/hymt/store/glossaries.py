"""Stored glossaries (DeepL's /v2/glossaries): a named list of source -> target terms for one language pair, made
once and used by id in any number of requests. Like DeepL's, a glossary is never edited: a change is a new one.

A glossary is its owner's (a hash of the API key that made it; None when keys are off, visible to every caller).
"""

from __future__ import annotations

import builtins
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

from .backend import Backend

# DeepL's glossary ids are UUIDs; ours are too, so that clients that check the shape accept them.
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class GlossaryRecord:
    """A glossary as its row holds it (the entries apart); the fields are the table's columns, in order."""

    id: str
    owner: str | None
    name: str
    source: str  # hymt language codes
    target: str
    entry_count: int
    created_at: float  # unix seconds


_COLUMNS = tuple(f.name for f in fields(GlossaryRecord))
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM glossaries"


class GlossaryStore:
    def __init__(self, database: Backend, *, clock: Callable[[], float] = time.time):
        self.database = database
        self.clock = clock

    def create(
        self, *, owner: str | None, name: str, source: str, target: str, entries: list[tuple[str, str]]
    ) -> GlossaryRecord:
        """A new glossary of `entries` (source term, target term), in their order."""
        raw = secrets.token_hex(16)
        record = GlossaryRecord(
            id=f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}",
            owner=owner,
            name=name,
            source=source,
            target=target,
            entry_count=len(entries),
            created_at=self.clock(),
        )
        with self.database.transaction() as cursor:
            cursor.execute(
                f"INSERT INTO glossaries ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                tuple(getattr(record, name) for name in _COLUMNS),
            )
            cursor.executemany(
                "INSERT INTO glossary_entries (glossary_id, idx, source, target) VALUES (?, ?, ?, ?)",
                [(record.id, i, s, t) for i, (s, t) in enumerate(entries)],
            )
        return record

    def get(self, glossary_id: str) -> GlossaryRecord | None:
        """The glossary, or None when there is none of that id (a malformed id included)."""
        if not _ID.fullmatch(glossary_id):
            return None
        with self.database.transaction() as cursor:
            row = cursor.execute(f"{_SELECT} WHERE id = ?", (glossary_id,)).fetchone()
        return None if row is None else GlossaryRecord(*row)

    def list(self, owner: str | None) -> builtins.list[GlossaryRecord]:
        """The owner's glossaries (every one when `owner` is None, and those made with keys off), oldest first."""
        with self.database.transaction() as cursor:
            if owner is None:
                rows = cursor.execute(f"{_SELECT} ORDER BY created_at, id").fetchall()
            else:
                rows = cursor.execute(
                    f"{_SELECT} WHERE owner = ? OR owner IS NULL ORDER BY created_at, id", (owner,)
                ).fetchall()
        return [GlossaryRecord(*row) for row in rows]

    def entries(self, glossary_id: str) -> builtins.list[tuple[str, str]]:
        """The glossary's entries in the order they were given."""
        with self.database.transaction() as cursor:
            rows = cursor.execute(
                "SELECT source, target FROM glossary_entries WHERE glossary_id = ? ORDER BY idx", (glossary_id,)
            ).fetchall()
        return [(s, t) for s, t in rows]

    def delete(self, glossary_id: str) -> bool:
        """Delete the glossary and its entries; whether there was one."""
        with self.database.transaction() as cursor:
            return cursor.execute("DELETE FROM glossaries WHERE id = ?", (glossary_id,)).rowcount > 0
