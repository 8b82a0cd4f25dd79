"""Alerts: thin calls to the SQL functions of the same names (all rules live there).

Alerts are written by the database itself (a parked job, a webhook dead letter, a budget refusal),
each with an `alert.raised` outbox message to the monitor and the admin in the same transaction;
see supabase/migrations/20261122001600_alerts.sql.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cortex import db

Claims = Mapping[str, Any]


def list_alerts(claims: Claims, **filters: Any) -> dict[str, Any]:
    """The tenant's alerts, newest first (filters: status, kind, limit); {items, limit, open}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "list_alerts", **filters)
    return result


def ack_alert(claims: Claims, alert_id: int, note: str | None = None) -> dict[str, Any]:
    """Acknowledges an alert (monitors and admins only: CortexError 403 otherwise, 404 when unknown);
    acknowledging again returns the first acknowledgement."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "ack_alert", alert_id=alert_id, note=note)
    return result
