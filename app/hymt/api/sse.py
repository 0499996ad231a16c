"""Server-Sent Events, for every stream the API sends: the page's named events ("start", "progress", "done",
"error") and OpenAI's unnamed `data:` chunks. A stream ends in its own last chunk or in an explicit error, shaped as
the same error answered as JSON (failures.error_body), whatever went wrong after the 200 was sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ..errors import HymtError
from .failures import crash_body, error_body, for_openai

# No caching, and no buffering by a proxy in front (nginx reads X-Accel-Buffering), so each event goes out at once.
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(kind: str, body: dict) -> str:
    """A named event: the page's streams."""
    return f"event: {kind}\n{data(body)}"


def data(body: dict) -> str:
    """An unnamed chunk: OpenAI's streams."""
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def response(request: Request, chunks: AsyncIterator[str]) -> StreamingResponse:
    """The stream as a response. A HymtError raised inside it becomes its last chunk, an error; so does a crash
    (internal_error, with the id of its logged traceback)."""

    async def guarded() -> AsyncIterator[str]:
        try:
            async for chunk in chunks:
                yield chunk
        except HymtError as exc:
            yield _error(request, error_body(request, exc.message, exc.error_type))
        except Exception as exc:  # noqa: BLE001 - the answer has begun: a crash can only be told as its last chunk
            yield _error(request, crash_body(request, exc))

    return StreamingResponse(guarded(), media_type="text/event-stream", headers=HEADERS)


def _error(request: Request, body: dict) -> str:
    # OpenAI's clients read an error from an unnamed chunk that holds "error"; the page listens for "error" events.
    return data(body) if for_openai(request) else event("error", body)
