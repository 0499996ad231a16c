"""`hymt translate --server URL`: a file (or standard input, as a .txt document) translated by a running hymt
server through its page's file endpoint (/api/translate_file: progress as Server-Sent Events), then downloaded.
The server decides what it accepts, so the command and the server cannot disagree on formats or limits."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from .errors import BadRequest, HymtError
from .languages import Language

# A document waits in the server's queue and is translated in parts; no read timeout while events may be apart.
TIMEOUT = httpx.Timeout(30.0, read=None)


def translate_file(
    server: str,
    name: str,
    data: bytes,
    source: Language | None,
    target: Language,
    api_key: str | None,
    on_start: Callable[[int], None],
    on_progress: Callable[[int, int], None],
) -> tuple[bytes, dict]:
    """The translated file and the server's report ({name, segments, markup_fallback_segments, ...})."""
    base = server.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    form = {"source": source.code if source else "auto", "target": target.code}
    try:
        with httpx.Client(timeout=TIMEOUT, headers=headers) as client:
            with client.stream(
                "POST", f"{base}/api/translate_file", data=form, files={"file": (name, data)}
            ) as response:
                if response.status_code != 200:
                    response.read()
                    raise _refused(response)
                report = _follow(response, on_start, on_progress)
            download = client.get(report["translatedFileUrl"])
            if download.status_code != 200:
                raise _refused(download)
            return download.content, report
    except httpx.HTTPError as exc:
        raise HymtError(f"cannot reach the hymt server at {base}: {exc}") from None


def _follow(response: httpx.Response, on_start, on_progress) -> dict:
    """The events up to "done" (its body returned) or "error" (raised)."""
    kind = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
            continue
        if not line.startswith("data: "):
            continue
        body = json.loads(line[6:])
        if kind == "start":
            on_start(body["segments"])
        elif kind == "progress":
            on_progress(body["done"], body["total"])
        elif kind == "done":
            return body
        elif kind == "error":
            raise HymtError(f"the server failed the translation: {body['error']}")
    raise HymtError("the server ended the answer before the translation was done")


def _refused(response: httpx.Response) -> HymtError:
    """The server's own error message; a 4xx is the request's fault (exit 2), anything else the server's (1)."""
    try:
        body = response.json()
        message = body["error"]["message"] if isinstance(body.get("error"), dict) else body["error"]
    except (ValueError, KeyError, TypeError, AttributeError):
        message = response.text[:200] or response.reason_phrase
    text = f"the server answered {response.status_code}: {message}"
    return BadRequest(text) if 400 <= response.status_code < 500 and response.status_code != 429 else HymtError(text)
