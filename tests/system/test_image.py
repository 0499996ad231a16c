"""The image as CI builds it: the Dockerfile under podman, on a local Debian base standing in for the CUDA base,
with torch's CPU build and the test model baked in; then the container from outside: health on port 80, a
translation, the HEALTHCHECK command, users, kill -9, docker-stop's SIGTERM, and broken model directories."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from servers import free_port, wait_until

# A cold build (base image, torch, the pinned packages) takes minutes; the tests after it take seconds.
pytestmark = [pytest.mark.image, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "localhost/hymt-test-base:bookworm"
IMAGE = "localhost/hymt:test"
# supervisord's stopwaitsecs (HYMT_STOP_WAIT_S, 35 s) must end inside the runtime's stop timeout.
STOP_TIMEOUT_S = 45
# No GPU here: the image is built with the CPU wheel the tests run, in place of the Dockerfile's CUDA build.
CPU_TORCH = "2.13.0"
DEBIAN_MIRRORS = [
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
]

if shutil.which("podman") is None:
    pytest.skip(
        "no container engine: podman is not installed and tests/run.sh could not install it (needs root "
        "and apt-get); the image is not built or run",
        allow_module_level=True,
    )


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "tests/containers.conf")}
    result = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr[-3000:]}")
    return result


def make_base_image(work: Path) -> None:
    """A minimal Debian bookworm trusting the host's extra certificate authorities (pip and apt in the build go
    through the same TLS as the host), made once; it is the build's first layer, so rebuilding it would void the
    layer cache."""
    if podman("image", "exists", BASE_IMAGE, check=False).returncode == 0:
        return
    if shutil.which("mmdebstrap") is None:
        pytest.skip("mmdebstrap is missing: no local Debian base to build the image on")
    tarball = work / "rootfs.tar"
    hooks = [
        'mkdir -p "$1/usr/local/share/ca-certificates"',
        'for f in /usr/local/share/ca-certificates/*.crt; do [ -e "$f" ] && cp "$f" '
        '"$1/usr/local/share/ca-certificates/"; done; true',
    ]
    subprocess.run(
        [
            "mmdebstrap",
            "--variant=minbase",
            "--quiet",
            *[f"--customize-hook={h}" for h in hooks],
            "bookworm",
            str(tarball),
            *DEBIAN_MIRRORS,
        ],
        check=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    podman(
        "import", "--change", "ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt", str(tarball), BASE_IMAGE, timeout=300
    )
    tarball.unlink()


def make_torch_index(work: Path) -> Path:
    """torch's CPU build and its dependencies as a PEP 503 index: the Dockerfile's TORCH_INDEX_URL, mounted into
    the build (pip here takes the CPU wheel from this machine's disk)."""
    wheels = work / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--only-binary=:all:",
            "--python-version",
            "3.11",
            "--platform",
            "manylinux_2_28_x86_64",
            "-d",
            str(wheels),
            f"torch=={CPU_TORCH}",
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    for wheel in wheels.glob("*.whl"):
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        (wheels / "simple" / project).mkdir(parents=True, exist_ok=True)
        (wheels / "simple" / project / "index.html").write_text(f'<a href="../../{wheel.name}">{wheel.name}</a>\n')
    return wheels


@pytest.fixture(scope="module")
def image(artifacts, test_model) -> str:
    work = artifacts / "image"
    work.mkdir(exist_ok=True)
    make_base_image(work)
    wheels = make_torch_index(work)
    build = podman(
        "build",
        "--format",
        "docker",
        "--network",
        "host",
        "--layers",
        "-t",
        IMAGE,
        "--build-arg",
        f"CUDA_IMAGE={BASE_IMAGE}",
        "--build-arg",
        f"TORCH_VERSION={CPU_TORCH}",
        "--build-arg",
        "TORCH_INDEX_URL=file:///wheels/simple",
        "--build-arg",
        "MODEL_ID=",
        "--build-context",
        f"model={test_model}",
        "-v",
        f"{wheels}:/wheels:ro",
        str(ROOT),
        timeout=1800,
        check=False,
    )
    (work / "build.log").write_text(build.stdout + build.stderr)
    assert build.returncode == 0, build.stderr[-3000:]
    return build.stdout + build.stderr


class Container:
    def __init__(self, name: str, *args: str):
        self.name, self.port = name, free_port()
        podman("rm", "-f", name, check=False)
        podman(
            "run",
            "-d",
            "--name",
            name,
            "-p",
            f"127.0.0.1:{self.port}:80",
            "--stop-timeout",
            str(STOP_TIMEOUT_S),
            *args,
            IMAGE,
        )
        self.url = f"http://127.0.0.1:{self.port}"

    def health(self) -> dict:
        try:
            response = httpx.get(f"{self.url}/health", timeout=3)
            return {"http_status": response.status_code, **response.json()}
        except (httpx.HTTPError, ValueError):
            return {"status": "unreachable"}

    def wait(self, predicate, timeout: float = 240, what: str = "condition"):
        return wait_until(predicate, timeout, self.logs, what, interval=1)

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr

    def exec(self, *args: str) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *args, check=False)

    def server_pid(self) -> int:
        return int(self.exec("supervisorctl", "pid", "hymt-server").stdout.strip() or 0)

    def state(self) -> dict:
        return json.loads(podman("inspect", self.name).stdout)[0]["State"]

    def remove(self) -> None:
        podman("rm", "-f", "-t", "0", self.name, check=False)


