"""Replicas sharing one PostgreSQL (HYMT_DATABASE_URL): two `hymt serve` on the test model, each with its own data
folder (no shared volume), one database started by the test. A document accepted by one is polled and downloaded
from the other; one replica killed with -9 mid-job hands the job to the other, which ends it with every line once; a
glossary made on one is used on the other; usage is summed over both; a database unreachable at start ends the
server in one line, and one lost at run time makes /health unhealthy and the store's routes 503 while text goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import psycopg
import pytest

from postgres import Postgres, postgres
from servers import Server, free_port, wait_until

# Servers start and documents run on a loaded 2-core CI machine: each wait has its own deadline of minutes.
pytestmark = pytest.mark.timeout(1200)

KEY = "replica-key"
# A short lease, so that the job of a killed replica moves within seconds, not the default 30.
ENV = {"HYMT_API_KEYS": KEY, "HYMT_MAX_IN_FLIGHT": "2", "HYMT_JOB_LEASE_S": "6"}
HEADERS = {"Authorization": f"Bearer {KEY}"}
DEEPL = {"Authorization": f"DeepL-Auth-Key {KEY}"}
TIMEOUT = 120  # every call: the CI machine is a loaded 2-core one


def lines(count: int) -> bytes:
    return "".join(f"Line {i} of a shared document.\n" for i in range(count)).encode()


def status(server: Server, job_id: str) -> dict:
    response = httpx.get(f"{server.url}/api/jobs/{job_id}", headers=HEADERS, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    return response.json()


def until_done(server: Server, job_id: str) -> dict:
    def ended():
        now = status(server, job_id)
        return now if now["status"] in ("done", "error", "cancelled") else None

    return wait_until(ended, 600, server.log_path.read_text, f"job {job_id} ended", interval=0.5)


def translate(server: Server, text: str) -> None:
    response = httpx.post(
        f"{server.url}/translate", json={"q": text, "source": "en", "target": "de"}, headers=HEADERS, timeout=TIMEOUT
    )
    assert response.status_code == 200, response.text


def segments(server: Server) -> float:
    """The segments the replica has translated since it started."""
    metrics = httpx.get(f"{server.url}/metrics", timeout=TIMEOUT).text.splitlines()
    return float(next(line.split()[1] for line in metrics if line.startswith("hymt_segments_total ")))


def used(server: Server) -> int:
    response = httpx.get(f"{server.url}/v2/usage", headers=DEEPL, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    return response.json()["character_count"]


@pytest.fixture(scope="module")
def database():
    with postgres() as server:
        yield server


@pytest.fixture(scope="module")
def replicas(test_model, tmp_path_factory, database):
    url = database.create_database("replicas")
    logs = tmp_path_factory.mktemp("replicas")
    pair = [Server(test_model, logs / f"{name}.log", **ENV, HYMT_DATABASE_URL=url) for name in ("a", "b")]
    try:
        for server in pair:
            server.wait_healthy(timeout=600)
        yield pair, url
    finally:
        for server in pair:
            server.stop()


def test_a_document_submitted_to_one_replica_is_polled_and_downloaded_from_the_other(replicas):
    (a, b), _ = replicas
    assert httpx.get(f"{a.url}/health", timeout=TIMEOUT).json()["database"] == "postgresql"
    submitted = httpx.post(
        f"{a.url}/api/jobs",
        files={"file": ("notes.txt", lines(20))},
        data={"source": "en", "target": "de"},
        headers=HEADERS,
        timeout=TIMEOUT,
    )
    assert submitted.status_code == 202, submitted.text
    done = until_done(b, submitted.json()["id"])
    assert done["status"] == "done", done
    assert done["result_url"].startswith(b.url)
    result = httpx.get(done["result_url"], headers=HEADERS, timeout=TIMEOUT)
    assert result.status_code == 200 and result.content.decode().count("\n") == 20
    assert 'filename="notes.de.txt"' in result.headers["content-disposition"]
    assert submitted.json()["id"] in [j["id"] for j in httpx.get(f"{b.url}/api/jobs", headers=HEADERS).json()["jobs"]]

    # DeepL's document calls, as a client behind a balancer without sticky sessions makes them.
    upload = httpx.post(
        f"{b.url}/v2/document",
        files={"file": ("memo.txt", lines(5))},
        data={"target_lang": "DE"},
        headers=DEEPL,
        timeout=TIMEOUT,
    )
    assert upload.status_code == 200, upload.text
    handle = upload.json()

    def deepl_done():
        state = httpx.post(
            f"{a.url}/v2/document/{handle['document_id']}",
            json={"document_key": handle["document_key"]},
            headers=DEEPL,
            timeout=TIMEOUT,
        ).json()
        return state["status"] == "done" and state

    wait_until(deepl_done, 600, a.log_path.read_text, "DeepL document done")
    translated = httpx.post(
        f"{a.url}/v2/document/{handle['document_id']}/result",
        json={"document_key": handle["document_key"]},
        headers=DEEPL,
        timeout=TIMEOUT,
    )
    assert translated.status_code == 200 and translated.content.decode().count("\n") == 5

    # Cancelled on one, cancelled for both.
    long = httpx.post(
        f"{a.url}/api/jobs",
        files={"file": ("long.txt", lines(2000))},
        data={"source": "en", "target": "de"},
        headers=HEADERS,
        timeout=TIMEOUT,
    ).json()
    cancelled = httpx.delete(f"{b.url}/api/jobs/{long['id']}", headers=HEADERS, timeout=TIMEOUT)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert status(a, long["id"])["status"] == "cancelled"


def test_a_glossary_made_on_one_replica_is_used_on_the_other(replicas):
    (a, b), _ = replicas
    made = httpx.post(
        f"{a.url}/v2/glossaries",
        json={
            "name": "Hardware",
            "source_lang": "en",
            "target_lang": "de",
            "entries": "GPU\tGrafikkarte\ndriver\tTreiber",
            "entries_format": "tsv",
        },
        headers=DEEPL,
        timeout=TIMEOUT,
    )
    assert made.status_code == 201, made.text
    glossary_id = made.json()["glossary_id"]
    assert glossary_id in [
        g["glossary_id"] for g in httpx.get(f"{b.url}/v2/glossaries", headers=DEEPL).json()["glossaries"]
    ]
    used_on_b = httpx.post(
        f"{b.url}/translate",
        json={"q": "The GPU needs a driver.", "source": "en", "target": "de", "glossary_id": glossary_id},
        headers=HEADERS,
        timeout=TIMEOUT,
    )
    assert used_on_b.status_code == 200, used_on_b.text
    assert used_on_b.json()["glossary"]["terms_applied"] == 2
    assert httpx.delete(f"{b.url}/v2/glossaries/{glossary_id}", headers=DEEPL, timeout=TIMEOUT).status_code == 204
    assert httpx.get(f"{a.url}/v2/glossaries/{glossary_id}", headers=DEEPL, timeout=TIMEOUT).status_code == 404


def test_usage_is_summed_over_the_replicas(replicas):
    (a, b), _ = replicas
    # Each replica writes its counts every few seconds: the earlier tests' first, then this one's.
    before = wait_until(lambda: used(a) == used(b) and used(a), 120, b.log_path.read_text, "usage settled", interval=1)
    translate(a, "Good morning.")  # 13 characters
    translate(b, "How are you today?")  # 18 characters
    wait_until(lambda: used(a) == used(b) == before + 31, 120, b.log_path.read_text, "usage summed", interval=1)


def test_a_replica_killed_mid_job_hands_the_job_to_the_other(replicas):
    (a, b), url = replicas
    # Killed a quarter done: checkpoints (every 64 texts or second) have kept some, most are left for the survivor.
    count = 300
    before = {server.url: segments(server) for server in (a, b)}
    submitted = httpx.post(
        f"{a.url}/api/jobs",
        files={"file": ("long.txt", lines(count))},
        data={"source": "en", "target": "de"},
        headers=HEADERS,
        timeout=TIMEOUT,
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]

    def holder() -> Server | None:
        # Whichever replica claimed the job (the one that accepted it, as a rule) is the one killed.
        with psycopg.connect(url) as connection:
            row = connection.execute("SELECT lease_owner, segments_done FROM jobs WHERE id = %s", (job_id,)).fetchone()
        assert row is not None
        owner, done = row
        if owner is None or done < count // 4:
            return None
        return next(s for s in (a, b) if f":{s.process.pid}:" in owner)

    killed = wait_until(holder, 600, a.log_path.read_text, "the job a quarter done", interval=0.2)
    survivor = b if killed is a else a
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait(60)
    # What its checkpoints kept (the segments it reported done include those settled since the last one), read
    # while the lease still keeps the survivor off the job.
    with psycopg.connect(url) as connection:
        (kept,) = connection.execute("SELECT COUNT(*) FROM job_texts WHERE job_id = %s", (job_id,)).fetchone()
    assert kept > 0
    done = until_done(survivor, job_id)
    assert done["status"] == "done", done
    out = httpx.get(done["result_url"], headers=HEADERS, timeout=TIMEOUT).content.decode()
    assert out.count("\n") == count and len(out.splitlines()) == count
    # The survivor resumed from the killed one's last checkpoint: it did not translate the document again.
    with psycopg.connect(url) as connection:
        assert connection.execute("SELECT COUNT(*) FROM job_texts WHERE job_id = %s", (job_id,)).fetchone() == (0,)
    assert segments(survivor) - before[survivor.url] <= count - kept


def test_a_database_unreachable_at_start_ends_the_server_in_one_line(test_model, tmp_path):
    environ = {
        **os.environ,
        "HYMT_PROFILE": "cpu",
        "HYMT_LOG_LEVEL": "warning",
        "HYMT_DATA_DIR": str(tmp_path / "data"),
        "HYMT_DATABASE_URL": f"postgresql://hymt:secret@127.0.0.1:{free_port()}/hymt",
    }
    ended = subprocess.run(
        [sys.executable, "-m", "hymt", "serve", "--model", str(test_model), "--port", str(free_port())],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ended.returncode != 0
    errors = [line for line in ended.stderr.splitlines() if line.startswith("hymt: error:")]
    assert len(errors) == 1 and errors[0].startswith("hymt: error: cannot reach the database at 127.0.0.1:"), (
        ended.stderr
    )
    assert "Traceback" not in ended.stderr and "secret" not in ended.stderr


def test_a_database_lost_at_run_time_stops_the_store_not_text(test_model, tmp_path):
    own = Postgres()
    server = None
    try:
        server = Server(test_model, tmp_path / "lost.log", **ENV, HYMT_DATABASE_URL=own.create_database("lost"))
        server.wait_healthy(timeout=600)
        own.stop()

        def unhealthy():
            response = httpx.get(f"{server.url}/health", timeout=TIMEOUT)
            return response.status_code == 503 and response.json()

        body = wait_until(unhealthy, 120, server.log_path.read_text, "/health unhealthy")
        assert body["status"] == "unhealthy" and "database" in body["error"] and body["database_error"]
        jobs = httpx.get(f"{server.url}/api/jobs", headers=HEADERS, timeout=TIMEOUT)
        assert jobs.status_code == 503 and jobs.json()["error_type"] == "store_unavailable"
        assert int(jobs.headers["retry-after"]) >= 1
        upload = httpx.post(
            f"{server.url}/api/jobs",
            files={"file": ("a.txt", lines(3))},
            data={"target": "de"},
            headers=HEADERS,
            timeout=TIMEOUT,
        )
        assert upload.status_code == 503 and "retry-after" in upload.headers
        glossaries = httpx.get(f"{server.url}/v2/glossaries", headers=DEEPL, timeout=TIMEOUT)
        assert glossaries.status_code == 503 and "retry-after" in glossaries.headers
        translate(server, "Text translation does not need the database.")
        own.start()
        wait_until(
            lambda: httpx.get(f"{server.url}/health", timeout=TIMEOUT).status_code == 200,
            120,
            server.log_path.read_text,
            "/health healthy again",
        )
        assert httpx.get(f"{server.url}/api/jobs", headers=HEADERS, timeout=TIMEOUT).status_code == 200
    finally:
        if server is not None:
            server.stop()
        own.remove()
