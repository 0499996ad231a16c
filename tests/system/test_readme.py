"""The README's and docs/cli.md's shell blocks, run as printed in this clone on a machine without a GPU: the native
start on the test model, the API example against it, the command line, then the stop. A command that cannot run
here is named below with the reason; any other command in those blocks is run, and an answer shown under a command
(a `# {...}` line) must have the shape the server answers with."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import docx
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = ("README.md", "docs/cli.md")
NOT_RUN = {
    "docker compose up -d": "needs Docker's engine and a GPU (tests/system/test_image.py builds and runs the image)",
    "HYMT_DB_PASSWORD=change-me COMPOSE_PROFILES=gpu0,gpu1 docker compose -f docker-compose.gpus.yml up -d": "needs "
    "Docker's engine and two GPUs (tests/system/test_deploy.py checks the file's services and their wiring)",
    "./start.sh": "the image, as above",
    "./start.sh --native --model /path/to/checkpoint": "a checkpoint's path to fill in "
    "(test_start_sh_native_brings_up_a_healthy_appliance starts the same on the test model)",
    "bash tests/run.sh": "the test command itself",
    "bash tests/run.sh --fast": "the test command's fast lane, of which this test is no part (it runs tests/unit and "
    "tests/engine, which the test command runs too)",
}
STOP = "./start.sh --native --stop"
# Commands that change the shell the next ones run in.
SHELL_STATE = ("source ", "export ", "cd ")


def commands(document: str) -> list[tuple[str, str | None]]:
    """Each command of the document's bash blocks, continuations joined and trailing comments cut, with the answer
    a comment line under it shows (or None)."""
    found: list[tuple[str, str | None]] = []
    for block in re.findall(r"^```bash\n(.*?)^```", (ROOT / document).read_text(), flags=re.MULTILINE | re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("# ") and found:
                found[-1] = (found[-1][0], line[2:])
            elif line:
                found.append((re.sub(r"\s+# .*$", "", line).strip(), None))
    return found


def same_shape(expected, answer) -> bool:
    """The answer has the example's keys and kinds of values; a string the example spells out is the answer's, one
    it elides ("...") is any string."""
    if isinstance(expected, dict):
        return (
            isinstance(answer, dict)
            and answer.keys() == expected.keys()
            and all(same_shape(expected[k], answer[k]) for k in expected)
        )
    if isinstance(expected, str):
        return isinstance(answer, str) and (expected == "..." or answer == expected)
    if isinstance(expected, int | float):
        return isinstance(answer, int | float)
    return answer == expected


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_every_shell_command_works_as_printed(native_start, tmp_path):
    if not port_free(8080):
        pytest.skip("port 8080, which the README's native start uses, is taken on this machine")
    listed = [(document, *command) for document in DOCUMENTS for command in commands(document)]
    printed = {command for _, command, _ in listed}
    assert STOP in printed and set(NOT_RUN) <= printed, "NOT_RUN names a command the documents no longer print"
    # A document the example translates, in the clone as the command names it; removed with its translation after.
    report = docx.Document()
    report.add_paragraph("A short report to translate.")
    report.save(str(ROOT / "report.docx"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYMT_")} | {"HYMT_MAX_NEW_TOKENS": "8"}
    shell: list[str] = []
    try:
        for document, command, shown in listed:
            if command in NOT_RUN or command == STOP:
                continue
            if command.startswith(SHELL_STATE):
                shell.append(command)
            ran = subprocess.run(
                ["bash", "-c", " && ".join([*shell, command])],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert ran.returncode == 0, f"{document}: {command}\n{ran.stdout[-2000:]}\n{ran.stderr[-2000:]}"
            if shown is not None and shown.startswith("{"):
                assert same_shape(json.loads(shown), json.loads(ran.stdout)), f"{document}: {command}: {ran.stdout}"
        assert (ROOT / "report.de.docx").is_file()
    finally:
        stopped = subprocess.run(["bash", "-c", STOP], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        (ROOT / "report.docx").unlink(missing_ok=True)
        (ROOT / "report.de.docx").unlink(missing_ok=True)
    assert stopped.returncode == 0 and "hymt stopped" in stopped.stdout, stopped.stdout + stopped.stderr
