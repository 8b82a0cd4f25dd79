"""Small helpers for tests that drive the HTTP API with Starlette's test client."""

from __future__ import annotations

from typing import Any

from httpx import Response as HttpResponse

from cortex.schemas import ErrorResponse


def bearer(token: str) -> dict[str, str]:
    """The Authorization header for a key or token."""
    return {"Authorization": f"Bearer {token}"}


def body_of(response: HttpResponse) -> Any:
    """The JSON body of a response, after checking it is JSON."""
    assert response.headers["content-type"].split(";")[0] == "application/json", response.content
    return response.json()


def error_of(response: HttpResponse) -> dict[str, Any]:
    """The error object of an error response, after checking it has the documented shape."""
    body = body_of(response)
    ErrorResponse.model_validate(body)
    error: dict[str, Any] = body["error"]
    return error
