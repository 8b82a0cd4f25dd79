"""The SDK's alerts methods (routes under /api/v1/alerts)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.alerts.models import Alert, AlertAck, AlertList, AlertListQuery, AlertPath
from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment


def list_alerts(query: AlertListQuery | None = None, /, **fields: Any) -> Op[AlertList]:
    """GET /alerts: Alerts (parked jobs, dead letters, budget refusals), newest first."""
    query = checked(AlertListQuery, query, fields, "query")
    return Op("list_alerts", "GET", "/alerts", parser(AlertList), query=query_of(query))


def ack_alert(id: UUID | str, body: AlertAck | None = None, /, **fields: Any) -> Op[Alert]:
    """POST /alerts/<id>/ack: Acknowledge an alert (monitors and admins)."""
    where = checked(AlertPath, None, {"id": id}, "path")
    body = checked(AlertAck, body, fields, "body")
    return Op("ack_alert", "POST", f"/alerts/{segment(where.id)}/ack", parser(Alert), body=dump(body))


class Methods:
    """alerts: the Client's methods."""

    list_alerts = method(list_alerts)
    ack_alert = method(ack_alert)


class AsyncMethods:
    """alerts: the AsyncClient's methods."""

    list_alerts = amethod(list_alerts)
    ack_alert = amethod(ack_alert)
