"""What bench/spy.sh measured, in words: per phase of the mixed scenario (the documents alone, then beside the
interactive clients) the engine's prefill and decoding steps (how many, their mean time, their share of the wall
clock: differences of /metrics' counters between the phase's first and last readings) and the classes' tokens/s;
then per py-spy turn the threads' samples and the functions they were in (a turn marked --gil: only the thread
holding the GIL).

    python bench/spy_report.py bench/history/diagnostic-20261206T0453Z
"""

from __future__ import annotations

import collections
import re
import sys
import tarfile
from pathlib import Path

BATCH = 'hymt_class_tokens_out_total{class="batch"}'
INTERACTIVE = 'hymt_class_tokens_out_total{class="interactive"}'
IN_FLIGHT = 'hymt_class_in_flight{class="%s"}'


def readings(path: Path) -> list[tuple[float, dict[str, float]]]:
    rows = []
    for line in path.read_text().splitlines():
        values = re.findall(r'(hymt_\w+(?:\{class="\w+"\})?) ([0-9.e+-]+)', line)
        if values:
            rows.append((float(line.split()[0][2:]), {k: float(v) for k, v in values}))
    return rows


def phase(name: str, first, last) -> str:
    (t0, a), (t1, b) = first, last
    span = t1 - t0

    def grew(key: str) -> float:
        return b.get(key, 0.0) - a.get(key, 0.0)

    parts = [f"{name}: {span:.1f} s"]
    for kind in ("prefill", "decode"):
        steps, seconds = grew(f"hymt_{kind}_steps_total"), grew(f"hymt_{kind}_seconds_total")
        parts.append(f"{kind} {steps:.0f} steps of {seconds / steps * 1000:.2f} ms, {seconds / span:.0%} of the time")
    parts.append(f"batch {grew(BATCH) / span:.0f} tok/s, interactive {grew(INTERACTIVE) / span:.0f} tok/s")
    return "; ".join(parts)


def phases(rows) -> list[str]:
    busy = [r for r in rows if r[1].get(IN_FLIGHT % "batch", 0) > 0]
    beside = [r for r in busy if r[1].get(IN_FLIGHT % "interactive", 0) > 0]
    if not beside:
        return ["no reading with interactive segments in flight"]
    start = beside[0][0]
    alone = [r for r in busy if start - 25 < r[0] < start - 1]
    # The readings at a phase's edges straddle its start and end: two in from each.
    return [
        phase("documents alone", alone[2], alone[-2]),
        phase("beside 16 interactive clients", beside[2], beside[-3]),
    ]


def turns(archive: Path) -> list[str]:
    lines = []
    with tarfile.open(archive) as tar:
        for member in sorted((m for m in tar.getmembers() if m.name.endswith(("-all.txt", "--gil.txt"))), key=str):
            threads: collections.Counter = collections.Counter()
            where: collections.Counter = collections.Counter()
            text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
            for line in text.splitlines():
                stack, count = line.rsplit(" ", 1)
                frames = stack.split(";")
                thread = next((f.split(": ", 1)[-1] for f in frames if f.startswith("thread")), "?")
                threads[thread] += int(count)
                where[(thread, re.sub(r" \(.*\)$", "", frames[-1]))] += int(count)
            lines.append(
                f"{Path(member.name).name}: {sum(threads.values())} samples; "
                + ", ".join(f"{t} {n}" for t, n in threads.most_common(4))
            )
            lines += [f"    {n:4d} {t}: {f}" for (t, f), n in where.most_common(6)]
    return lines


def main(folder: Path) -> int:
    for line in phases(readings(folder / "metrics.txt")) + turns(folder / "spy.tar.gz"):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
