"""HTTP payloads of alerts (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from cortex.schemas import Request, Response

AlertStatus = Literal["open", "acknowledged"]
Severity = Literal["info", "warning", "critical"]


class Alert(Response):
    """Something a person should see: a parked job, a webhook dead letter, a budget refusal."""

    id: int
    kind: str = Field(examples=["job_parked", "webhook_dead_letter", "budget_exceeded"])
    severity: Severity
    message: str
    details: dict[str, Any]
    created_at: datetime
    status: AlertStatus
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None
    ack_note: str | None = None
    notified: list[str] = Field(description="recipients of the alert.raised message (empty: none sent)")


class AlertList(Response):
    """A page of alerts, newest first, and how many are open."""

    items: list[Alert]
    limit: int
    open: int


class AlertListQuery(Request):
    """GET /alerts."""

    status: AlertStatus | None = Field(default=None, description="open or acknowledged; both when absent")
    kind: Annotated[str, StringConstraints(min_length=1, max_length=100)] | None = None
    limit: int = Field(default=20, ge=1, le=100)


class AlertPath(Request):
    """/alerts/{id} path parameters."""

    id: int = Field(ge=1, le=2**63 - 1)


class AlertAck(Request):
    """POST /alerts/{id}/ack."""

    note: Annotated[str, StringConstraints(max_length=2000)] | None = None
