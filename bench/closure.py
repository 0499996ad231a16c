"""Checks that what the GPU machine would import is there: every requirement of hymt (pyproject's dependencies
and its gpu extra) and of the carried wheels is either a carried wheel or a package of the machine's image.

    python3 bench/closure.py KINDS.md .whl      # exit 1 with the missing names, one line each

KINDS.md is the device library's page whose "Packages:" line lists the image's packages. Names are compared as
PEP 503 normalises them; versions are not (the image has one of each)."""

import re
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Imported only where the benchmark never goes: the appliance's supervisor link, `hymt quantize`, the PDF format's
# libraries (imported when a PDF is read or written; the benchmark translates no PDF), and bitsandbytes (the NF4
# tiers and the seed-style server, which no standard run reaches on Hopper; carry.sh carries it with NF4=1).
NOT_ON_THE_RUN = {"supervisor", "pdfminer-six", "pikepdf", "reportlab", "uharfbuzz", "bitsandbytes"}  # normalised


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    return normalise(_first(r"^\s*([A-Za-z0-9_.-]+)", spec))


def _first(pattern: str, text: str, flags: int = 0) -> str:
    """The first group of `pattern`'s first match in `text`; a ValueError where it has none."""
    found = re.search(pattern, text, flags)
    if found is None:
        raise ValueError(f"no {pattern!r} in {text[:80]!r}")
    return found.group(1)


def applies(spec: str) -> bool:
    """Unconditional, or for Linux; no extras."""
    marker = spec.partition(";")[2]
    return "extra ==" not in marker and 'win32"' not in marker.replace("'", '"') or not marker


def image_packages(kinds: Path) -> set[str]:
    line = next(line for line in kinds.read_text().splitlines() if "Packages: " in line)
    return {normalise(name.strip().rstrip(".")) for name in line.split("Packages: ", 1)[1].split(",")}


def wheel_requirements(wheels: Path) -> dict[str, list[str]]:
    found = {}
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            text = archive.read(meta).decode()
        name = normalise(_first(r"^Name: (.+)$", text, re.M))
        found[name] = [line.split(":", 1)[1] for line in text.splitlines() if line.startswith("Requires-Dist:")]
    return found


def main() -> int:
    kinds, wheels = Path(sys.argv[1]), Path(sys.argv[2])
    have = image_packages(kinds)
    carried = wheel_requirements(wheels)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needs = {"hymt": project["dependencies"] + project["optional-dependencies"]["gpu"], **carried}
    missing = sorted(
        {
            (who, requirement_name(spec))
            for who, specs in needs.items()
            for spec in specs
            if applies(spec) and requirement_name(spec) not in have | set(carried) | NOT_ON_THE_RUN
        }
    )
    for who, name in missing:
        print(f"closure: {name} (needed by {who}) is neither carried nor on the GPU machine's image")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
