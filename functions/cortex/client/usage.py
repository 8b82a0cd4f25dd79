"""The SDK's usage methods (routes under /api/v1/usage/summary)."""

from __future__ import annotations

from typing import Any

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
from cortex.usage.models import (
    BudgetCheck,
    BudgetCheckPath,
    BudgetCheckQuery,
    UsageRecord,
    UsageRecorded,
    UsageSummary,
    UsageSummaryQuery,
)


def usage_summary(query: UsageSummaryQuery | None = None, /, **fields: Any) -> Op[UsageSummary]:
    """GET /usage/summary: Token usage of the day, week or month (tenant time zone), by agent and model,
    with budget status."""
    query = checked(UsageSummaryQuery, query, fields, "query")
    return Op("usage_summary", "GET", "/usage/summary", parser(UsageSummary), query=query_of(query))


def budget_check(agent: str, query: BudgetCheckQuery | None = None, /, **fields: Any) -> Op[BudgetCheck]:
    """GET /usage/budget-check/<agent>: Check an agent's daily budget before an operation."""
    where = checked(BudgetCheckPath, None, {"agent": agent}, "path")
    query = checked(BudgetCheckQuery, query, fields, "query")
    return Op(
        "budget_check", "GET", f"/usage/budget-check/{segment(where.agent)}", parser(BudgetCheck), query=query_of(query)
    )


def record_usage(body: UsageRecord | None = None, /, **fields: Any) -> Op[UsageRecorded]:
    """POST /usage: Record a model call against the agent's daily budget."""
    body = checked(UsageRecord, body, fields, "body")
    return Op("record_usage", "POST", "/usage", parser(UsageRecorded), body=dump(body))


class Methods:
    """usage: the Client's methods."""

    usage_summary = method(usage_summary)
    budget_check = method(budget_check)
    record_usage = method(record_usage)


class AsyncMethods:
    """usage: the AsyncClient's methods."""

    usage_summary = amethod(usage_summary)
    budget_check = amethod(budget_check)
    record_usage = amethod(record_usage)
