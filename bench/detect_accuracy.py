"""Accuracy of the offline language detector (`source: auto`) on the committed multilingual samples.

    python bench/detect_accuracy.py                   # the README's tables: per language, per file, shorter inputs
    python bench/detect_accuracy.py --json            # one JSON object (tests/unit/test_detect.py reads it)
    python bench/detect_accuracy.py --sample F.tsv    # other samples in the same format (repeat the option)
    python bench/detect_accuracy.py --max-chars 20    # every sentence cut to its first 20 characters

The samples (tests/data/detect-sample.tsv, the one the rules were developed on, and detect-holdout.tsv, written
after they were frozen) have one sentence a line: language code, ISO 15924 script, text. A language written in two
scripts (Kazakh, Mongolian) gets a row per script. No GPU and no model: runs anywhere in about a second.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hymt.detect import detect
from hymt.languages import BY_CODE, LANGUAGES

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
SAMPLES = (DATA / "detect-sample.tsv", DATA / "detect-holdout.tsv")
SHORTER = (30, 20, 10)  # prefixes, in characters, that show how accuracy falls with the length of the input


def read_sample(path: Path) -> list[tuple[str, str, str]]:
    """(code, script, text) for each sentence; a malformed line or an unknown code ends the run with its line number."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 3 or fields[0] not in BY_CODE:
            raise SystemExit(f"{path}:{number}: expected 'code<TAB>script<TAB>sentence' with one of the 38 codes")
        rows.append((fields[0], fields[1], fields[2]))
    return rows


def evaluate(rows: list[tuple[str, str, str]]) -> dict:
    """Per (language, script) counts, the overall accuracy and every confusion with its sentences."""
    totals: Counter = Counter()
    correct: Counter = Counter()
    confusions: dict[tuple[str, str], list[str]] = defaultdict(list)
    for code, script, text in rows:
        found = detect(text)
        got = found.language.code if found else "none"
        totals[(code, script)] += 1
        if got == code:
            correct[(code, script)] += 1
        else:
            confusions[(code, got)].append(text)
    order = {lang.code: i for i, lang in enumerate(LANGUAGES)}
    keys = sorted(totals, key=lambda k: (order[k[0]], k[1]))
    return {
        "sentences": len(rows),
        "correct": sum(correct.values()),
        "accuracy": round(sum(correct.values()) / len(rows), 4) if rows else 0.0,
        "languages": [
            {
                "language": code,
                "script": script,
                "sentences": totals[(code, script)],
                "correct": correct[(code, script)],
            }
            for code, script in keys
        ],
        "missing": [lang.code for lang in LANGUAGES if not any(k[0] == lang.code for k in totals)],
        "confusions": [
            {"expected": e, "detected": g, "sentences": texts}
            for (e, g), texts in sorted(confusions.items(), key=lambda item: -len(item[1]))
        ],
    }


def markdown(report: dict) -> str:
    lines = ["| language | script | sentences | correct | accuracy |", "|---|---|---|---|---|"]
    for row in report["languages"]:
        name = BY_CODE[row["language"]].english
        lines.append(
            f"| {name} (`{row['language']}`) | {row['script']} | {row['sentences']} | {row['correct']} | "
            f"{row['correct'] / row['sentences']:.0%} |"
        )
    lines.append(f"| **all** | | {report['sentences']} | {report['correct']} | {report['accuracy']:.1%} |")
    prefixes = " | ".join(f"first {n} characters" for n in SHORTER)
    lines += ["", f"| sample | sentences | whole sentences | {prefixes} |", "|---|---|---|" + "---|" * len(SHORTER)]
    for name, by_length in report["files"].items():
        cells = " | ".join(f"{by_length[str(n)]:.1%}" for n in ("all", *SHORTER))
        lines.append(f"| {name} | {by_length['sentences']} | {cells} |")
    if report["missing"]:
        lines.append(f"\nNot in the sample: {', '.join(report['missing'])}")
    lines.append("\nConfusions (expected → detected):" if report["confusions"] else "\nConfusions: none.")
    for c in report["confusions"]:
        lines.append(f"- {c['expected']} → {c['detected']}: {len(c['sentences'])} ({c['sentences'][0][:60]})")
    return "\n".join(lines)


def _cut(rows: list[tuple[str, str, str]], max_chars: int | None) -> list[tuple[str, str, str]]:
    return [(code, script, text[:max_chars]) for code, script, text in rows] if max_chars else rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, action="append", help="a sample file (default: the two committed)")
    parser.add_argument("--max-chars", type=int, help="cut every sentence to its first N characters")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.max_chars is not None and args.max_chars < 1:
        parser.error("--max-chars must be at least 1")
    files = {}
    for path in args.sample or SAMPLES:
        try:
            files[path.name] = _cut(read_sample(path), args.max_chars)
        except (OSError, UnicodeDecodeError) as exc:
            raise SystemExit(f"cannot read {path}: {exc}") from None
    report = evaluate([row for rows in files.values() for row in rows])
    report["files"] = {
        name: {
            "sentences": len(rows),
            "all": evaluate(rows)["accuracy"],
            **{str(n): evaluate(_cut(rows, n))["accuracy"] for n in SHORTER},
        }
        for name, rows in files.items()
    }
    print(json.dumps(report, ensure_ascii=False, indent=1) if args.json else markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
