"""Stored glossaries and usage counts: the entries DeepL's formats give, the glossary store (ownership, order,
deletion), and the usage meter's counts by key and month, written in batches and never lost on a failed write."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hymt.api.usage import UsageMeter
from hymt.errors import BadRequest
from hymt.glossary import Term, parse_entries
from hymt.store import Database, GlossaryStore, UsageStore
from hymt.store.usage import period_of

DECEMBER = 1_796_342_400.0  # 2026-12-04 (UTC)


@pytest.fixture
def database(tmp_path: Path):
    database = Database(tmp_path / "hymt.db")
    yield database
    database.close()


def test_entries_from_tsv_and_csv_the_first_of_a_source_term_wins():
    assert parse_entries("GPU\tGrafikkarte\n\n driver \t Treiber\r\nGPU\tGPU-Chip\n", "tsv", 10) == [
        Term("GPU", "Grafikkarte"),
        Term("driver", "Treiber"),
    ]
    csv = '"GPU, card",carte graphique,en,fr\nscreen,écran\n'
    assert parse_entries(csv, "csv", 10) == [Term("GPU, card", "carte graphique"), Term("screen", "écran")]


@pytest.mark.parametrize(
    "text,fmt,limit,needle",
    [
        ("GPU", "tsv", 10, "line 1"),
        ("a\tb\nc\t ", "tsv", 10, "line 2"),
        ("a,b,c", "csv", 10, "line 1"),
        ("a\tb\nc\td\ne\tf", "tsv", 2, "more than 2"),
        ("a\tb\tc", "tsv", 10, "line 1"),
        (",,", "csv", 10, "line 1"),
        ("a\t" + "b" * 201, "tsv", 10, "line 1"),
        ("\n \n", "tsv", 10, "no entries"),
    ],
)
def test_bad_entries_name_the_line(text, fmt, limit, needle):
    with pytest.raises(BadRequest, match=needle):
        parse_entries(text, fmt, limit)


def test_a_glossary_is_its_owners_and_keeps_its_entries_in_order(database):
    times = iter(range(3))
    store = GlossaryStore(database, clock=lambda: DECEMBER + next(times))  # made one after the other
    mine = store.create(owner="key-a", name="Mine", source="en", target="de", entries=[("b", "B"), ("a", "A")])
    open_one = store.create(owner=None, name="Everyone's", source="en", target="fr", entries=[("x", "X")])
    store.create(owner="key-b", name="Theirs", source="en", target="de", entries=[("y", "Y")])
    assert store.get(mine.id) == mine and mine.entry_count == 2 and mine.created_at == DECEMBER
    assert store.entries(mine.id) == [("b", "B"), ("a", "A")]
    assert [g.name for g in store.list("key-a")] == ["Mine", "Everyone's"]
    assert len(store.list(None)) == 3 and open_one in store.list("key-b")
    assert store.get("not-an-id") is None and store.get("../" + mine.id) is None
    assert store.delete(mine.id) and not store.delete(mine.id)
    assert store.get(mine.id) is None and store.entries(mine.id) == []


def test_usage_is_counted_by_key_and_month_and_flushed_in_batches(database):
    now = [DECEMBER]
    store = UsageStore(database)
    meter = UsageMeter(store, limit=0, clock=lambda: now[0])
    meter.add("key-a", 10)
    meter.add("key-a", 5)
    meter.add("", 7)
    assert store.characters("key-a", period_of(DECEMBER)) == 0 and meter.used("key-a") == 15  # not written yet
    meter.flush()
    assert store.characters("key-a", period_of(DECEMBER)) == 15 and store.characters("", "2026-12") == 7
    meter.add("key-a", 1)
    meter.flush()
    assert meter.used("key-a") == 16
    now[0] += 31 * 86400  # January: a new month starts from nothing
    assert meter.used("key-a") == 0 and period_of(now[0]) == "2027-01"


def test_a_failed_write_keeps_the_counts_for_the_next_flush(database):
    store = UsageStore(database)
    meter = UsageMeter(store, limit=0, clock=lambda: DECEMBER)
    meter.add("key-a", 3)
    database.close()
    with pytest.raises(sqlite3.ProgrammingError):  # the closed database
        meter.flush()
    reopened = Database(database.path)
    try:
        meter.store = UsageStore(reopened)
        meter.flush()
        assert meter.store.characters("key-a", "2026-12") == 3
    finally:
        reopened.close()


@pytest.mark.parametrize(
    "text,fmt",
    [
        ("GPU\tGrafikkarte", "tsv"),
        ("\n GPU \t Grafikkarte \r\n\t\ndriver\tTreiber\n", "tsv"),
        ("a\t" + "b" * 200, "tsv"),
        ('"a ""b""",c\n', "csv"),
        ("a,b,en,de", "csv"),
        ("a\tb\tc", "tsv"),
        ("a,", "csv"),
        ('a,"b', "csv"),
        ("\n\n", "tsv"),
        ("a\t" + "b" * 201, "tsv"),
        ("a\tb\r\rc\td", "tsv"),
    ],
)
def test_the_documented_pattern_is_what_parse_entries_takes(text, fmt):
    import re

    from hymt.glossary import entries_pattern

    try:
        parse_entries(text, fmt, 10)
        taken = True
    except BadRequest:
        taken = False
    assert (re.search(entries_pattern(fmt), text) is not None) == taken
