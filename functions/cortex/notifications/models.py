"""HTTP payloads of webhook endpoints (pydantic; the OpenAPI document is generated from them).

The patterns repeat the SQL checks of public.add_webhook (which checks again, for PostgREST callers),
so a bad URL or recipient is a 422 naming the field before a transaction opens."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated
from uuid import UUID

from pydantic import Field, StringConstraints

from cortex.schemas import Request, Response

Recipient = Annotated[
    str,
    StringConstraints(pattern=r"^(agent:[a-z][a-z0-9_-]{0,62}|human:[^\x00-\x1f\x7f]{1,200}|monitor|admin)$"),
]
WebhookUrl = Annotated[
    str,
    StringConstraints(
        max_length=2000, pattern=r"^[hH][tT][tT][pP][sS]?://[^/?#\s@\x00-\x1f\x7f]+([/?#][^\s\x00-\x1f\x7f]*)?$"
    ),
]
Secret = Annotated[str, StringConstraints(min_length=16, max_length=200, pattern=r"^[^\s\x00-\x1f\x7f]+$")]


class WebhookCreate(Request):
    """POST /webhooks: where a recipient's notifications go."""

    recipient: Recipient = Field(description="agent:<name>, human:<id>, monitor or admin", examples=["monitor"])
    url: WebhookUrl = Field(
        description="http:// or https://, with a host", examples=["https://hooks.example.com/cortex"]
    )
    secret: Secret | None = Field(default=None, description="HMAC-SHA256 signing key; generated when absent")
    enabled: bool = True


class Webhook(Response):
    """A webhook endpoint (its secret is never listed)."""

    id: UUID
    recipient: str
    url: str
    enabled: bool
    created_at: datetime
    updated_at: datetime


class WebhookCreated(Webhook):
    """The new endpoint with its signing secret: the only time the secret is shown."""

    secret: str


class WebhookList(Response):
    """The tenant's webhook endpoints, by recipient."""

    items: list[Webhook]


class WebhookListQuery(Request):
    """GET /webhooks."""

    recipient: Recipient | None = None


class WebhookPath(Request):
    """/webhooks/{id} path parameters."""

    id: UUID


class WebhookRemoved(Response):
    """DELETE /webhooks/{id}."""

    id: UUID
    recipient: str
    removed: bool
