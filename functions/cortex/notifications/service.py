"""Webhook endpoints: thin calls to the SQL functions of the same names (all rules live there:
admins only, validation, tenancy; see supabase/migrations/20261122001650_notifications_webhooks.sql).
Delivery itself is `cortex.notifications.delivery`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cortex import db

Claims = Mapping[str, Any]


def add_webhook(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Adds a recipient's endpoint (recipient, url, secret, enabled); returns it with its secret,
    the only time it is shown. CortexError 403 for non-admins, 422 naming the field, 409 when the
    recipient has one."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "add_webhook", **fields)
    return result


def list_webhooks(claims: Claims, recipient: str | None = None) -> dict[str, Any]:
    """The tenant's endpoints, without secrets; {items}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "list_webhooks", recipient=recipient)
    return result


def remove_webhook(claims: Claims, webhook_id: str) -> dict[str, Any]:
    """Removes an endpoint by id; CortexError 404 when unknown to the tenant."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "remove_webhook", webhook_id=webhook_id)
    return result
