"""Small helpers for tests that drive the HTTP API with Flask's test client."""

from __future__ import annotations

from typing import Any

from werkzeug.test import TestResponse

from cortex.models import ErrorResponse


def bearer(token: str) -> dict[str, str]:
    """The Authorization header for a key or token."""
    return {"Authorization": f"Bearer {token}"}


def body_of(response: TestResponse) -> Any:
    """The JSON body of a response, after checking it is JSON."""
    assert response.mimetype == "application/json", response.data
    return response.get_json()


def error_of(response: TestResponse) -> dict[str, Any]:
    """The error object of an error response, after checking it has the documented shape."""
    body = body_of(response)
    ErrorResponse.model_validate(body)
    error: dict[str, Any] = body["error"]
    return error
