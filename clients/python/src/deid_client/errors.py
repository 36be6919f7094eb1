"""Exceptions of the client.

Every error answer of the API has the shape ``{"error": {"code", "message", "details"}}``
(``openapi.yaml``, schema ``Error``); it becomes an :class:`ApiError` (a subclass chosen by the
HTTP status) carrying ``code``, ``message``, ``details`` and ``field`` (``details.field``, the
path of the offending field, e.g. ``privacy[0].k`` or ``intervals[1]``).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import httpx

__all__ = [
    "DeidError",
    "ApiError",
    "BadRequestError",
    "UnauthorizedError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "ValidationError",
    "RateLimitedError",
    "ServerError",
    "ServiceUnavailableError",
    "DeidConnectionError",
    "DeidTimeoutError",
    "JobFailedError",
    "WaitTimeoutError",
]


class DeidError(Exception):
    """Base class of every exception raised by the client."""


class ApiError(DeidError):
    """The service answered with an error status.

    ``code`` is the API's error code (``ErrorCode`` in ``openapi.yaml``, e.g. ``invalid_spec``),
    ``message`` its human-readable message, ``details`` the structured details and ``field``
    ``details["field"]`` when present. ``retry_after`` is the ``Retry-After`` header in seconds
    (429, 503), ``status`` the HTTP status.
    """

    status: int
    code: str
    message: str
    details: dict[str, Any]
    retry_after: float | None

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = dict(details or {})
        self.retry_after = retry_after
        self.method = method
        self.url = url
        where = f" ({method} {url})" if method and url else ""
        super().__init__(f"{status} {code}: {message}{where}")

    @property
    def field(self) -> str | None:
        """``details.field``: the path of the offending field, if the API named one."""
        value = self.details.get("field")
        return value if isinstance(value, str) else None


class BadRequestError(ApiError):
    """400: malformed JSON, query parameters or request."""


class UnauthorizedError(ApiError):
    """401: no or a wrong API key."""


class NotFoundError(ApiError):
    """404: no such dataset, job, column, hierarchy or route (or another tenant's)."""


class ConflictError(ApiError):
    """409: dataset in use, job finished, result not available yet."""


class PayloadTooLargeError(ApiError):
    """413: an upload or body beyond the service's limits."""


class ValidationError(ApiError):
    """422: invalid CSV, hierarchy or specification; ``field`` names the offending field."""


class RateLimitedError(ApiError):
    """429: the job queue is full; ``retry_after`` says when to try again."""


class ServerError(ApiError):
    """5xx: an internal error of the service."""


class ServiceUnavailableError(ServerError):
    """503: the service did not answer in time or is not ready."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    503: ServiceUnavailableError,
}


class DeidConnectionError(DeidError):
    """The service could not be reached (after the retries of an idempotent call)."""


class DeidTimeoutError(DeidError):
    """A request took longer than the client's timeout."""


class JobFailedError(DeidError):
    """A job ended as ``failed`` (raised by ``wait(..., raise_on_failure=True)``).

    Carries the job's ``error`` (same shape and codes as API errors): ``code``, ``message``,
    ``details``, ``field``, and the final ``job``.
    """

    def __init__(self, job: Any) -> None:
        self.job = job
        err = job.error
        self.code: str = err.code if err else "unknown"
        self.message: str = err.message if err else "the job failed"
        self.details: dict[str, Any] = dict(err.details) if err else {}
        super().__init__(f"job {job.id} {job.status}: {self.code}: {self.message}")

    @property
    def field(self) -> str | None:
        value = self.details.get("field")
        return value if isinstance(value, str) else None


class WaitTimeoutError(DeidError):
    """``wait()`` gave up before the job ended; ``job`` is its last known state."""

    def __init__(self, job: Any, timeout: float) -> None:
        self.job = job
        super().__init__(f"job {job.id} still {job.status} after {timeout:g} s")


def retry_after_seconds(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (delta-seconds or an HTTP date), if any."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    from datetime import datetime, timezone

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def error_from_response(response: httpx.Response, body: bytes | None = None) -> ApiError:
    """The exception for an error answer (its body must have been read, or be given)."""
    raw = body if body is not None else response.content
    code = f"http_{response.status_code}"
    message = response.reason_phrase or "error"
    details: dict[str, Any] = {}
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        err = parsed["error"]
        code = str(err.get("code", code))
        message = str(err.get("message", message))
        if isinstance(err.get("details"), dict):
            details = err["details"]
    elif raw:
        message = raw[:500].decode("utf-8", "replace")
    status = response.status_code
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    try:
        request: httpx.Request | None = response.request
    except RuntimeError:
        request = None
    return cls(
        status,
        code,
        message,
        details,
        retry_after=retry_after_seconds(response),
        method=request.method if request else None,
        url=str(request.url) if request else None,
    )
