"""HTTP payloads of usage (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, StringConstraints

from cortex.schemas import AgentName, Request, Response

# --- usage and budgets (issue 4) ---------------------------------------------------------------


class UsageSummaryQuery(Request):
    """GET /usage/summary query parameters."""

    period: Literal["day", "week", "month"] = Field(default="day", description="in the tenant's time zone")
    agent: AgentName | None = None


class UsageSummary(Response):
    """Token usage of a period: totals, by agent, by model, and today's budget status (seed 000)."""

    period: str
    start: str
    end: str
    time_zone: str | None = None
    totals: dict[str, Any]
    by_agent: dict[str, Any]
    by_model: dict[str, Any]
    budget_status: dict[str, Any]


class BudgetCheckPath(Request):
    """GET /usage/budget-check/{agent} path parameters."""

    agent: AgentName


class BudgetCheckQuery(Request):
    """GET /usage/budget-check/{agent} query parameters."""

    estimated_tokens: int = Field(default=0, ge=0, le=100_000_000)


class BudgetCheck(Response):
    """Whether an operation fits today's budget: ≤80 % after it proceed, ≤95 % use_haiku, ≤100 % defer,
    over 100 % alert_human (within_budget false)."""

    agent: str
    daily_budget: int
    used_today: int
    remaining: int
    estimated_tokens: int
    within_budget: bool
    recommendation: Literal["proceed", "use_haiku", "defer", "alert_human"]
    budget_percentage_used: float
    retry_after_seconds: int | None = None


class UsageRecord(Request):
    """POST /usage: a model call an agent made itself, checked against its daily budget."""

    model: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    operation: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    input_tokens: int = Field(ge=0, le=100_000_000)
    output_tokens: int = Field(ge=0, le=100_000_000)
    contact_id: UUID | None = None
    interaction_id: UUID | None = None
    agent: AgentName | None = None


class UsageRecorded(Response):
    """The recorded call with its cost and the budget after it."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    refused: bool
