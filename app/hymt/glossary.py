"""Terminology: glossary entries, which of them occur in a segment, whether the translation used them, and the
server-wide glossary files (TSV or CSV) that are read again whenever one changes on disk.

A glossary file is a small termbase: its first row names a language code per column, each further row gives one
term in those languages, e.g. `en<TAB>de` / `GPU<TAB>Grafikkarte`. For a request from S to T, the S column's terms
map to the T column's (with an unknown source language, every other column's).
"""

from __future__ import annotations

import csv
import logging
import re
import threading
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .errors import BadRequest, ConfigError
from .languages import Language, resolve

log = logging.getLogger("hymt.glossary")

MAX_REQUEST_TERMS = 500
MAX_TERM_CHARS = 200
GLOSSARY_SUFFIXES = (".tsv", ".csv")
# Scripts written without spaces between words (or with particles attached to nouns): a term may sit inside a word.
_UNSPACED = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")


@dataclass(frozen=True)
class Term:
    source: str
    target: str

    # Folded once per entry: a document tries every entry on each of its segments.
    @cached_property
    def folded_source(self) -> str:
        return _fold(self.source)

    @cached_property
    def folded_target(self) -> str:
        return _fold(self.target)

    def to_json(self) -> dict:
        return {"source": self.source, "target": self.target}


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _spaced(ch: str) -> bool:
    return ch.isalnum() and not unicodedata.name(ch, "").startswith(_UNSPACED)


def occurs(term: str, text: str) -> bool:
    """Whether `term` occurs in `text`, ignoring case and width; in spaced scripts only as whole words."""
    return _occurs_folded(_fold(term), _fold(text))


def _occurs_folded(folded: str, text: str) -> bool:
    """`occurs` for a term and a text already folded (a segment is folded once for all the terms it is tried with)."""
    if not folded or folded not in text:  # the plain test first: most terms are not in most segments
        return False
    before = r"(?<!\w)" if _spaced(folded[0]) else ""
    after = r"(?!\w)" if _spaced(folded[-1]) else ""
    return re.search(before + re.escape(folded) + after, text) is not None


def applicable(terms: list[Term], text: str) -> list[Term]:
    """The entries whose source term occurs in the segment, each source term once (the first entry wins)."""
    text = _fold(text)
    seen: set[str] = set()
    found = []
    for term in terms:
        key = term.folded_source
        if key not in seen and _occurs_folded(key, text):
            seen.add(key)
            found.append(term)
    return found


def missing(terms: list[Term], translation: str) -> list[Term]:
    """The applicable entries whose target term is not in the translation."""
    translation = _fold(translation)
    return [t for t in terms if not _occurs_folded(t.folded_target, translation)]


