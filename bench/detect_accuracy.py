"""Accuracy of the offline language detector (`source: auto`) on the committed multilingual sample.

    python bench/detect_accuracy.py                      # per-language table, overall accuracy, the confusions
    python bench/detect_accuracy.py --json               # the same as one JSON object (tests/test_detect.py reads it)
    python bench/detect_accuracy.py --sample FILE.tsv    # another sample in the same format

The sample (tests/data/detect-sample.tsv) has one sentence a line: language code, ISO 15924 script, text. A
language written in two scripts (Kazakh, Mongolian) gets a row per script. No GPU and no model: runs anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hymt.detect import detect
from hymt.languages import BY_CODE, LANGUAGES

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "detect-sample.tsv"


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
        "languages": [{"language": code, "script": script, "sentences": totals[(code, script)],
                       "correct": correct[(code, script)]} for code, script in keys],
        "missing": [lang.code for lang in LANGUAGES if not any(k[0] == lang.code for k in totals)],
        "confusions": [{"expected": e, "detected": g, "sentences": texts}
                       for (e, g), texts in sorted(confusions.items(), key=lambda item: -len(item[1]))],
    }


def markdown(report: dict) -> str:
    lines = ["| language | script | sentences | correct | accuracy |", "|---|---|---|---|---|"]
    for row in report["languages"]:
        name = BY_CODE[row["language"]].english
        lines.append(f"| {name} (`{row['language']}`) | {row['script']} | {row['sentences']} | {row['correct']} | "
                     f"{row['correct'] / row['sentences']:.0%} |")
    lines.append(f"| **all** | | {report['sentences']} | {report['correct']} | {report['accuracy']:.1%} |")
    if report["missing"]:
        lines.append(f"\nNot in the sample: {', '.join(report['missing'])}")
    lines.append("\nConfusions (expected → detected):" if report["confusions"] else "\nConfusions: none.")
    for c in report["confusions"]:
        lines.append(f"- {c['expected']} → {c['detected']}: {len(c['sentences'])} ({c['sentences'][0][:60]})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        rows = read_sample(args.sample)
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"cannot read {args.sample}: {exc}") from None
    report = evaluate(rows)
    print(json.dumps(report, ensure_ascii=False, indent=1) if args.json else markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
