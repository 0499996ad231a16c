"""Floods, drains, kills and keys against real `hymt serve` processes: every request gets an answer in time (200,
429 or 503, never a hang), SIGTERM finishes what was accepted and exits 0, a killed server's clients get an error,
keys are checked and rate-limited and never logged."""

from __future__ import annotations

import concurrent.futures
import signal
import threading
import time

import httpx

from servers import Server, sse_events

CLIENT_TIMEOUT_S = 120


def test_flood_every_request_gets_200_or_429_in_time(test_model, tmp_path):
    # A short wait limit and four segments in flight, so that a flood of 256 overflows it however fast the machine
    # is (a faster engine admitted all 256 with the default rows); the queue limit stays far away.
    srv = Server(
        test_model, tmp_path / "flood.log", HYMT_MAX_QUEUE_WAIT_S="2", HYMT_MAX_NEW_TOKENS="64", HYMT_MAX_IN_FLIGHT="4"
    )
    try:
        srv.wait_healthy()
        barrier = threading.Barrier(64)

        def one(i: int):
            if i < 64:
                barrier.wait()  # the first 64 arrive at the same instant
            try:
                if i % 4 == 3:
                    r = httpx.post(
                        f"{srv.url}/v1/chat/completions",
                        timeout=CLIENT_TIMEOUT_S,
                        json={"model": "hunyuan-mt:de", "messages": [{"role": "user", "content": f"Hi {i}."}]},
                    )
                else:
                    r = httpx.post(
                        f"{srv.url}/translate",
                        timeout=CLIENT_TIMEOUT_S,
                        json={"q": f"Request number {i} of the flood.", "source": "en", "target": "de"},
                    )
            except httpx.TimeoutException as exc:
                return i, "timeout", None, repr(exc)
            return i, r.status_code, r.headers.get("retry-after"), r.json()

        with concurrent.futures.ThreadPoolExecutor(max_workers=256) as pool:
            results = list(pool.map(one, range(256)))
        statuses = [status for _, status, _, _ in results]
        assert set(statuses) <= {200, 429}, [r for r in results if r[1] not in (200, 429)][:5]
        assert statuses.count(200) >= 1 and statuses.count(429) >= 1
        for i, status, retry_after, body in results:
            if status != 429:
                continue
            assert retry_after and int(retry_after) >= 1
            if i % 4 == 3:
                assert body["error"]["type"] == "overloaded" and body["error"]["message"]
            else:
                assert body["error_type"] == "overloaded"
        metrics = httpx.get(f"{srv.url}/metrics").text
        admitted = _metric(metrics, "hymt_admitted_total")
        refused = _metric(metrics, 'hymt_refused_total{reason="queue"}')
        assert admitted >= statuses.count(200) and refused == statuses.count(429)
        assert "hymt_expected_wait_seconds" in metrics and _metric(metrics, "hymt_throughput_tokens_per_second") > 0
        assert httpx.get(f"{srv.url}/health").json()["status"] in ("healthy", "degraded")
    finally:
        srv.stop()


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def _stream_then_sigterm(srv: Server, lines: int) -> tuple[list, threading.Thread]:
    """A client streaming a document of `lines` lines from /api/translate; SIGTERM once its first token arrived.
    Returns the events it hears (filled until its stream ends) and its thread."""
    events, started = [], threading.Event()
    text = "\n".join(f"Line {i} of a document that is still being translated." for i in range(lines))

    def client():
        with httpx.stream(
            "POST",
            f"{srv.url}/api/translate",
            timeout=CLIENT_TIMEOUT_S,
            json={"text": text, "source": "en", "target": "de", "stream": True},
        ) as response:
            for kind, data in sse_events(response):
                events.append((kind, data))
                if kind == "token":
                    started.set()

    thread = threading.Thread(target=client)
    thread.start()
    assert started.wait(60)
    srv.process.send_signal(signal.SIGTERM)
    return events, thread


def test_sigterm_drains_in_flight_work_refuses_new_and_exits_zero(test_model, tmp_path):
    # Enough work (20 segments, two at a time) that it is still in flight while the checks below run.
    srv = Server(
        test_model, tmp_path / "drain.log", HYMT_MAX_NEW_TOKENS="48", HYMT_MAX_IN_FLIGHT="2", HYMT_DRAIN_GRACE_S="600"
    )
    srv.wait_healthy()
    events, client = _stream_then_sigterm(srv, lines=20)
    health = httpx.get(f"{srv.url}/health", timeout=10)
    assert health.status_code == 503 and health.json()["status"] == "draining"
    refused = httpx.post(f"{srv.url}/translate", json={"q": "New work.", "source": "en", "target": "de"}, timeout=10)
    assert refused.status_code == 503 and refused.json()["error_type"] == "draining"
    assert int(refused.headers["retry-after"]) >= 1
    client.join(CLIENT_TIMEOUT_S)
    assert srv.process.wait(60) == 0
    srv.log.close()
    kinds = [k for k, _ in events]
    assert kinds[-1] == "done", (events[-2:], srv.log_path.read_text()[-3000:])  # the whole answer, every line
    assert events[-1][1]["translatedText"].count("\n") == 19
    assert "drained: every request in flight has its answer" in srv.log_path.read_text()


