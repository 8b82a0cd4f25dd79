"""The SDK's typed errors: what went wrong, with the server's code, field, hint and request id.

Every error the SDK raises is a `CortexClientError`. An answer from the server is an `APIError`
subclass chosen by status (a 422 is `InvalidRequestError`, a 429 `RateLimitError` with
`retry_after`); arguments refused before sending (the server's own pydantic models, run locally)
are `InvalidRequestError` too, with `status` 422 and no request id. A server that cannot be reached
is `APIConnectionError`; one that does not answer in time is `APITimeoutError`.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError


class CortexClientError(Exception):
    """Base of every error the SDK raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class APIConnectionError(CortexClientError):
    """The server could not be reached (refused, DNS, TLS, connection dropped)."""


class APITimeoutError(APIConnectionError):
    """The server did not answer within the client's timeout."""


class APIError(CortexClientError):
    """The server answered with an error: its status, code, message, field, hint and request id."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        hint: str | None = None,
        sqlstate: str | None = None,
        request_id: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field
        self.hint = hint
        self.sqlstate = sqlstate
        self.request_id = request_id
        self.details = details or {}

    def __str__(self) -> str:
        where = f" ({self.field})" if self.field and self.field not in self.message else ""
        hint = f"; hint: {self.hint}" if self.hint else ""
        rid = f" [request {self.request_id}]" if self.request_id else ""
        return f"{self.status} {self.code}: {self.message}{where}{hint}{rid}"


class InvalidRequestError(APIError):
    """400, 413 or 422: the request's arguments are wrong; `field` names the first one at fault."""


class AuthenticationError(APIError):
    """401: no key, an unknown or revoked key, or an expired token."""


class PermissionDeniedError(APIError):
    """403: the caller's agent may not do this (a read-only agent writing, a non-admin)."""


class NotFoundError(APIError):
    """404: no such object for this tenant (another tenant's ids are not found either)."""


class ConflictError(APIError):
    """409: the object is not in a state that allows this (an illegal status move, a duplicate)."""


class RateLimitError(APIError):
    """429: refused for now; `retry_after` is the server's Retry-After in seconds (None when absent)."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ServerError(APIError):
    """5xx: the server failed or its database is unavailable; retried for idempotent calls."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidRequestError,
    422: InvalidRequestError,
}


def retry_after_of(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (the delta-seconds form the server sends), or None."""
    value = response.headers.get("retry-after", "").strip()
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def from_response(response: httpx.Response) -> APIError:
    """The typed error for an error response, read from its JSON body `{"error": {...}}`."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        error = {"code": "http_error", "message": f"HTTP {response.status_code}: {response.text[:200]}"}
    known = ("code", "message", "field", "hint", "sqlstate", "request_id")
    kwargs: dict[str, Any] = {
        "field": error.get("field"),
        "hint": error.get("hint"),
        "sqlstate": error.get("sqlstate"),
        "request_id": error.get("request_id") or response.headers.get("x-request-id"),
        "details": {k: v for k, v in error.items() if k not in known},
    }
    status = response.status_code
    code, message = str(error.get("code", "http_error")), str(error.get("message", ""))
    if status == 429:
        return RateLimitError(status, code, message, retry_after=retry_after_of(response), **kwargs)
    cls = _BY_STATUS.get(status, ServerError if status >= 500 else APIError)
    return cls(status, code, message, **kwargs)


def from_validation(exc: ValidationError, where: str) -> InvalidRequestError:
    """Arguments the server's model refuses, caught before sending: a 422 naming the first field."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    first = errors[0] if errors else {"loc": (), "msg": str(exc)}
    field = ".".join(str(p) for p in first["loc"]) or where
    return InvalidRequestError(
        422,
        "validation_error",
        f"{field}: {first['msg']}",
        field=field,
        details={"in": where, "errors": [{"field": ".".join(map(str, e["loc"])), "message": e["msg"]} for e in errors]},
    )