def parse_request(value) -> list[Term]:
    """A request's `glossary` field: [{"source": ..., "target": ...}, ...], or a 400 saying what is wrong."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest('glossary must be a list of {"source", "target"} objects', error_type="invalid_type")
    if len(value) > MAX_REQUEST_TERMS:
        raise BadRequest(
            f"glossary has {len(value)} entries; the limit is {MAX_REQUEST_TERMS}", error_type="too_many_terms"
        )
    terms = []
    for i, entry in enumerate(value):
        if (
            not isinstance(entry, dict)
            or set(entry) != {"source", "target"}
            or not all(isinstance(entry[k], str) for k in entry)
        ):
            raise BadRequest(
                f"glossary[{i}] must be an object with the string fields source and target alone",
                error_type="invalid_type",
            )
        source, target = entry["source"].strip(), entry["target"].strip()
        if not source or not target:
            raise BadRequest(f"glossary[{i}] has an empty source or target", error_type="invalid_value")
        if len(source) > MAX_TERM_CHARS or len(target) > MAX_TERM_CHARS:
            raise BadRequest(f"glossary[{i}] is over {MAX_TERM_CHARS} characters", error_type="invalid_value")
        terms.append(Term(source, target))
    return terms


ENTRY_FORMATS = ("tsv", "csv")
# What str.strip() takes off (str.isspace), spelled out as a regex class: the grammar below is also the OpenAPI
# document's pattern, whose regexes are ECMA-262's, where \s is another set.
_SPACE = r"\t\n\x0b\x0c\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_PAD_TSV = r"[\x0b\x0c \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"  # no tab, no line end
_PAD_CSV = r"[\t\x0b\x0c \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"
_BLANK = r"[\t\x0b\x0c\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*"


def _cell(pad: str, solid: str, inner: str) -> str:
    """A term: up to MAX_TERM_CHARS characters once stripped, at least one not a space."""
    return f"{pad}{solid}(?:{inner}{{0,{MAX_TERM_CHARS - 2}}}{solid})?{pad}"


_TSV_CELL = _cell(_PAD_TSV, f"[^{_SPACE}]", r"[^\t\r\n]")
_CSV_CELL = '(?:{}|"{}")'.format(
    _cell(_PAD_CSV, f'[^{_SPACE},"]', r'[^,"\r\n]'),
    _cell(_PAD_CSV, f'(?:[^{_SPACE}"]|"")', r'(?:[^"\r\n]|"")'),
)
# An entry's line: source and target term, and in CSV optionally DeepL's two language columns (ignored).
ENTRY_LINES = {
    "tsv": f"{_TSV_CELL}\\t{_TSV_CELL}",
    "csv": f'{_CSV_CELL},{_CSV_CELL}(?:,[^,"\\r\\n]*,[^,"\\r\\n]*)?',
}


def entries_pattern(entries_format: str) -> str:
    """The whole text parse_entries takes, as one regex: lines (ended by \\n or \\r\\n) that are blank or an
    entry, at least one an entry."""
    entry = ENTRY_LINES[entries_format]
    return f"^(?:{_BLANK}\\r?\\n)*{entry}(?:\\r?\\n(?:{entry}|{_BLANK}))*\\r?$"


_ENTRY = {name: re.compile(line) for name, line in ENTRY_LINES.items()}


def parse_entries(text: str, entries_format: str, max_entries: int) -> list[Term]:
    """A stored glossary's entries as DeepL takes them: one per line (ended by \\n or \\r\\n), source and target
    term split by a tab (tsv) or a comma (csv, a term quoted as CSV quotes; a third and fourth column, the
    languages, are allowed and ignored); blank lines are passed over. A source term given again is dropped (the
    first entry wins, as everywhere in hymt's glossaries); a line that is not an entry, or more than `max_entries`
    entries, is a 400 that names the line."""
    terms: list[Term] = []
    seen: set[str] = set()
    for n, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        if not _ENTRY[entries_format].fullmatch(line):
            raise BadRequest(
                f"entry on line {n} must be a source and a target term (each up to {MAX_TERM_CHARS} characters) "
                f"separated by {'a tab' if entries_format == 'tsv' else 'a comma'}",
                error_type="invalid_glossary",
            )
        cells = line.split("\t") if entries_format == "tsv" else next(csv.reader([line]))
        source, target = cells[0].strip(), cells[1].strip()
        if source in seen:
            continue
        seen.add(source)
        terms.append(Term(source, target))
        if len(terms) > max_entries:
            raise BadRequest(f"more than {max_entries} entries in one glossary", error_type="too_many_terms")
    if not terms:
        raise BadRequest("the glossary has no entries", error_type="invalid_glossary")
    return terms


@dataclass(frozen=True)
class Termbase:
    """One glossary file: language codes per column, and its rows."""

    path: Path
    codes: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def terms(self, source: Language | None, target: Language) -> list[Term]:
        if target.code not in self.codes:
            return []
        t = self.codes.index(target.code)
        if source is None:
            columns = [i for i in range(len(self.codes)) if i != t]
        elif source.code in self.codes and source.code != target.code:
            columns = [self.codes.index(source.code)]
        else:
            return []
        return [Term(row[s], row[t]) for s in columns for row in self.rows if row[s] and row[t]]


def read_termbase(path: Path) -> Termbase:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read glossary {path}: {exc}") from None
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    rows = [
        [cell.strip() for cell in row]
        for row in csv.reader(text.splitlines(), delimiter=delimiter)
        if any(cell.strip() for cell in row)
    ]
    if len(rows) < 2:
        raise ConfigError(f"glossary {path} needs a header row of language codes and at least one term row")
    try:
        codes = tuple(resolve(code, f"column {i + 1} of {path.name}").code for i, code in enumerate(rows[0]))
    except BadRequest as exc:
        raise ConfigError(f"glossary {path}: {exc.message} (the first row names a language code per column)") from None
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(codes):
            raise ConfigError(f"glossary {path} line {n} has {len(row)} cells; the header has {len(codes)}")
    return Termbase(path, codes, tuple(tuple(row) for row in rows[1:]))


class Glossaries:
    """The server-wide glossaries under a file or directory: read at start (a bad file stops the start), then read
    again on the first lookup after a file changes, appears or goes (a bad file then keeps the last good version
    and is reported in `status`)."""

    def __init__(self, location: str):
        self.location = Path(location).expanduser()
        if not self.location.exists():
            raise ConfigError(f"HYMT_GLOSSARIES: {self.location} does not exist")
        self._lock = threading.Lock()
        self._stamp: tuple = ()
        self._bases: dict[Path, Termbase] = {}
        self.errors: dict[str, str] = {}
        self.reloads = 0
        self._refresh(strict=True)

    def _files(self) -> list[Path]:
        if self.location.is_file():
            return [self.location]
        if not self.location.is_dir():
            return []
        return sorted(p for p in self.location.iterdir() if p.suffix.lower() in GLOSSARY_SUFFIXES and p.is_file())

    @staticmethod
    def _stamp_of(files: list[Path]) -> tuple:
        stamp = []
        for path in files:
            try:
                info = path.stat()
            except OSError:  # gone since the listing: the next look sees it gone
                continue
            stamp.append((path, info.st_mtime_ns, info.st_size))
        return tuple(stamp)

    def _refresh(self, strict: bool = False) -> None:
        files = self._files()
        stamp = self._stamp_of(files)
        if stamp == self._stamp:
            return
        bases, errors = {}, {}
        for path in files:
            try:
                bases[path] = read_termbase(path)
            except ConfigError as exc:
                if strict:
                    raise
                errors[str(path)] = exc.message
                log.error("%s; keeping its last good version", exc.message)
                if path in self._bases:
                    bases[path] = self._bases[path]
        self._bases, self.errors, self._stamp = bases, errors, stamp
        self.reloads += 1
        log.info("glossaries read: %d files, %d rows", len(bases), sum(len(b.rows) for b in bases.values()))

    def terms(self, source: Language | None, target: Language) -> list[Term]:
        with self._lock:
            self._refresh()
            bases = list(self._bases.values())
        return [term for base in bases for term in base.terms(source, target)]

    def status(self) -> dict:
        with self._lock:
            self._refresh()
            return {
                "location": str(self.location),
                "files": len(self._bases),
                "rows": sum(len(b.rows) for b in self._bases.values()),
                "reloads": self.reloads,
                "errors": dict(self.errors),
            }