def test_drain_past_its_grace_ends_what_is_left_with_an_error(test_model, tmp_path):
    srv = Server(
        test_model, tmp_path / "grace.log", HYMT_MAX_NEW_TOKENS="64", HYMT_MAX_IN_FLIGHT="2", HYMT_DRAIN_GRACE_S="1"
    )
    srv.wait_healthy()
    events, client = _stream_then_sigterm(srv, lines=30)
    client.join(CLIENT_TIMEOUT_S)
    assert not client.is_alive()
    assert srv.process.wait(60) == 0
    srv.log.close()
    kind, body = events[-1]
    assert kind == "error" and body["error_type"] == "not_ready", events[-2:]


def test_a_killed_server_gives_its_clients_an_error_not_a_hang(test_model, tmp_path):
    srv = Server(
        test_model,
        tmp_path / "killed.log",
        HYMT_MAX_NEW_TOKENS="64",
        HYMT_MAX_IN_FLIGHT="2",
        HYMT_MAX_QUEUE_WAIT_S="3600",
    )  # all of them accepted
    srv.wait_healthy()
    text = "\n".join(f"Sentence {i} keeps the engine busy for a while." for i in range(10))

    def one(_):
        try:
            r = httpx.post(
                f"{srv.url}/translate", json={"q": text, "source": "en", "target": "de"}, timeout=CLIENT_TIMEOUT_S
            )
            return r.status_code
        except httpx.TimeoutException:
            return "timeout"
        except httpx.TransportError as exc:
            return type(exc).__name__

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(one, i) for i in range(8)]
        deadline = time.monotonic() + 60
        while httpx.get(f"{srv.url}/health").json()["in_flight"] == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        srv.process.kill()
        outcomes = [f.result() for f in futures]
    srv.process.wait(10)
    srv.log.close()
    assert "timeout" not in outcomes
    assert all(isinstance(o, str) for o in outcomes), outcomes  # a connection error each, no answer invented


def test_keys_bearer_or_api_key_rate_limited_and_never_logged(test_model, tmp_path):
    keys = ("alpha-secret-0001", "bravo-secret-0002")
    srv = Server(test_model, tmp_path / "keys.log", HYMT_API_KEYS=",".join(keys), HYMT_RATE_LIMIT_PER_KEY="3")
    try:
        srv.wait_healthy()
        body = {"q": "hi", "source": "en", "target": "de"}
        assert httpx.post(f"{srv.url}/translate", json=body).status_code == 401
        assert httpx.post(f"{srv.url}/translate", json={**body, "api_key": "alpha-secret-0009"}).status_code == 403
        assert (
            httpx.post(
                f"{srv.url}/translate", json=body, headers={"Authorization": "Basic alpha-secret-0001"}
            ).status_code
            == 401
        )
        assert httpx.post(f"{srv.url}/translate", json={**body, "api_key": keys[0]}).status_code == 200
        assert (
            httpx.post(
                f"{srv.url}/translate?api_key={keys[0]}", json=body, headers={"Authorization": f"Bearer {keys[0]}"}
            ).status_code
            == 200
        )
        chat = {"model": "hunyuan-mt:de", "messages": [{"role": "user", "content": "hi"}]}
        assert (
            httpx.post(
                f"{srv.url}/v1/chat/completions", json=chat, headers={"Authorization": f"bearer {keys[0]}"}
            ).status_code
            == 200
        )
        limited = httpx.post(
            f"{srv.url}/v1/chat/completions", json=chat, headers={"Authorization": f"Bearer {keys[0]}"}
        )
        assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limited"
        assert int(limited.headers["retry-after"]) >= 1
        assert httpx.post(f"{srv.url}/translate", data={**body, "api_key": keys[1]}).status_code == 200
        spec = httpx.get(f"{srv.url}/openapi.json").json()
        assert spec["paths"]["/translate"]["post"]["security"] == [{"bearer": []}]
        assert httpx.get(f"{srv.url}/frontend/settings").json()["keyRequired"] is True
    finally:
        srv.stop()
    log = srv.log_path.read_text()
    assert "api_key=***" in log
    assert not any(key in log for key in keys) and "alpha-secret-0009" not in log
