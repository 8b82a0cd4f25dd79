"""HTTP routes of alerts: `/api/v1/alerts`."""

from __future__ import annotations

from cortex import db
from cortex.alerts.models import Alert, AlertAck, AlertList, AlertListQuery, AlertPath
from cortex.routing import Call, Reply, Router

router = Router("alerts")


@router.route(
    "GET", "", name="list_alerts", summary="Alerts (parked jobs, dead letters, budget refusals), newest first",
    responses={200: AlertList}, query=AlertListQuery,
    description="Any agent of the tenant. Each alert was also sent to the monitor and the admin as an "
    "alert.raised notification when it was raised.",
)  # fmt: skip
async def list_alerts(call: Call) -> Reply:
    """The tenant's alerts."""
    query = call.query_as(AlertListQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_alerts", **query))


@router.route(
    "POST", "/<id>/ack", name="ack_alert", summary="Acknowledge an alert (monitors and admins)",
    responses={200: Alert}, path_params=AlertPath, body=AlertAck, errors=(404,),
    description="Records who acknowledged it, when, and an optional note. Acknowledging again "
    "returns the first acknowledgement.",
)  # fmt: skip
async def ack_alert(call: Call) -> Reply:
    """Acknowledges an alert (SQL decides who may)."""
    body = call.body_as(AlertAck)
    alert_id = call.path_as(AlertPath).id
    return Reply(200, await db.acall_as(call.claims, "ack_alert", alert_id=alert_id, note=body.note))
