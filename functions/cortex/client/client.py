"""`Client` and `AsyncClient`: one typed method per API route, gathered from the capability modules.

A new capability adds its module beside these (its op builders and `Methods` / `AsyncMethods`)
and one base class on each client below.
"""

from __future__ import annotations

from cortex.client import (
    alerts,
    briefings,
    consolidation,
    contacts,
    context,
    customers,
    graph,
    handoffs,
    health,
    ingest,
    interactions,
    memories,
    notifications,
    tenancy,
    usage,
    voice,
)
from cortex.client._core import AsyncTransport, SyncTransport


class Client(
    SyncTransport,
    contacts.Methods,
    interactions.Methods,
    context.Methods,
    handoffs.Methods,
    usage.Methods,
    alerts.Methods,
    notifications.Methods,
    graph.Methods,
    memories.Methods,
    briefings.Methods,
    ingest.Methods,
    voice.Methods,
    consolidation.Methods,
    customers.Methods,
    tenancy.Methods,
    health.Methods,
):
    """The synchronous Cortex client: `Client(base_url=..., api_key=...)` (defaults: CORTEX_URL,
    CORTEX_API_KEY). Methods are named after the SQL functions and return the server's own
    pydantic response models; errors are `cortex.client.errors` types. Use it as a context
    manager, or call `close()`."""


class AsyncClient(
    AsyncTransport,
    contacts.AsyncMethods,
    interactions.AsyncMethods,
    context.AsyncMethods,
    handoffs.AsyncMethods,
    usage.AsyncMethods,
    alerts.AsyncMethods,
    notifications.AsyncMethods,
    graph.AsyncMethods,
    memories.AsyncMethods,
    briefings.AsyncMethods,
    ingest.AsyncMethods,
    voice.AsyncMethods,
    consolidation.AsyncMethods,
    customers.AsyncMethods,
    tenancy.AsyncMethods,
    health.AsyncMethods,
):
    """The asynchronous Cortex client: the same methods as `Client`, awaited. Use it as an async
    context manager, or call `aclose()`."""