@pytest.fixture(scope="module")
def container(image):
    box = Container("hymt-test-image", "-e", "HYMT_MAX_NEW_TOKENS=8", "-e", "HYMT_GREEDY=1")
    box.wait(lambda: box.health().get("status") == "healthy", what="healthy")
    yield box
    box.remove()


def test_the_images_user_is_created_without_warnings(image):
    """The Dockerfile's useradd, run alone on the base (the build's own run of it may come from the layer cache)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    command = re.search(r"&& (useradd [^\\\n]*)", dockerfile).group(1).strip()
    result = podman("run", "--rm", BASE_IMAGE, "sh", "-c", f"mkdir -p /run/hymt && {command}", check=False)
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stderr


def test_health_on_port_80_serves_the_baked_model(container):
    health = container.health()
    assert health["http_status"] == 200 and health["status"] == "healthy"
    assert health["profile"] == "cpu" and health["gpu_memory_used_gb"] == 0
    # No volume is mounted: the checkpoint is the one the build baked into /models.
    assert health["model"] == "/models"
    assert podman("inspect", container.name, "--format", "{{len .Mounts}}").stdout.strip() == "0"
    # The server itself listens on the container's port 80 as its non-root user (no sysctl from the runtime).
    assert "Errno 13" not in container.exec("cat", "/var/log/hymt/server.log").stdout


def test_translate(container):
    response = httpx.post(
        f"{container.url}/translate", json={"q": "Hello, world!", "source": "en", "target": "de"}, timeout=60
    )
    assert response.status_code == 200, response.text
    assert isinstance(response.json()["translatedText"], str)


def test_the_images_healthcheck_command_passes(container):
    config = json.loads(podman("inspect", IMAGE).stdout)[0]["Healthcheck"]
    assert config["Test"] == ["CMD", "hymt-probe"]
    result = podman("healthcheck", "run", container.name, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    probe = container.exec("hymt-probe")
    assert probe.returncode == 0 and probe.stdout.startswith("healthy: profile cpu")


def test_the_images_humming_headers_are_dated_by_their_contents(container):
    """So that the humming kernels compiled into the cache volume still match after the image is rebuilt with the
    same humming-kernels (its cache key holds each header's modification time)."""
    check = container.exec(
        "python3",
        "-c",
        "import os; from hymt.engine.humming_cache import header_stamp; headers, stamp = header_stamp(); "
        "print([str(h) for h in headers if os.stat(h).st_mtime != stamp] or 'all', len(headers))",
    )
    assert check.returncode == 0 and check.stdout.startswith("all "), check.stdout + check.stderr


def test_every_process_runs_as_the_non_root_user(container):
    rows = podman("top", container.name, "user", "ruser", "args").stdout.strip().splitlines()[1:]
    assert len(rows) >= 3  # supervisord, the server, the health service
    for row in rows:
        user, ruser = row.split()[:2]
        assert user == ruser == "hymt", row


def test_each_log_line_appears_once(container):
    lines = [
        line
        for line in container.logs().splitlines()
        if "supervisord started with pid" in line or "spawned: 'hymt-health'" in line
    ]
    assert len(lines) == 2, lines


def test_killed_server_comes_back_healthy(container):
    old = container.server_pid()
    assert old > 0
    container.exec("python3", "-c", f"import os; os.kill({old}, 9)")
    container.wait(lambda: container.server_pid() not in (0, old), what="a new server")
    container.wait(lambda: container.health().get("status") == "healthy", what="healthy again")


def test_broken_model_fails_in_bounded_time_and_says_why(image, test_model, tmp_path):
    """A weights file the image's user cannot read (mode 0600, another owner): the server fails at load each time,
    supervisord ends it FATAL, and the probe, the health service and the container's log say why."""
    broken = Path(shutil.copytree(test_model, tmp_path / "model"))
    weights = broken / "model.safetensors"
    weights.chmod(0o600)
    if os.getuid() != 0:
        pytest.skip("the model must belong to another user than the container's: run as root")
    tmp_path.chmod(0o755)
    box = Container("hymt-test-broken", "-v", f"{broken}:/models:ro", "-e", "HYMT_HEALTH_INTERVAL_S=2")
    try:
        probe = box.wait(lambda: (r := box.exec("hymt-probe")).stdout.startswith("failed:") and r, what="failed")
        assert probe.returncode == 1
        assert "permission denied: cannot read /models/model.safetensors" in probe.stdout
        assert len(probe.stdout.strip().splitlines()) == 1
        assert podman("healthcheck", "run", box.name, check=False).returncode != 0
        watcher = json.loads(
            box.exec(
                "python3",
                "-c",
                "import urllib.request as u\ntry: u.urlopen("
                "'http://127.0.0.1:8081/health')\nexcept Exception as e: print(e.read().decode())",
            ).stdout
        )
        assert watcher["status"] == "failed" and watcher["server_log_tail"]
        assert box.exec("supervisorctl", "status", "hymt-server").stdout.split()[1] in ("FATAL", "STARTING", "BACKOFF")
        log = box.wait(
            lambda: "last lines of /var/log/hymt/server.log" in (text := box.logs()) and text, what="the report"
        )
        assert "hymt-server could not start and supervisord gave up: permission denied" in log
    finally:
        box.remove()


def test_a_runtime_without_the_bind_capability_is_reported(image):
    """A runtime that drops CAP_NET_BIND_SERVICE: the bind to port 80 is refused each time, the server ends FATAL
    instead of restarting forever, and the probe quotes the refusal."""
    box = Container("hymt-test-nobind", "--cap-drop", "NET_BIND_SERVICE", "-e", "HYMT_HEALTH_INTERVAL_S=2")
    try:
        probe = box.wait(lambda: (r := box.exec("hymt-probe")).stdout.startswith("failed:") and r, what="failed")
        assert "[Errno 13]" in probe.stdout
        box.wait(lambda: "hymt-server could not start and supervisord gave up: " in box.logs(), what="the report")
    finally:
        box.remove()


DOCKER_AS_PODMAN = """#!/usr/bin/env bash
# docker as start.sh calls it, played by podman: compose's one service is the container hymt-test-compose.
set -eu
name=hymt-test-compose
case "$1 ${2:-}" in
  "info --format") echo '{"nvidia": {}}' ;;
  "info ") ;;
  "image inspect") exec podman image inspect "$3" >/dev/null ;;
  "compose up") podman rm -f "$name" >/dev/null 2>&1 || true
                exec podman run -d --name "$name" -v "$HYMT_MODEL_DIR:/models:ro" -e HYMT_HEALTH_INTERVAL_S=2 \\
                  "$HYMT_IMAGE" ;;
  "compose ps") echo "$name" ;;
  "compose logs") exec podman logs --tail 15 "$name" ;;
  inspect*|exec*|logs*) exec podman "$@" ;;
  *) echo "docker stand-in: $* is not played" >&2; exit 2 ;;
esac
"""


def test_start_sh_docker_path_ends_with_the_reason_when_the_model_is_broken(image, test_model, tmp_path):
    """./start.sh with Docker (played by podman): a checkpoint the container's user cannot read ends start.sh with
    the server's error within a bounded time, not after the image's 15-minute start period."""
    if os.getuid() != 0:
        pytest.skip("the model must belong to another user than the container's: run as root")
    tmp_path.chmod(0o755)
    broken = Path(shutil.copytree(test_model, tmp_path / "model"))
    (broken / "model.safetensors").chmod(0o600)
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "docker").write_text(DOCKER_AS_PODMAN)
    (shims / "docker").chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HYMT_")},
        "HYMT_IMAGE": IMAGE,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "CONTAINERS_CONF": str(ROOT / "tests/containers.conf"),
    }
    try:
        result = subprocess.run(
            [str(ROOT / "start.sh"), "--model", str(broken)], capture_output=True, text=True, timeout=600, env=env
        )
        assert result.returncode == 1, result.stdout + result.stderr
        said = result.stdout + result.stderr
        assert (
            "start.sh: the container did not come up: hymt-server could not start and supervisord gave up: "
            "permission denied: cannot read /models/model.safetensors"
        ) in result.stderr, said
        assert "last lines of /var/log/hymt/server.log:\n" in result.stderr, said
        assert "  hymt: error: permission denied" in result.stderr, said
    finally:
        podman("rm", "-f", "-t", "0", "hymt-test-compose", check=False)


