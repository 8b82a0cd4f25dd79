"""HTTP routes of token usage and budgets: `/api/v1/usage`."""

from __future__ import annotations

from cortex import db
from cortex.routing import Call, Reply, Router
from cortex.usage.models import (
    BudgetCheck,
    BudgetCheckPath,
    BudgetCheckQuery,
    UsageRecord,
    UsageRecorded,
    UsageSummary,
    UsageSummaryQuery,
)
from cortex.usage.service import raise_if_refused

router = Router("usage")


@router.route(
    "GET", "/summary", name="usage_summary",
    summary="Token usage of the day, week or month (tenant time zone), by agent and model, with budget status",
    responses={200: UsageSummary}, query=UsageSummaryQuery,
)  # fmt: skip
async def usage_summary(call: Call) -> Reply:
    """Usage of the current day, week or month."""
    query = call.query_as(UsageSummaryQuery)
    return Reply(200, await db.acall_as(call.claims, "usage_summary", period=query.period, agent=query.agent))


@router.route(
    "GET", "/budget-check/<agent>", name="budget_check", summary="Check an agent's daily budget before an operation",
    responses={200: BudgetCheck}, query=BudgetCheckQuery, path_params=BudgetCheckPath,
    description="Recommendation after the estimated operation: <=80% proceed, <=95% use_haiku, "
    "<=100% defer, over the budget alert_human (within_budget false).",
)  # fmt: skip
async def budget_check(call: Call) -> Reply:
    """Whether an operation fits the agent's daily budget."""
    agent = call.path_as(BudgetCheckPath).agent
    estimated = call.query_as(BudgetCheckQuery).estimated_tokens
    return Reply(200, await db.acall_as(call.claims, "budget_check", agent=agent, estimated_tokens=estimated))


@router.route(
    "POST", "", name="record_usage", summary="Record a model call against the agent's daily budget",
    responses={201: UsageRecorded}, body=UsageRecord, errors=(404, 429),
    description="Over the daily budget the call is refused with 429 and Retry-After (seconds to the "
    "tenant's midnight); the refusal is recorded (budget_exceeded=true) and the monitor notified.",
)  # fmt: skip
async def record_usage(call: Call) -> Reply:
    """Records a model call; 429 when refused (the refusal itself is committed first)."""
    body = call.body_as(UsageRecord).model_dump(mode="json", exclude_none=True)
    return Reply(201, raise_if_refused(await db.acall_as(call.claims, "record_usage", **body)))
