"""HTTP payloads of handoffs (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import ConfigDict, Field, StringConstraints

from cortex.schemas import JSON_LIMITS, AgentName, Instant, JsonObject, Ref, Request, Response

# --- handoffs (issue 4) ------------------------------------------------------------------------

HandoffReason = Literal[
    "warm_reply",
    "escalation",
    "complex_question",
    "upsell_opportunity",
    "churn_risk",
    "completed_sequence",
    "customer_request",
    "other",
]
Urgency = Literal["low", "normal", "high", "urgent"]
HandoffStatus = Literal["pending", "accepted", "completed", "rejected"]


class HandoffCreate(Request):
    """POST /handoffs: exactly one of to_agent / to_human_id (checked in SQL, which names the field)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["to_agent"], "properties": {"to_agent": {"type": "string"}}},
                {"required": ["to_human_id"], "properties": {"to_human_id": {"type": "string"}}},
            ]
        },
    )

    contact_id: UUID
    from_agent: AgentName | None = Field(default=None, description="must be the calling agent when given")
    to_agent: AgentName | None = None
    to_human_id: Ref | None = None
    reason: HandoffReason
    reason_detail: Annotated[str, StringConstraints(max_length=2000)] | None = None
    context_summary: Annotated[str, StringConstraints(max_length=4000)] | None = Field(
        default=None, description="generated from the working context and recent interactions when absent"
    )
    suggested_action: Annotated[str, StringConstraints(max_length=1000)] | None = None
    urgency: Urgency = "normal"
    metadata: JsonObject | None = Field(default=None, description=JSON_LIMITS)


class HandoffCreated(Response):
    """The new handoff (seed 000's response)."""

    id: UUID
    contact_id: UUID
    context_summary: str
    status: HandoffStatus
    notifications_sent: list[str]
    context_refreshed: bool


class Handoff(Response):
    """A handoff with its contact."""

    id: UUID
    contact_id: UUID
    from_agent: str
    to_agent: str | None = None
    to_human_id: str | None = None
    reason: str
    urgency: str
    status: HandoffStatus
    context_summary: str | None = None


class HandoffList(Response):
    """A page of handoffs."""

    items: list[Handoff]
    limit: int


class PendingHandoffsQuery(Request):
    """GET /handoffs/pending: most urgent first, then oldest."""

    agent: AgentName | None = None
    human_id: Ref | None = None
    urgency: Urgency | None = None
    limit: int = Field(default=20, ge=1, le=100)


class HandoffListQuery(Request):
    """GET /handoffs: the monitor's stand-up view."""

    since: Instant | None = Field(default=None, description="created or changed since; without a zone it is UTC")
    status: HandoffStatus | None = None
    contact_id: UUID | None = None
    limit: int = Field(default=20, ge=1, le=100)


class HandoffPath(Request):
    """/handoffs/{id} path parameters."""

    id: UUID


class HandoffStatusChange(Request):
    """PATCH /handoffs/{id}: pending → accepted → completed, or pending/accepted → rejected."""

    # "pending" is a known status: moving back to it is an illegal move (409), not bad input.
    status: HandoffStatus
    note: Annotated[str, StringConstraints(max_length=2000)] | None = None
