"""Every stream (the page's text and file streams, OpenAI's chat stream) ends in its answer or in an explicit error,
and an error inside a stream has the shape of the same error answered as JSON."""

from __future__ import annotations

import json

import pytest

from hymt.errors import GenerationError

STREAMS = {
    "page": ("/api/translate", {"json": {"text": "Hello. Goodbye.", "source": "en", "target": "de"}}),
    "openai": (
        "/v1/chat/completions",
        {"json": {"model": "hunyuan-mt:de", "messages": [{"role": "user", "content": "Hello. Goodbye."}]}},
    ),
    "file": (
        "/translate_file",
        {"files": {"file": ("a.txt", b"Hello.\nGoodbye.\n")}, "data": {"source": "en", "target": "de"}},
    ),
}


def _streamed(client, name: str):
    """The stream's last chunk (event name, body)."""
    path, request = STREAMS[name]
    if name == "file":
        path = "/api/translate_file"
    else:
        request = {"json": {**request["json"], "stream": True}}
    response = client.post(path, **request)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    kind, last = None, None
    for line in response.text.splitlines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: {"):
            last = (kind, json.loads(line[6:]))
    return last


@pytest.mark.parametrize("name", STREAMS)
def test_a_failed_job_ends_the_stream_with_the_error_as_json_has_it(in_process, translator, monkeypatch, name):
    submit = translator.submit

    def failing(*args, **kwargs):
        job = submit(*args, **kwargs)
        translator.end(job, GenerationError("a failure in this test"))
        return job

    monkeypatch.setattr(translator, "submit", failing)
    path, request = STREAMS[name]
    plain = in_process.post(path, **request)
    assert plain.status_code == 500 and plain.json()["error_type"] == "generation_failed"
    kind, body = _streamed(in_process, name)
    assert body == plain.json() and kind == (None if name == "openai" else "error")


@pytest.mark.parametrize("name", STREAMS)
def test_a_crash_inside_a_stream_ends_it_with_an_internal_error(in_process, monkeypatch, caplog, name):
    from hymt.api import jobs
    from hymt.translation.jobs import Job

    def crash(*args, **kwargs):
        raise RuntimeError("a crash in this test")

    if name == "file":
        monkeypatch.setattr(jobs, "file_answer", crash)
    else:
        monkeypatch.setattr(Job, "settled_texts", crash)
    kind, body = _streamed(in_process, name)
    assert kind == (None if name == "openai" else "error") and body["error_type"] == "internal_error"
    assert body["error_id"] in caplog.text and "a crash in this test" not in json.dumps(body)
