"""Every error as JSON in one shape, the same for a plain answer and for an error event inside a stream
(sse.py): expected ones (HymtError) with their status and code, Starlette's own, and crashes as a 500 with an id
that points at the logged traceback."""

from __future__ import annotations

import logging
import uuid

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from ..errors import HymtError

log = logging.getLogger("hymt.api")


def for_openai(request: Request) -> bool:
    """Whether the request came to OpenAI's API, whose clients expect OpenAI's error shape."""
    return request.url.path.startswith("/v1/")


def error_body(request: Request, message: str, error_type: str, **extra) -> dict:
    """One error shape: {"error": message, "error_type": code}. Under /v1/ "error" is an object as OpenAI
    clients expect ({"message", "type", "code"}); "error_type" is there in both."""
    if for_openai(request):
        return {
            "error": {"message": message, "type": error_type, "code": error_type},
            "error_type": error_type,
            **extra,
        }
    return {"error": message, "error_type": error_type, **extra}


async def hymt_error(request: Request, exc: HymtError) -> JSONResponse:
    return JSONResponse(error_body(request, exc.message, exc.error_type), status_code=exc.status, headers=exc.headers())


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    # Starlette's own: unknown paths and methods, and bodies its form parser refuses (a malformed multipart).
    kind = {400: "invalid_request", 404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(
        exc.status_code, "http_error"
    )
    # The headers it gives (Allow on a 405) are kept.
    return JSONResponse(error_body(request, str(exc.detail), kind), status_code=exc.status_code, headers=exc.headers)


def crash_body(request: Request, exc: Exception) -> dict:
    """A crash logged with its traceback under a new id, and the error body that names the id (and not the
    exception, which may say more than a client should read)."""
    error_id = uuid.uuid4().hex[:12]
    log.error("unexpected error %s on %s %s", error_id, request.method, request.url.path, exc_info=exc)
    return error_body(
        request, f"internal error (id {error_id}, see the server log)", "internal_error", error_id=error_id
    )


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(crash_body(request, exc), status_code=500)
