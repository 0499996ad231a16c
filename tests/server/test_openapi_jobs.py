"""The OpenAPI document's description of the document jobs (/api/jobs) and of DeepL's document API (/v2/document),
against a real server on the test model: every answer validates against the schema the document gives for its
status, and the fields' enums are the values the server accepts."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from jsonschema import Draft202012Validator

from hymt.api import deepl
from hymt.api.openapi import build_spec
from hymt.errors import BadRequest
from hymt.settings import Settings
from servers import serving

TEXT = b"First line of the document.\nSecond line."


@pytest.fixture(scope="module")
def server(test_model, tmp_path_factory):
    with serving(test_model, tmp_path_factory.mktemp("logs") / "jobs.log") as srv:
        srv.spec = httpx.get(f"{srv.url}/openapi.json").json()
        yield srv


def conforms(spec: dict, path: str, method: str, response: httpx.Response) -> dict:
    """The response's JSON body, once it validates against the document's schema for its status."""
    responses = spec["paths"][path][method]["responses"]
    assert str(response.status_code) in responses, (path, method, response.status_code, response.text)
    schema = responses[str(response.status_code)]["content"]["application/json"]["schema"]
    body = response.json()
    Draft202012Validator({**schema, "components": spec["components"]}).validate(body)
    return body


def wait_done(url: str, read, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = read()
        if body["status"] not in ("queued", "translating"):
            return body
        time.sleep(0.2)
    raise TimeoutError(url)


def test_the_document_describes_every_route_of_documents():
    spec = build_spec(Settings())
    paths = spec["paths"]
    assert set(paths["/api/jobs"]) == {"post", "get"} and set(paths["/api/jobs/{job_id}"]) == {"get", "delete"}
    assert (
        "get" in paths["/api/jobs/{job_id}/result"] and "409" in paths["/api/jobs/{job_id}/result"]["get"]["responses"]
    )
    assert "202" in paths["/api/jobs"]["post"]["responses"]
    for path in ("/v2/document", "/v2/document/{document_id}", "/v2/document/{document_id}/result"):
        responses = paths[path]["post"]["responses"]
        errors = [r for status, r in responses.items() if status != "200"]
        assert all(r["content"]["application/json"]["schema"]["$ref"].endswith("/DeepLError") for r in errors)
        assert "security" not in paths[path]["post"]  # any key is accepted when keys are off
    assert "503" in paths["/v2/document/{document_id}/result"]["post"]["responses"]
    stream = paths["/api/translate_file"]["post"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    assert stream["properties"]["event"]["enum"] == ["start", "queued", "progress", "done", "error"]

    keyed = build_spec(Settings(api_keys=("k",)))
    assert keyed["components"]["securitySchemes"]["deepl"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": keyed["components"]["securitySchemes"]["deepl"]["description"],
    }
    assert keyed["paths"]["/v2/document"]["post"]["security"] == [{"deepl": []}, {"bearer": []}]
    assert keyed["paths"]["/api/jobs"]["get"]["security"] == [{"bearer": []}]
    assert "401" not in keyed["paths"]["/v2/document"]["post"]["responses"]  # DeepL's clients expect 403
    assert "401" in keyed["paths"]["/api/jobs/{job_id}"]["delete"]["responses"]


def test_deepls_fields_enumerate_what_the_server_accepts():
    form = build_spec(Settings())["paths"]["/v2/document"]["post"]["requestBody"]["content"]["multipart/form-data"]
    fields = form["schema"]["properties"]
    for code in fields["target_lang"]["enum"]:
        assert deepl.language({"target_lang": code}, "target_lang", required=True) is not None
    assert {"DE", "EN-GB", "EN-US", "PT-BR", "ZH-HANS", "ZH-HANT", "ES-419"} <= set(fields["target_lang"]["enum"])
    assert "auto" not in fields["source_lang"]["enum"] and "" in fields["source_lang"]["enum"]
    for value in fields["formality"]["enum"]:
        deepl.formality({"formality": value})
    with pytest.raises(BadRequest):
        deepl.formality({"formality": "very"})


def test_a_job_answers_as_the_document_says(server):
    spec = server.spec
    submitted = httpx.post(
        f"{server.url}/api/jobs",
        files={"file": ("notes.txt", TEXT)},
        data={"source": "en", "target": "de", "context": "false", "glossary": json.dumps([])},
    )
    assert submitted.status_code == 202, submitted.text
    job = conforms(spec, "/api/jobs", "post", submitted)
    assert job["status"] in ("queued", "translating", "done") and job["name"] == "notes.de.txt"
    url = f"{server.url}/api/jobs/{job['id']}"
    done = wait_done(url, lambda: conforms(spec, "/api/jobs/{job_id}", "get", httpx.get(url)))
    assert done["status"] == "done" and done["segments_done"] == done["segments_total"] == 2
    assert done["result_url"] == f"{url}/result" and done["report"]["segments"] == 2
    listed = conforms(spec, "/api/jobs", "get", httpx.get(f"{server.url}/api/jobs"))
    assert job["id"] in [j["id"] for j in listed["jobs"]]
    result = httpx.get(done["result_url"])
    content = spec["paths"]["/api/jobs/{job_id}/result"]["get"]["responses"]["200"]["content"]
    assert result.status_code == 200 and result.headers["content-type"] in content
    # Cancelling an ended job leaves it as it was.
    assert conforms(spec, "/api/jobs/{job_id}", "delete", httpx.delete(url))["status"] == "done"
    unknown = f"{server.url}/api/jobs/{'0' * 32}"
    for response in (httpx.get(unknown), httpx.delete(unknown), httpx.get(f"{unknown}/result")):
        method = response.request.method.lower()
        path = "/api/jobs/{job_id}" + ("/result" if response.request.url.path.endswith("/result") else "")
        assert conforms(spec, path, method, response)["error_type"] == "not_found"


def test_a_cancelled_job_has_no_result(server):
    spec = server.spec
    submitted = httpx.post(
        f"{server.url}/api/jobs", files={"file": ("long.txt", b"\n".join([TEXT] * 40))}, data={"target": "fr"}
    )
    job = conforms(spec, "/api/jobs", "post", submitted)
    url = f"{server.url}/api/jobs/{job['id']}"
    cancelled = conforms(spec, "/api/jobs/{job_id}", "delete", httpx.delete(url))
    if cancelled["status"] == "cancelled":  # else it had ended already
        assert cancelled["finished_at"] and cancelled["result_url"] is None
        result = httpx.get(f"{url}/result")
        assert conforms(spec, "/api/jobs/{job_id}/result", "get", result)["error_type"] == "no_result"


def test_a_cancelled_deepl_document_has_no_result(server):
    """A well-formed ask for a result the document will never have: 409, as /api/jobs/{id}/result answers."""
    spec = server.spec
    uploaded = httpx.post(
        f"{server.url}/v2/document", files={"file": ("long.txt", b"\n".join([TEXT] * 40))}, data={"target_lang": "FR"}
    )
    document = conforms(spec, "/v2/document", "post", uploaded)
    if httpx.delete(f"{server.url}/api/jobs/{document['document_id']}").json()["status"] == "cancelled":
        result = httpx.post(
            f"{server.url}/v2/document/{document['document_id']}/result",
            data={"document_key": document["document_key"]},
        )
        assert result.status_code == 409, result.text
        assert conforms(spec, "/v2/document/{document_id}/result", "post", result)["message"] == (
            "Document translation failed: cancelled"
        )


def test_a_deepl_document_answers_as_the_document_says(server):
    spec = server.spec
    uploaded = httpx.post(
        f"{server.url}/v2/document",
        files={"file": ("notes.txt", TEXT)},
        data={"target_lang": "DE", "source_lang": "EN", "formality": "prefer_less"},
    )
    document = conforms(spec, "/v2/document", "post", uploaded)
    url = f"{server.url}/v2/document/{document['document_id']}"
    key = {"document_key": document["document_key"]}

    def status() -> dict:
        return conforms(spec, "/v2/document/{document_id}", "post", httpx.post(url, json=key))

    done = wait_done(url, status)
    assert done["status"] == "done" and done["billed_characters"] > 0
    assert conforms(spec, "/v2/document/{document_id}", "post", httpx.post(url, data=key))["status"] == "done"
    result = httpx.post(f"{url}/result", data=key)
    assert result.status_code == 200 and result.content
    wrong = httpx.post(url, json={"document_key": "0" * 64})
    assert wrong.status_code == 403 and conforms(spec, "/v2/document/{document_id}", "post", wrong)["message"]
    missing = httpx.post(url, json={})
    assert missing.status_code == 400 and conforms(spec, "/v2/document/{document_id}", "post", missing)
    unknown = httpx.post(f"{server.url}/v2/document/{'0' * 32}/result", json=key)
    assert unknown.status_code == 404 and conforms(spec, "/v2/document/{document_id}/result", "post", unknown)
    for data, status_code in (
        ({"target_lang": "DE", "glossary_id": "g1"}, 404),
        ({"target_lang": "XX"}, 400),
        ({"source_lang": "EN"}, 400),
        ({"target_lang": "DE", "formality": "very"}, 400),
        ({"target_lang": "DE", "output_format": "docx"}, 400),
    ):
        refused = httpx.post(f"{server.url}/v2/document", files={"file": ("notes.txt", TEXT)}, data=data)
        assert refused.status_code == status_code, (data, refused.text)
        conforms(spec, "/v2/document", "post", refused)


def test_with_keys_deepl_takes_its_own_header_and_answers_403_without(test_model, tmp_path):
    with serving(test_model, tmp_path / "keys.log", HYMT_API_KEYS="key-one,key-two") as srv:
        spec = httpx.get(f"{srv.url}/openapi.json").json()
        files = {"file": ("notes.txt", TEXT)}
        bare = httpx.post(f"{srv.url}/v2/document", files=files, data={"target_lang": "DE"})
        assert bare.status_code == 403 and conforms(spec, "/v2/document", "post", bare)["message"]
        headers = {"Authorization": "DeepL-Auth-Key key-one"}
        uploaded = httpx.post(f"{srv.url}/v2/document", files=files, data={"target_lang": "DE"}, headers=headers)
        document = conforms(spec, "/v2/document", "post", uploaded)
        url = f"{srv.url}/v2/document/{document['document_id']}"
        body = {"document_key": document["document_key"]}
        assert httpx.post(url, json=body, headers=headers).status_code == 200
        # Another key's document is no document of its.
        other = httpx.post(url, json=body, headers={"Authorization": "DeepL-Auth-Key key-two"})
        assert other.status_code == 404 and conforms(spec, "/v2/document/{document_id}", "post", other)
        job = httpx.post(f"{srv.url}/api/jobs", files=files, data={"target": "de", "api_key": "key-two"})
        assert job.status_code == 202
        unkeyed = httpx.get(f"{srv.url}/api/jobs/{job.json()['id']}")
        assert unkeyed.status_code == 401 and conforms(spec, "/api/jobs/{job_id}", "get", unkeyed)
        mine = httpx.get(f"{srv.url}/api/jobs", params={"api_key": "key-two"})
        assert [j["id"] for j in conforms(spec, "/api/jobs", "get", mine)["jobs"]] == [job.json()["id"]]
        theirs = httpx.get(f"{srv.url}/api/jobs/{job.json()['id']}", headers={"Authorization": "Bearer key-one"})
        assert theirs.status_code == 404 and conforms(spec, "/api/jobs/{job_id}", "get", theirs)
