"""Hostile documents against a real server and the CLI: zip bombs (one member too big, all of them together, too
many members, a ratio no document has), XML entity declarations (billion laughs, an external entity) and documents
with more segments, or longer ones, than the queue is meant to take. Each is answered with a 4xx and a JSON body
within seconds, the server's peak memory stays flat, and it is healthy after."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

import samples
from servers import Server

# Limits: 8 MiB per member, 24 MiB expanded, 1000 members, ratio 200 (guard.Limits); 128 segments of 2000
# characters.
ENV = {"HYMT_MAX_FILE_BYTES": "2000000", "HYMT_MAX_QUEUE_SEGMENTS": "8", "HYMT_MAX_CHARS": "2000"}
FORMATS = (".txt", ".md", ".html", ".srt", ".vtt", ".po", ".xliff", ".pdf", *samples.ARCHIVES)
BASE = ["Hello world, this is a document.", "A second paragraph follows."]
# Peak memory (VmHWM) may grow this much: reading the smallest bomb here would take twice as much and more (a
# comment is a node: 3 MB of them became 230 MB in lxml, 49 MB became 3.8 GB in python-docx).
MEMORY_GROWTH_LIMIT = 100 << 20


def peak_memory(server) -> int:
    with open(f"/proc/{server.process.pid}/status") as status:
        return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmHWM:"))


def _comments(size: int) -> bytes:
    return b"<!---->" * (size // 7)


def _insert(data: bytes, filler: bytes) -> bytes:
    at = data.rfind(b"Hello")
    return data[:at] + filler + data[at:]


def hostile(ext: str, kind: str) -> bytes:
    base = samples.document(ext, BASE)
    if kind == "member":  # one member expanding to 10 MB of XML nodes
        return samples.with_main(ext, base, lambda xml: _insert(xml, _comments(10_000_000)))
    if kind == "ratio":  # 3 MB from a few kilobytes: under the member limit, far over any document's ratio
        return samples.with_main(ext, base, lambda xml: _insert(xml, _comments(3_000_000)))
    if kind == "total":  # members under every other limit, over 24 MiB together
        return samples.rezip(base, add={f"media/extra{i}.bin": samples.low_entropy(7_000_000) for i in range(4)})
    if kind == "count":
        return samples.rezip(base, add={f"parts/{i}.xml": b"" for i in range(1100)})
    if kind in ("laughs", "external"):
        doctype, name = (samples.BILLION_LAUGHS, "lol9") if kind == "laughs" else (samples.EXTERNAL_ENTITY, "secret")
        if ext in samples.ARCHIVES:
            return samples.with_main(ext, base, lambda xml: samples.with_doctype(xml, doctype, name))
        return samples.with_doctype(base, doctype, name)
    if kind == "inflate":  # 30 MB from 30 kB: past the 24 MiB its streams may expand to together
        return samples.pdf_bomb(30_000_000)
    if kind == "pages":
        return samples.pdf_pages(1001)
    if kind == "segments":
        return samples.document(ext, [f"Paragraph number {i} of many." for i in range(200)])
    if kind == "long":
        return samples.document(ext, ["word " * 600])
    raise ValueError(kind)


ARCHIVE_KINDS = {
    "member": (413, "archive_too_large"),
    "ratio": (413, "archive_too_large"),
    "total": (413, "archive_too_large"),
    "count": (413, "archive_too_large"),
    "laughs": (400, "xml_entities"),
    "external": (400, "xml_entities"),
}
SEGMENT_KINDS = {"segments": (413, "too_many_segments"), "long": (413, "segment_too_long")}
PDF_KINDS = {"inflate": (413, "pdf_too_large"), "pages": (413, "pdf_too_large")}
CASES = (
    [(ext, kind) for ext in samples.ARCHIVES for kind in ARCHIVE_KINDS]
    + [(".xliff", kind) for kind in ("laughs", "external")]
    + [(".pdf", kind) for kind in PDF_KINDS]
    + [(ext, kind) for ext in FORMATS for kind in SEGMENT_KINDS]
)
EXPECTED = {**ARCHIVE_KINDS, **SEGMENT_KINDS, **PDF_KINDS}


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    srv = Server(test_model, tmp_path_factory.mktemp("logs") / "hostile-documents.log", **ENV)
    srv.wait_healthy()
    # Each format read once, so that what its library keeps after a first document is not counted as growth.
    for ext in FORMATS:
        _post(srv, f"warm{ext}", samples.document(ext, BASE), timeout=300)
    srv.baseline = peak_memory(srv)
    yield srv
    log = srv.log_path.read_text()
    srv.stop()
    assert "Traceback" not in log and " 500 " not in log, log[-3000:]


def _post(server, name: str, data: bytes, timeout: float = 30) -> httpx.Response:
    # The timeout is the "within seconds": a refusal is no work at all, so a generous bound cannot pass a slow one.
    return httpx.post(
        f"{server.url}/translate_file",
        files={"file": (name, data)},
        data={"source": "en", "target": "de"},
        timeout=timeout,
    )


@pytest.mark.parametrize("ext,kind", CASES, ids=[f"{e[1:]}-{k}" for e, k in CASES])
def test_hostile_document_is_refused_at_once_with_memory_flat(server, ext, kind):
    data = hostile(ext, kind)
    assert len(data) < 2_000_000
    status, error_type = EXPECTED[kind]
    for path in ("/translate_file", "/api/translate_file"):
        response = httpx.post(
            f"{server.url}{path}",
            files={"file": (f"hostile{ext}", data)},
            data={"source": "en", "target": "de"},
            timeout=30,
        )
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith("application/json")
        assert response.json()["error_type"] == error_type
    assert peak_memory(server) - server.baseline < MEMORY_GROWTH_LIMIT


def test_too_many_lines_are_refused_before_they_are_split(server):
    response = _post(server, "blank.txt", b"\n" * 600 + b"One line of words.\n")
    assert response.status_code == 413 and response.json()["error_type"] == "too_many_segments"


def test_external_entity_is_never_read(server):
    response = _post(server, "secret.xliff", hostile(".xliff", "external"))
    assert "root:" not in response.text


def test_server_is_healthy_after_the_hostile_documents(server):
    assert httpx.get(f"{server.url}/health").json()["status"] == "healthy"
    for ext in (".docx", ".odt", ".xliff"):
        response = _post(server, f"after{ext}", samples.document(ext, BASE), timeout=300)
        assert response.status_code == 200 and response.json()["segments"] == 2
    assert peak_memory(server) - server.baseline < MEMORY_GROWTH_LIMIT


CLI_CASES = [
    (".docx", "member"),
    (".odt", "ratio"),
    (".pptx", "count"),
    (".epub", "laughs"),
    (".xliff", "external"),
    (".ods", "segments"),
    (".md", "long"),
    (".pdf", "inflate"),
]


@pytest.mark.parametrize("ext,kind", CLI_CASES, ids=[f"{e[1:]}-{k}" for e, k in CLI_CASES])
def test_cli_refuses_hostile_documents_with_one_line(test_model, tmp_path, ext, kind):
    path = tmp_path / f"hostile{ext}"
    path.write_bytes(hostile(ext, kind))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hymt",
            "translate",
            "--model",
            str(test_model),
            "--to",
            "de",
            "-o",
            str(tmp_path / f"out{ext}"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ENV},
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hymt: error: "), done.stderr
    assert not (tmp_path / f"out{ext}").exists()


def test_cli_refuses_a_file_over_the_limit_without_reading_it_whole(test_model, tmp_path):
    path = tmp_path / "big.txt"
    path.write_bytes(b"words and more words\n" * 200_000)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hymt",
            "translate",
            "--model",
            str(test_model),
            "--to",
            "de",
            "-o",
            str(tmp_path / "out.txt"),
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ENV},
    )
    assert done.returncode == 2 and "HYMT_MAX_FILE_BYTES" in done.stderr, done.stderr
