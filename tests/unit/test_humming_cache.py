"""humming's headers get one modification time from their contents, so its compile cache's keys survive a
reinstall of the same version and change with the headers."""

import os
import subprocess
import sys

from hymt.engine.humming_cache import pin_header_times


def _package(root, contents):
    for name, text in contents.items():
        path = root / "include" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _times(root):
    return {p.name: os.stat(p).st_mtime for p in (root / "include").rglob("*.cuh")}


def test_every_header_gets_one_time_that_a_reinstall_keeps_and_a_changed_header_changes(tmp_path):
    files = {"a.cuh": "int a;", "sub/b.cuh": "int b;"}
    first = _package(tmp_path / "first", files)
    (first / "include" / "notes.txt").write_text("not a header")
    stamp = pin_header_times(first)
    assert stamp is not None and set(_times(first).values()) == {float(stamp)}
    assert os.stat(first / "include" / "notes.txt").st_mtime != stamp
    again = _package(tmp_path / "again", files)  # the same version installed anew, at another time
    os.utime(again / "include" / "a.cuh", (1_000, 1_000))
    assert pin_header_times(again) == stamp and set(_times(again).values()) == {float(stamp)}
    changed = _package(tmp_path / "changed", {**files, "sub/b.cuh": "int b2;"})
    assert pin_header_times(changed) not in (None, stamp)


def test_a_package_without_headers_is_left_alone(tmp_path):
    assert pin_header_times(tmp_path) is None


def test_the_command_says_what_it_did():
    done = subprocess.run([sys.executable, "-m", "hymt.engine.humming_cache"], capture_output=True, text=True)
    assert done.returncode == 0 and ("humming's headers dated" in done.stdout or "nothing to pin" in done.stdout)
