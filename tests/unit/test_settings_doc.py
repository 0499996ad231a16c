"""The documentation against the code, without a model: docs/settings.md's table lists exactly the environment
variables `Settings` reads, each with the default `Settings` really has; and every relative link in README.md and
docs/*.md leads to a file (and a heading) that exists."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path

import pytest

from hymt.errors import ConfigError
from hymt.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SETTINGS_DOC = ROOT / "docs" / "settings.md"
TABLE_HEADING = "## Every setting"
CODE = re.compile(r"`([^`]+)`")


class _Recording(Mapping):
    """An empty environment that remembers every variable asked for."""

    def __init__(self):
        self.asked: list[str] = []

    def __getitem__(self, key):
        self.asked.append(key)
        raise KeyError(key)

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0


def variables_read() -> set[str]:
    """The environment variables Settings.from_env looks at, found by watching it read an empty environment."""
    env = _Recording()
    Settings.from_env(env)
    return set(env.asked)


def _cells(line: str) -> list[str]:
    """A table row's cells; a | inside a code span does not split."""
    cells, cell, in_code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
    return cells + [cell.strip()]


def settings_table() -> list[tuple[str, str]]:
    """(variable, default cell) for each row of the table under TABLE_HEADING."""
    lines = SETTINGS_DOC.read_text(encoding="utf-8").splitlines()
    assert TABLE_HEADING in lines, f"{SETTINGS_DOC.name} has no heading {TABLE_HEADING!r}"
    rows, started = [], False
    for line in lines[lines.index(TABLE_HEADING) + 1 :]:
        if line.startswith("## "):
            break
        if not line.startswith("|"):
            if started:
                break  # the table ends at its first line that is not a row
            continue
        started = True
        cells = _cells(line)
        if cells[0] == "variable" or set(cells[0]) <= set("-: "):
            continue  # the header and its separator
        names = CODE.findall(cells[0])
        assert len(names) == 1 and cells[0] == f"`{names[0]}`", f"one variable per row, in a code span: {line}"
        rows.append((names[0], cells[1]))
    assert rows, f"no table under {TABLE_HEADING!r} in {SETTINGS_DOC.name}"
    return rows


def test_settings_table_matches_settings():
    rows = settings_table()
    documented = [name for name, _ in rows]
    twice = sorted({name for name in documented if documented.count(name) > 1})
    assert not twice, f"listed twice in {SETTINGS_DOC.name}: {twice}"
    read = variables_read()
    undocumented, unknown = sorted(read - set(documented)), sorted(set(documented) - read)
    assert not undocumented, f"read by Settings but not in {SETTINGS_DOC.name}: {undocumented}"
    assert not unknown, f"in {SETTINGS_DOC.name} but not read by Settings: {unknown}"

    field_of = {f"HYMT_{f.name.upper()}": f.name for f in dataclasses.fields(Settings)}
    assert set(field_of) == read, "Settings.from_env no longer names its variables HYMT_<FIELD>: update this test"
    defaults = Settings()
    wrong = []
    for name, cell in rows:
        default = getattr(defaults, field_of[name])
        if cell.startswith("unset"):
            # No value: None, or an empty list (an empty variable counts as unset).
            if default is not None and default != ():
                wrong.append(f"{name}: documented unset, Settings has {default!r}")
            continue
        values = CODE.findall(cell)
        if not values:
            wrong.append(f"{name}: the default cell {cell!r} neither starts with 'unset' nor gives a `value`")
            continue
        # The documented value, set in the environment, must give exactly the default Settings.
        try:
            given = Settings.from_env({name: values[0]})
        except ConfigError as exc:
            wrong.append(f"{name}: documented default {values[0]!r} is refused: {exc.message}")
            continue
        if given != defaults:
            wrong.append(
                f"{name}: documented {values[0]!r} gives {getattr(given, field_of[name])!r}, "
                f"Settings' default is {default!r}"
            )
    assert not wrong, "\n".join(wrong)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    text = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6} (.+)", line)
        if match:
            slug = _slug(match.group(1))
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _prose(text: str) -> str:
    """The text less its fenced code blocks and inline code, where a link is only an example."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    broken = []
    text = _prose(page.read_text(encoding="utf-8"))
    for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto: ...
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists():
            shown = resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved
            broken.append(f"{target}: no file {shown}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)
