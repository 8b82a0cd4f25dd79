"""The Python SDK of Cortex: `from cortex.client import Client`.

    with Client(base_url="http://127.0.0.1:8080", api_key="ctx_...") as cortex:
        context = cortex.get_context(contact_id, level=1)

Typed with the server's own pydantic models (request arguments are checked by them before
sending; answers are parsed into them). See docs/sdk.md.
"""

from cortex.client.client import AsyncClient, Client
from cortex.client.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    ConflictError,
    CortexClientError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
)

__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "Client",
    "ConflictError",
    "CortexClientError",
    "InvalidRequestError",
    "NotFoundError",
    "PermissionDeniedError",
    "RateLimitError",
    "ServerError",
]
