"""humming-kernels' compiled kernels kept across reinstalls of the same version.

humming keys each kernel it compiles by, among other things, the modification time of every header it ships
(humming/jit/compiler.py, `cuh_last_update_time`), and pip gives the files it installs the time of installation.
So each reinstall of the same version (an image rebuilt for another dependency's sake, a native .venv installed
again) leaves the compile cache's humming kernels unmatched, and the next start compiles them all again: at its
first call humming compiles a kernel for each of its row intervals of each layer shape, about 150 for the 7B's
int4 on Hopper, 2-5 s each. `pin_header_times` gives every header one time derived from the headers' contents, so
the key changes only where the headers do.

    python -m hymt.engine.humming_cache      # after pip installs humming-kernels (Dockerfile, start.sh)
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path


def header_stamp(package: Path | None = None) -> tuple[list[Path], int] | None:
    """The .cuh headers under `package`/include (humming's installed package by default) and the one time, in
    seconds since 1970 (before 2106), taken from their paths and contents; None where there is no header."""
    if package is None:
        spec = importlib.util.find_spec("humming")
        if spec is None or spec.origin is None:
            return None
        package = Path(spec.origin).parent
    headers = sorted((package / "include").rglob("*.cuh"))
    if not headers:
        return None
    digest = hashlib.sha256()
    for header in headers:
        digest.update(header.relative_to(package).as_posix().encode() + b"\0" + header.read_bytes())
    return headers, int(digest.hexdigest()[:8], 16)


def pin_header_times(package: Path | None = None) -> int | None:
    """Date every header as header_stamp says; returns the stamp, or None where there is no header."""
    found = header_stamp(package)
    if found is None:
        return None
    headers, stamp = found
    for header in headers:
        os.utime(header, (stamp, stamp))
    return stamp


def main() -> int:
    stamp = pin_header_times()
    print("no humming-kernels here: nothing to pin" if stamp is None else f"humming's headers dated {stamp}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
