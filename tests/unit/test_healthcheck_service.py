"""The health service's decisions, against a stand-in for supervisord's XML-RPC interface."""

from __future__ import annotations

import pytest

from healthcheck import service
from hymt.settings import Settings


class FakeSupervisor:
    def __init__(self, state="RUNNING"):
        self.state, self.calls, self.pid = state, [], 100

    def getProcessInfo(self, name):  # noqa: N802 - supervisord's method names
        return {"statename": self.state, "pid": self.pid}

    def stopProcess(self, name, wait):  # noqa: N802
        self.calls.append("stop")

    def startProcess(self, name, wait):  # noqa: N802
        self.calls.append("start")

    def signalProcess(self, name, sig):  # noqa: N802
        self.calls.append(f"signal {sig}")


class FakeRpc:
    def __init__(self, state="RUNNING"):
        self.supervisor = FakeSupervisor(state)


@pytest.fixture
def monitor(monkeypatch):
    answers = []
    monkeypatch.setattr(service, "server_health", lambda settings: answers.pop(0))
    monkeypatch.setattr(service, "read_gpu", lambda: None)
    settings = Settings(health_interval_s=1, health_failures=3, health_backoff_max_s=8, health_grace_s=60)
    mon = service.Monitor(settings, rpc=FakeRpc())
    return mon, answers


def _checks(monitor, answer: tuple, times: int) -> service.Monitor:
    """`times` checks, each answered with `answer`; the monitor."""
    mon, answers = monitor
    answers += [answer] * times
    for _ in range(times):
        mon.check()
    return mon


def test_healthy_server_is_left_alone(monitor):
    mon = _checks(monitor, (200, {"status": "healthy"}), 5)
    assert mon.rpc.supervisor.calls == [] and mon.latest["status"] == "healthy"


def test_loading_within_grace_is_not_a_failure(monitor):
    mon = _checks(monitor, (503, {"status": "loading"}), 5)
    assert mon.rpc.supervisor.calls == []


def test_a_draining_server_is_left_to_finish(monitor):
    mon = _checks(monitor, (503, {"status": "draining"}), 5)
    assert mon.rpc.supervisor.calls == [] and mon.latest["status"] == "draining"


def test_hung_server_is_killed_after_three_silent_checks(monitor):
    mon, answers = monitor
    answers += [(None, {"error": "timeout"})] * 3
    mon.check(), mon.check()
    assert mon.rpc.supervisor.calls == []
    mon.check()
    assert mon.rpc.supervisor.calls == ["signal KILL"] and mon.restarts == 1


def test_unhealthy_answers_mean_a_graceful_restart(monitor):
    mon = _checks(monitor, (503, {"status": "unhealthy", "error": "engine stopped"}), 3)
    assert mon.rpc.supervisor.calls == ["stop", "start"]
    assert mon.latest["error"] == "engine stopped"


def test_crash_loop_given_up_by_supervisord_is_restarted_with_back_off(monitor, monkeypatch):
    mon, answers = monitor
    mon.rpc.supervisor.state = "FATAL"
    clock = [1000.0]
    monkeypatch.setattr(service.time, "monotonic", lambda: clock[0])
    answers += [(None, {"error": "refused"})] * 40
    restarts_at = []
    for _ in range(40):
        before = mon.restarts
        mon.check()
        if mon.restarts > before:
            restarts_at.append(clock[0])
        clock[0] += 1
    gaps = [b - a for a, b in zip(restarts_at, restarts_at[1:])]
    assert gaps == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]  # doubling, capped at health_backoff_max_s
    assert all(call == "start" for call in mon.rpc.supervisor.calls)


def test_a_server_supervisord_gave_up_on_is_reported_failed_with_its_log(monitor, tmp_path):
    mon, answers = monitor
    mon.settings = Settings(health_interval_s=1, health_failures=3, health_backoff_max_s=8, log_dir=str(tmp_path))
    lines = [f"line {i}" for i in range(30)] + ["hymt: error: missing file: /models has a config.json but no weights"]
    (tmp_path / "server.log").write_text("\n".join(lines) + "\n")
    mon.rpc.supervisor.state = "FATAL"
    answers += [(None, {"error": "refused"})] * 2 + [(200, {"status": "healthy"})]
    sample = mon.check()
    assert sample["status"] == "failed"
    assert sample["error"] == (
        "hymt-server could not start and supervisord gave up: missing file: /models has a config.json but no weights"
    )
    assert sample["server_log_tail"] == lines[-service.LOG_TAIL_LINES :]
    mon.rpc.supervisor.state = "STARTING"  # the monitor's own restart: still failed until it is healthy
    assert mon.check()["status"] == "failed"
    mon.rpc.supervisor.state = "RUNNING"
    sample = mon.check()
    assert sample["status"] == "healthy" and "server_log_tail" not in sample


def test_failure_reason_falls_back_to_the_last_error_line():
    tail = [
        "INFO: Started server process",
        "ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): permission denied",
        "INFO: Waiting for application shutdown.",
    ]
    assert service.failure_reason({}, tail) == tail[1].strip()
    assert service.failure_reason({"spawnerr": "can't find command"}, ["nothing"]) == "can't find command"


def test_a_server_that_dies_after_its_startsecs_again_and_again_is_failed(monitor, tmp_path):
    """supervisord restarts a server that fails late (after startsecs) without end and never calls it FATAL."""
    mon, answers = monitor
    mon.settings = Settings(health_interval_s=1, health_failures=3, health_backoff_max_s=8, log_dir=str(tmp_path))
    (tmp_path / "server.log").write_text("hymt: error: out of memory while warming up\n")
    answers += [(503, {"status": "loading"})] * (service.STARTS_BEFORE_FAILED + 1) + [(200, {"status": "healthy"})]
    for pid in range(100, 100 + service.STARTS_BEFORE_FAILED):
        mon.rpc.supervisor.pid = pid
        assert mon.check()["status"] == "loading"
    mon.rpc.supervisor.pid += 1
    sample = mon.check()
    assert sample["status"] == "failed"
    assert sample["error"] == (
        f"hymt-server could not start and it was restarted {service.STARTS_BEFORE_FAILED} "
        "times without becoming healthy: out of memory while warming up"
    )
    assert mon.check()["status"] == "healthy" and mon.unhealthy_starts == 0
