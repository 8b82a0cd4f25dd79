"""HTTP payloads of context (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import ConfigDict, Field

from cortex.contacts.models import Stage
from cortex.interactions.models import InteractionType
from cortex.llm.results import Sentiment
from cortex.schemas import Request, Response

# --- context ------------------------------------------------------------------------------------


class ContextQuery(Request):
    """GET /context/{contact_id} query parameters."""

    level: int = Field(
        default=1,
        ge=0,
        le=3,
        description=(
            "0 header (~50 tokens), 1 + working context (~300), 2 + recent interactions (~800), "
            "3 + full history up to the agent's max_input_tokens."
        ),
    )
    refresh: bool = Field(default=False, description="Regenerate the context before answering.")


class ContextPath(Request):
    """Path parameters of /context/{contact_id}."""

    contact_id: UUID


class ContextHeader(Response):
    """Who the contact is; fields are dropped last-first when the budget is tight."""

    name: str | None = None
    company: str | None = None
    email: str | None = None
    stage: Stage | None = None
    last_touch: datetime | None = None
    last_touch_agent: str | None = None


class ContextSignals(Response):
    """Risk and opportunity scores (0-1) with their reasons."""

    churn_risk: float | None = None
    upsell_potential: float | None = None
    risk_factors: list[str] = Field(default_factory=list)
    opportunity_factors: list[str] = Field(default_factory=list)


class ContextBody(Response):
    """The working-context briefing (level 1 and up)."""

    summary: str | None = None
    key_facts: list[str] = Field(default_factory=list)
    current_status: str | None = None
    recommended_tone: str | None = None
    open_threads: list[dict[str, Any]] = Field(default_factory=list)
    signals: ContextSignals | None = None


class LastHandoff(Response):
    """The most recent handoff of the contact."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_agent: str | None = Field(default=None, alias="from")
    to: str | None = None
    reason: str | None = None
    date: datetime | None = None


class RecentInteraction(Response):
    """One line of a contact's recent history (level 2 and up)."""

    id: UUID
    agent: str
    type: InteractionType
    summary: str | None = None
    sentiment: Sentiment | None = None
    date: datetime


class WorkingContext(Response):
    """GET /context/{contact_id} response; token_count never exceeds token_budget."""

    contact_id: UUID
    level: int
    token_count: int
    token_budget: int
    header: ContextHeader
    context: ContextBody | None = None
    last_handoff: LastHandoff | None = None
    recent_interactions: list[RecentInteraction] | None = None
    generated_at: datetime | None
    is_stale: bool
    truncated: bool
    refresh_queued: bool
    interactions_total: int | None = None


class ContextRefresh(Response):
    """POST /context/{contact_id}/refresh response (202 with queued=true when generation failed)."""

    contact_id: UUID
    regenerated: bool
    previous_generated_at: datetime | None = None
    new_generated_at: datetime | None = None
    token_count: int | None = None
    queued: bool | None = None
    error: str | None = None
