"""The appliance as it runs natively: the entrypoint, supervisord with both programs, the health service's
restarts, the probe, the profile decision for simulated cards, and the Docker files' linters."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from servers import free_port, wait_until

pytestmark = pytest.mark.appliance

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def base_env(tmp: Path, **extra) -> dict:
    return {
        **os.environ,
        "HYMT_ROOTFS": str(ROOT / "rootfs"),
        "HYMT_RUN_DIR": str(tmp / "run"),
        "HYMT_LOG_DIR": str(tmp / "logs"),
        "HYMT_DATA_DIR": str(tmp / "data"),  # the test's own document jobs, none of another's
        "HYMT_PYTHON": sys.executable,
        "HYMT_SUPERVISORD": str(BIN / "supervisord"),
        **extra,
    }


class Appliance:
    def __init__(self, tmp: Path, model: Path):
        self.port, self.health_port = free_port(), free_port()
        self.env = base_env(
            tmp,
            HYMT_MODEL=str(model),
            HYMT_PORT=str(self.port),
            HYMT_HEALTH_PORT=str(self.health_port),
            HYMT_HEALTH_INTERVAL_S="1",
            HYMT_HEALTH_FAILURES="3",
            HYMT_MAX_NEW_TOKENS="8",
            HYMT_GREEDY="1",
        )
        # Append mode, as start.sh does: the health service's /dev/stdout is this file opened again.
        self.log = open(tmp / "entrypoint.log", "a")
        self.process = subprocess.Popen(
            [str(ROOT / "rootfs/usr/local/bin/hymt-entrypoint")],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        from healthcheck.service import supervisor_rpc
        from hymt.settings import Settings

        self.rpc = supervisor_rpc(Settings(run_dir=self.env["HYMT_RUN_DIR"]))

    def health(self) -> dict:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return {"status": "unreachable"}

    def wait(self, predicate, timeout: float = 120):
        return wait_until(predicate, timeout, Path(self.log.name).read_text)

    def server_pid(self) -> int:
        return self.rpc.supervisor.getProcessInfo("hymt-server")["pid"]

    def stop(self):
        try:
            self.rpc.supervisor.shutdown()
            self.process.wait(timeout=30)
        except Exception:  # noqa: BLE001 - whatever state it is in, the process group goes
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture(scope="module")
def appliance(test_model, tmp_path_factory):
    app = Appliance(tmp_path_factory.mktemp("appliance"), test_model)
    app.wait(lambda: app.health().get("status") == "healthy")
    yield app
    app.stop()


def test_all_programs_running_and_health(appliance):
    def states():
        return {p["name"]: p["statename"] for p in appliance.rpc.supervisor.getAllProcessInfo()}

    # The server can answer /health before supervisord's startsecs have passed and it calls it RUNNING.
    appliance.wait(lambda: states() == {"hymt-server": "RUNNING", "hymt-health": "RUNNING"})
    health = appliance.health()
    assert health["status"] == "healthy" and health["gpu_memory_used_gb"] == 0 and "no GPU" in health["note"]
    assert health["profile"] == "cpu"

    def watcher_sees_it_running():
        response = httpx.get(f"http://127.0.0.1:{appliance.health_port}/health")
        # The health service samples every second: wait for a sample taken after supervisord's RUNNING.
        return response.status_code == 200 and response.json()["server_state"] == "RUNNING" and response.json()

    watcher = appliance.wait(watcher_sees_it_running)
    assert watcher["gpu_memory_used_gb"] == 0
    decision = json.loads((Path(appliance.env["HYMT_RUN_DIR"]) / "decision.json").read_text())
    assert decision["profile"] == "cpu"


def test_each_supervisord_line_appears_once(appliance):
    log = Path(appliance.log.name).read_text()
    assert log.count("supervisord started with pid") == 1, log[-2000:]


def test_killed_server_is_restarted_by_supervisord(appliance):
    old = appliance.server_pid()
    os.kill(old, signal.SIGKILL)
    appliance.wait(lambda: appliance.server_pid() not in (0, old))
    appliance.wait(lambda: appliance.health().get("status") == "healthy")


def test_hung_server_is_detected_and_restarted_by_the_health_service(appliance):
    old = appliance.server_pid()
    os.kill(old, signal.SIGSTOP)
    appliance.wait(lambda: appliance.server_pid() not in (0, old), timeout=60)
    appliance.wait(lambda: appliance.health().get("status") == "healthy")
    watcher = httpx.get(f"http://127.0.0.1:{appliance.health_port}/health").json()
    assert watcher["restarts"] >= 1
    assert "restarting hymt-server: unreachable" in Path(appliance.log.name).read_text()


def probe(port: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "healthcheck.probe", "--port", str(port)], capture_output=True, text=True, timeout=30
    )


def test_probe_exit_codes(appliance):
    ok = probe(appliance.port)
    assert ok.returncode == 0 and ok.stdout.startswith("healthy: profile cpu")
    down = probe(free_port())
    assert down.returncode == 1 and down.stdout.startswith("unreachable:")
    assert len(down.stdout.strip().splitlines()) == 1


def decide_like_the_entrypoint(tmp: Path, card_gb: str | None) -> subprocess.CompletedProcess:
    extra = {"HYMT_MODEL": "tencent/Hunyuan-MT-7B"}
    if card_gb is not None:
        extra["HYMT_GPU_MEMORY_GB"] = card_gb
    env = base_env(tmp, **extra)
    env.pop("HYMT_PROFILE", None)
    init = ROOT / "rootfs/etc/hymt/init.d"
    return subprocess.run(
        ["sh", "-c", f'. "{init}/10-defaults.sh" && . "{init}/20-profile.sh"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "card_gb,profile",
    [
        ("8", "int4-int8kv"),
        # Simulated with no GPU here, the card's generation is unknown, which the planner lets run FP8.
        ("12", "fp8-int8kv"),
        ("16", "fp8"),
        ("24", "bf16"),
        ("48", "bf16"),
        ("80", "bf16"),
        (None, "cpu"),
    ],
)
def test_entrypoint_profile_decision(tmp_path, card_gb, profile):
    result = decide_like_the_entrypoint(tmp_path, card_gb)
    assert result.returncode == 0, result.stderr
    decision = json.loads((tmp_path / "run/decision.json").read_text())
    assert decision["profile"] == profile
    assert f"hymt: profile {profile}" in result.stdout
    if profile == "cpu":
        assert "no usable NVIDIA GPU" in result.stderr


def test_entrypoint_refuses_a_six_gb_card_in_one_line(tmp_path):
    result = decide_like_the_entrypoint(tmp_path, "6")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("hymt: cannot start: the model does not fit in 6.0 GiB")
    assert not (tmp_path / "run/decision.json").exists()


def test_dockerfile_passes_hadolint():
    result = subprocess.run([str(BIN / "hadolint"), str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_file_matches_the_compose_specification():
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(ROOT / "docker-compose.yml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_start_sh_native_brings_up_a_healthy_appliance(test_model, tmp_path, native_start):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYMT_")}
    env.update(HYMT_MAX_NEW_TOKENS="8")
    try:
        up = subprocess.run(
            [str(ROOT / "start.sh"), "--native", "--model", str(test_model), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"hymt is ready: http://localhost:{port}/" in up.stdout
        assert httpx.get(f"http://127.0.0.1:{port}/health").json()["status"] == "healthy"
    finally:
        supervisord = (ROOT / ".run" / "supervisord.pid").read_text().strip()
        down = subprocess.run(
            [str(ROOT / "start.sh"), "--native", "--stop"], capture_output=True, text=True, timeout=90, env=env
        )
    assert "hymt stopped" in down.stdout
    assert not Path(f"/proc/{supervisord}").exists()  # --stop returned once supervisord (and its programs) ended
    assert (ROOT / ".venv" / ".hymt-installed").is_file()  # what the next start compares before running pip


def test_start_sh_test_model_is_one_command_and_says_it_is_noise(native_start):
    """--test-model: the venv (pip not run again: the start above left it up to date), the test model, the
    appliance, and the warning that its translations are random tokens."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYMT_")}
    env.update(HYMT_MAX_NEW_TOKENS="8")
    try:
        up = subprocess.run(
            [str(ROOT / "start.sh"), "--test-model", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        assert "installing hymt" not in up.stdout
        assert (
            "its translations are random tokens" in up.stdout
            and f"hymt is ready: http://localhost:{port}/" in up.stdout
        )
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
        assert health["status"] == "healthy" and health["model"] == str(ROOT / ".cache" / "test-model")
    finally:
        down = subprocess.run(
            [str(ROOT / "start.sh"), "--native", "--stop"], capture_output=True, text=True, timeout=90, env=env
        )
    assert "hymt stopped" in down.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine may start the default model")
def test_start_sh_without_gpu_or_model_says_what_to_do(native_start):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYMT_")}
    result = subprocess.run([str(ROOT / "start.sh"), "--native"], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2 and "./start.sh --test-model" in result.stderr
    assert "installing" not in result.stdout


def test_start_sh_native_ends_with_the_reason_when_the_model_is_broken(test_model, tmp_path, native_start):
    """Weights missing: the server fails each start, supervisord gives up (FATAL) and start.sh says why and stops,
    instead of waiting for a health that never comes."""
    broken = Path(shutil.copytree(test_model, tmp_path / "broken"))
    (broken / "model.safetensors").unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYMT_")}
    result = subprocess.run(
        [str(ROOT / "start.sh"), "--native", "--model", str(broken), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        f"start.sh: the appliance did not come up: hymt-server could not start and supervisord gave up: "
        f"missing file: {broken} has a config.json but no weights"
    ) in result.stderr
    assert "last lines of" in result.stderr and "hymt: error: missing file" in result.stderr
    down = subprocess.run(
        [str(ROOT / "start.sh"), "--native", "--stop"], capture_output=True, text=True, timeout=60, env=env
    )
    assert "hymt is not running" in down.stdout


def test_start_sh_native_refused_settings_say_why(test_model, native_start):
    """The entrypoint refuses a bad setting: start.sh reports this start's reason, not an error line left in the
    programs' logs by an earlier start (the test above leaves one)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HYMT_")}, "HYMT_MAX_IN_FLIGHT": "abc"}
    result = subprocess.run(
        [str(ROOT / "start.sh"), "--native", "--model", str(test_model), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "start.sh: the appliance did not come up: hymt: cannot start: HYMT_MAX_IN_FLIGHT='abc' is not a valid int"
    ) in result.stderr, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("docker") is None, reason="no docker client")
def test_start_sh_without_a_docker_engine_says_what_to_do():
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    result = subprocess.run([str(ROOT / "start.sh")], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "start.sh: Docker's engine is not reachable (is the daemon running, may this "
        "user use it?); or run ./start.sh --native"
    )


def test_start_sh_bad_arguments():
    for args, needle in (
        (["--bogus"], "unknown option --bogus"),
        (["--model", "/nope"], "not a model directory"),
        (["--port", "x"], "--port must be a number"),
        (["--test-model", "--model", "/tmp"], "--model and --test-model exclude each other"),
    ):
        result = subprocess.run([str(ROOT / "start.sh"), *args], capture_output=True, text=True, timeout=30)
        assert result.returncode == 2 and needle in result.stderr


SCRIPTED_DOCKER = """#!/usr/bin/env bash
# docker as start.sh calls it, scripted: the probe inside the container answers "unhealthy" (a server that failed
# to load, before it exits), then "failed" once, then "unreachable" (the health service between two checks); the
# container log has no line to fall back on.
case "$1 ${2:-}" in
  "info --format") echo '{"nvidia": {}}' ;;
  "info "|"image inspect"|"compose up"|"compose logs") ;;
  "compose ps") echo box ;;
  inspect*) echo "$STATE" ;;
  exec*) echo x >>"$ASKED"
         case $(wc -l <"$ASKED") in
           1) echo "unhealthy: permission denied" ;;
           2) printf 'failed: the reason\\nlast lines of server.log:\\n  hymt: error: why\\n' ;;
           *) echo "unreachable: connection refused" ;;
         esac ;;
  logs*) ;;
  *) exit 2 ;;
esac
"""


@pytest.mark.parametrize(
    "state, said",
    [
        (
            "running 0",
            "start.sh: the container did not come up: the reason\nlast lines of server.log:\n  hymt: error: why",
        ),
        ("exited 0", "start.sh: the container did not come up: see docker compose logs hymt"),
    ],
)
def test_start_sh_docker_path_reports_the_answer_that_ended_the_wait(test_model, tmp_path, state, said):
    """The wait ends on "failed" (not on a passing "unhealthy"), the reason is the probe answer that ended it (asking
    again can meet another answer), and a fallback that finds nothing still says something (under set -e a grep
    without a match once ended start.sh silently)."""
    (tmp_path / "docker").write_text(SCRIPTED_DOCKER)
    (tmp_path / "docker").chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HYMT_")},
        "STATE": state,
        "ASKED": str(tmp_path / "asked"),
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
    }
    result = subprocess.run(
        [str(ROOT / "start.sh"), "--model", str(test_model)], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert said in result.stderr, result.stdout + result.stderr
    assert "./start.sh --stop to remove it" in result.stderr
