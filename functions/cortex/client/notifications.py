"""The SDK's notifications methods (routes under /api/v1/webhooks)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
from cortex.notifications.models import (
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookListQuery,
    WebhookPath,
    WebhookRemoved,
)


def list_webhooks(query: WebhookListQuery | None = None, /, **fields: Any) -> Op[WebhookList]:
    """GET /webhooks: The tenant's webhook endpoints (admins; secrets never listed)."""
    query = checked(WebhookListQuery, query, fields, "query")
    return Op("list_webhooks", "GET", "/webhooks", parser(WebhookList), query=query_of(query))


def add_webhook(body: WebhookCreate | None = None, /, **fields: Any) -> Op[WebhookCreated]:
    """POST /webhooks: Add the webhook endpoint of a recipient (admins)."""
    body = checked(WebhookCreate, body, fields, "body")
    return Op("add_webhook", "POST", "/webhooks", parser(WebhookCreated), body=dump(body))


def remove_webhook(id: UUID | str, /) -> Op[WebhookRemoved]:
    """DELETE /webhooks/<id>: Remove a webhook endpoint (admins)."""
    where = checked(WebhookPath, None, {"id": id}, "path")
    return Op("remove_webhook", "DELETE", f"/webhooks/{segment(where.id)}", parser(WebhookRemoved))


class Methods:
    """notifications: the Client's methods."""

    list_webhooks = method(list_webhooks)
    add_webhook = method(add_webhook)
    remove_webhook = method(remove_webhook)


class AsyncMethods:
    """notifications: the AsyncClient's methods."""

    list_webhooks = amethod(list_webhooks)
    add_webhook = amethod(add_webhook)
    remove_webhook = amethod(remove_webhook)
