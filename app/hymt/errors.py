"""Error types: each carries the HTTP status and the stable `error_type` code that clients see."""

from __future__ import annotations


class HymtError(Exception):
    """An expected failure with a message fit to show a user. The API turns it into JSON, the CLI into one line."""

    status = 500
    error_type = "internal_error"
    exit_code = 1
    retry_after_s: int | None = None  # sent as Retry-After when set: when trying again makes sense

    def __init__(self, message: str, *, error_type: str | None = None, status: int | None = None):
        super().__init__(message)
        self.message = message
        if error_type is not None:
            self.error_type = error_type
        if status is not None:
            self.status = status

    def headers(self) -> dict[str, str]:
        """HTTP headers that go with the error."""
        return {"Retry-After": str(self.retry_after_s)} if self.retry_after_s is not None else {}


class BadRequest(HymtError):
    status = 400
    error_type = "invalid_request"
    exit_code = 2


class PayloadTooLarge(HymtError):
    status = 413
    error_type = "too_large"
    exit_code = 2


class UnsupportedFormat(HymtError):
    status = 415
    error_type = "unsupported_format"
    exit_code = 2


class UnsupportedMediaType(HymtError):
    status = 415
    error_type = "unsupported_media_type"


class Unauthorized(HymtError):
    """No API key where one is required."""

    status = 401
    error_type = "invalid_api_key"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class Forbidden(HymtError):
    """A wrong API key (403, as LibreTranslate answers)."""

    status = 403
    error_type = "invalid_api_key"


class QuotaExceeded(HymtError):
    """A key that has used its month's characters (HYMT_CHARACTER_LIMIT): DeepL's 456."""

    status = 456
    error_type = "quota_exceeded"


class RetryLater(HymtError):
    """Refused for now, not for what the request is: the answer carries Retry-After."""

    default_retry_after_s = 5

    def __init__(self, message: str, retry_after_s: int | None = None, *, error_type: str | None = None):
        super().__init__(message, error_type=error_type)
        self.retry_after_s = max(1, self.default_retry_after_s if retry_after_s is None else retry_after_s)


class Overloaded(RetryLater):
    """The queue is full, its expected wait too long, or a rate limit reached: refused at once, not left waiting."""

    status = 429
    error_type = "overloaded"
    default_retry_after_s = 2


class NotReady(RetryLater):
    """Loading, stopped or draining: another replica, or this one a little later, can answer."""

    status = 503
    error_type = "not_ready"


class StoreUnavailable(NotReady):
    """The database (HYMT_DATABASE_URL) cannot be reached: what needs it waits; text translation goes on."""

    error_type = "store_unavailable"


class Cancelled(HymtError):
    status = 499
    error_type = "cancelled"


class ModelLoadError(HymtError):
    """The checkpoint is missing, unreadable, of another architecture, or cannot be fetched."""

    error_type = "model_load_failed"


class GenerationError(HymtError):
    """A segment could not be translated, even alone (out of memory at batch size one, or a runtime failure)."""

    error_type = "generation_failed"


class ConfigError(HymtError):
    """A setting in the environment or on the command line is not valid."""

    error_type = "invalid_setting"
    exit_code = 2
