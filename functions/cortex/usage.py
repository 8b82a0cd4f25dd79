"""Token usage and daily budgets: thin calls to the SQL functions of the same names.

The rules (rollup, thresholds, the per-agent lock that serialises spenders) live in
supabase/migrations/20261122001000_usage_budgets.sql. Recommendation thresholds, on the share of the
daily budget used once the operation is counted: <= 80 % proceed, <= 95 % use_haiku,
<= 100 % defer, above 100 % alert_human (refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from cortex import db
from cortex.errors import CortexError, from_db_error

Claims = Mapping[str, Any]

__all__ = ["BudgetExceeded", "budget_check", "enforce_budget", "record_usage", "usage_summary"]


class BudgetExceeded(CortexError):
    """429: the operation would exceed the agent's daily budget (the refusal is already recorded).

    `retry_after_seconds` (seconds to the tenant's midnight) is for the Retry-After header;
    `refusal` is the whole budget check the database returned.
    """

    def __init__(self, refusal: Mapping[str, Any]) -> None:
        self.refusal: dict[str, Any] = dict(refusal)
        self.retry_after_seconds = int(refusal.get("retry_after_seconds") or 1)
        self.recommendation = str(refusal.get("recommendation") or "alert_human")
        agent = refusal.get("agent")
        super().__init__(
            429,
            "budget_exceeded",
            f"agent {agent} has {refusal.get('remaining')} of its {refusal.get('daily_budget')} daily tokens "
            f"left; this operation needs {refusal.get('total_tokens', refusal.get('estimated_tokens'))}",
            field=None,
            hint=f"the budget resets at {refusal.get('resets_at')}",
            sqlstate=None,
            details={
                "agent": agent,
                "recommendation": self.recommendation,
                "retry_after_seconds": self.retry_after_seconds,
                "daily_budget": refusal.get("daily_budget"),
                "used_today": refusal.get("used_today"),
                "remaining": refusal.get("remaining"),
                "resets_at": refusal.get("resets_at"),
            },
        )


def record_usage(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Records a model call of the calling agent (model, operation, input_tokens, output_tokens,
    contact_id, interaction_id, agent) against its daily budget; returns the recorded usage with
    the budget after it. Raises BudgetExceeded (429) when refused, after the refusal row and the
    monitor's notification are committed."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "record_usage", **fields)
    # Raised outside the transaction: the refusal must survive as evidence (budget_exceeded = true).
    if result.get("refused"):
        raise BudgetExceeded(result)
    return result


def usage_summary(claims: Claims, period: str | None = None, agent: str | None = None) -> dict[str, Any]:
    """Usage of the current day, week or month in the tenant's time zone (seed 000 shape)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "usage_summary", period=period, agent=agent)
    return result


def budget_check(claims: Claims, agent: str | None = None, estimated_tokens: int | None = None) -> dict[str, Any]:
    """Whether an operation of estimated_tokens fits the agent's daily budget, and a recommendation
    (proceed / use_haiku / defer / alert_human)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "budget_check", agent=agent, estimated_tokens=estimated_tokens)
    return result


def enforce_budget(
    claims: Claims,
    estimated_tokens: int,
    *,
    agent: str | None = None,
    model: str | None = None,
    operation: str | None = None,
) -> dict[str, Any]:
    """Pre-flight gate before Cortex's own model work for an agent (default: the caller).

    Returns the budget check when the estimate fits; otherwise commits a refusal row, notifies the
    monitor and raises BudgetExceeded. It reserves nothing: record the actual call afterwards.
    """
    with db.as_caller(claims) as conn:
        try:
            with conn.cursor(row_factory=tuple_row) as cur:
                cur.execute(
                    "select cortex.enforce_budget(cortex.require_tenant(),"
                    " coalesce(%s, cortex.current_agent()), %s, %s, %s)",
                    (agent, estimated_tokens, model, operation),
                )
                row = cur.fetchone()
        except psycopg.Error as exc:
            raise from_db_error(exc) from exc
    result: dict[str, Any] = row[0] if row else {}
    if result.get("refused"):
        raise BudgetExceeded(result)
    return result
