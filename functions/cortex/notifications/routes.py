"""HTTP routes of the notifications capability: webhook endpoints under `/api/v1/webhooks` (admins)."""

from __future__ import annotations

from cortex import db
from cortex.notifications.models import (
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookListQuery,
    WebhookPath,
    WebhookRemoved,
)
from cortex.routing import Call, Reply, Router

router = Router("webhooks")


@router.route(
    "GET", "", name="list_webhooks", summary="The tenant's webhook endpoints (admins; secrets never listed)",
    responses={200: WebhookList}, query=WebhookListQuery, errors=(403,),
)  # fmt: skip
async def list_webhooks(call: Call) -> Reply:
    """The endpoints, by recipient."""
    query = call.query_as(WebhookListQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_webhooks", **query))


@router.route(
    "POST", "", name="add_webhook", summary="Add the webhook endpoint of a recipient (admins)",
    responses={201: WebhookCreated}, body=WebhookCreate, errors=(409,),
    description="recipient is agent:<name>, human:<id>, monitor or admin; url is http(s). The signing "
    "secret (generated when absent) is in this response only: it is never listed again.",
)  # fmt: skip
async def add_webhook(call: Call) -> Reply:
    """Adds an endpoint; SQL checks the caller is an admin and validates again."""
    body = call.body_as(WebhookCreate).model_dump(mode="json", exclude_none=True)
    return Reply(201, await db.acall_as(call.claims, "add_webhook", **body))


@router.route(
    "DELETE", "/<id>", name="remove_webhook", summary="Remove a webhook endpoint (admins)",
    responses={200: WebhookRemoved}, path_params=WebhookPath, errors=(404,),
)  # fmt: skip
async def remove_webhook(call: Call) -> Reply:
    """Removes an endpoint by id."""
    webhook_id = str(call.path_as(WebhookPath).id)
    return Reply(200, await db.acall_as(call.claims, "remove_webhook", webhook_id=webhook_id))