def test_model_directory_without_a_checkpoint_ends_the_container(image, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    tmp_path.chmod(0o755)
    box = Container("hymt-test-empty", "-v", f"{empty}:/models:ro")
    try:
        box.wait(lambda: box.state()["Status"] == "exited", what="exited")
        assert box.state()["ExitCode"] == 1
        assert "hymt: cannot start: /models has no config.json: not a Hugging Face checkpoint directory" in box.logs()
    finally:
        box.remove()


def test_sigterm_finishes_in_flight_requests_and_exits_zero(image):
    """docker stop: SIGTERM to supervisord, which stops the server; uvicorn finishes the request in flight (a
    translation streaming its tokens when the stop begins, short enough for uvicorn's 10 s of graceful shutdown),
    then the container exits 0 within the stop timeout (past it the runtime would SIGKILL: exit code 137)."""
    box = Container("hymt-test-stop", "-e", "HYMT_MAX_NEW_TOKENS=32", "-e", "HYMT_GREEDY=1")
    try:
        box.wait(lambda: box.health().get("status") == "healthy", what="healthy")
        events: list[str] = []
        started = threading.Event()

        def stream():
            # One segment of 32 output tokens: still decoding when the stop begins.
            text = " ".join(["the quick brown fox jumps over the lazy dog"] * 4)
            with httpx.stream(
                "POST",
                f"{box.url}/api/translate",
                timeout=120,
                json={"text": text, "source": "en", "target": "de", "stream": True},
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("event: "):
                        events.append(line.removeprefix("event: "))
                        if events[-1] == "token":
                            started.set()

        client = threading.Thread(target=stream)
        client.start()
        assert started.wait(120), events
        events.append("stop")
        stop = podman("stop", box.name, timeout=STOP_TIMEOUT_S + 30, check=False)
        client.join(60)
        assert stop.returncode == 0, stop.stderr
        assert events[-1] == "done", events[-5:]
        assert events.index("stop") < events.index("done")  # it was in flight when the stop began
        state = box.state()
        assert state["Status"] == "exited" and state["ExitCode"] == 0, state
    finally:
        box.remove()
