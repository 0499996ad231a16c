"""schemathesis against a running server: every check but the response-time limit, on the OpenAPI document the
server publishes, with the hooks that make documents for the file endpoints (schemathesis_hooks.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

# The limits of the servers fuzzed: small, so that generated texts reach them.
LIMITS = {"HYMT_MAX_CHARS": "500", "HYMT_MAX_TEXTS": "5", "HYMT_MAX_UPLOAD_BYTES": "200000"}

# schemathesis's "all" less max_response_time, which `--checks all` adds with a 10 s limit.
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
    "negative_data_rejection",
    "positive_data_acceptance",
    "missing_required_header",
    "unsupported_method",
    "allow_header_conformance",
    "use_after_free",
    "ensure_resource_availability",
    "ignored_auth",
    "object_level_authorization",
)


def schemathesis(url: str, cwd: Path, *options: str) -> None:
    # Bounded: a few dozen cases per operation, all phases that apply, every check (negative and positive data,
    # status codes, content types, headers, response schemas, unsupported methods and their Allow header,
    # authentication) but the response-time limit: on a shared CPU that would assert a timing.
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        ",".join(CHECKS),
        # One worker: with two threads, hypothesis's ast.parse of its strategies' lambdas trips CPython 3.11's
        # shared AST recursion counter now and then (python/cpython#106905: SystemError, "AST constructor
        # recursion depth mismatch"), which schemathesis reports as an error of the run.
        "--workers",
        "1",
        "--no-color",
        "--request-timeout",
        "120",
        "--generation-database",
        "none",
        *options,
    ]
    # The file endpoints accept the media types their encoding names; the hooks make documents of each. They run
    # without the coverage phase: for a multipart body with an encoded part, schemathesis 4.32.5's coverage phase
    # fills every other required field with "" and calls that valid (a target of "" is rightly a 400). The document
    # jobs' and DeepL's documents' other operations run in both: with the coverage phase, and in the stateful one
    # after the uploads whose links lead to them.
    env = {**os.environ, "SCHEMATHESIS_HOOKS": str(Path(__file__).with_name("schemathesis_hooks.py"))}
    # (Filters of two kinds select what matches both, so the first selection is one expression.)
    uploads = "_file|^POST /(api/jobs|v2/document)$"
    for selection in (
        ["--exclude-name-regex", uploads],
        ["--include-path-regex", "_file|^/api/jobs|^/v2/document", "--phases", "examples,fuzzing,stateful"],
    ):
        done = subprocess.run(command + selection, capture_output=True, text=True, timeout=600, cwd=cwd, env=env)
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
        assert "Tested: 0" not in done.stdout, done.stdout[-3000:]
    assert httpx.get(f"{url}/health").json()["status"] == "healthy"
