"""Budgets for Cortex's own model calls: reserve before the call, settle after.

Every model call Cortex makes on its own account (interaction summaries on the HTTP and the worker
path, handoff briefings, context generation) goes through here:

    plan = budget.reserve(conn, tenant_id, agent, "summarize", budget.estimate(prompt), can_defer=True)
    ... if plan.action == "defer": queue the work for plan.run_at (nothing was reserved)
    analysis, usage = llm.summarise_interaction(..., **plan.llm_args())
    ... in the write's transaction: the write (which records usage), then budget.settle(conn, plan, usage)

The rules live in SQL (supabase/migrations/20261122001900_usage_reservations.sql): the estimate
(input + the agent's max_output_tokens) is reserved under the per (tenant, agent, day) lock, so
concurrent calls cannot overshoot the budget together; the action follows the recommendation
(proceed, use_haiku, defer, local). This module only resolves model aliases to model ids: the
agent's `default_model` / `complex_task_model` ('haiku', 'sonnet' or a model id), with the
settings as fallbacks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg

from cortex import db
from cortex.config import Settings, get_settings
from cortex.llm import Usage

Action = Literal["proceed", "use_haiku", "defer", "local"]

__all__ = ["Action", "Plan", "estimate", "failed_usage", "reserve", "resolve_model", "settle"]


def estimate(text: str) -> int:
    """Tokens of a prompt, estimated as everywhere in Cortex: ceil(chars / 4)."""
    return math.ceil(len(text) / 4) if text else 0


def resolve_model(alias: str | None, *, complex_work: bool = False, settings: Settings | None = None) -> str:
    """A model id for an agent_config model name: 'haiku' is the summary model setting, 'sonnet'
    the complex model setting, anything else is taken as a model id; None (no config) falls back
    to the complex model setting for complex work, else the summary model setting."""
    settings = settings or get_settings()
    name = (alias or "").strip()
    if not name:
        return settings.complex_model if complex_work else settings.summary_model
    lowered = name.lower()
    if lowered == "haiku":
        return settings.summary_model
    if lowered == "sonnet":
        return settings.complex_model
    return name


@dataclass(frozen=True)
class Plan:
    """What the budget decided for one model call (the answer of cortex.reserve_tokens)."""

    tenant_id: str
    reservation_id: str | None
    agent: str
    operation: str
    action: Action
    recommendation: str
    model: str | None  # the model id to ask (None: local or deferred)
    max_tokens: int
    run_at: str | None  # defer: the tenant's next midnight (ISO-8601 with offset)
    budget: Mapping[str, Any]

    @property
    def deferred(self) -> bool:
        return self.action == "defer"

    @property
    def local(self) -> bool:
        """Over budget: the local generator stands in, and its result is marked as such."""
        return self.action == "local"

    def llm_args(self) -> dict[str, Any]:
        """Keyword arguments for the `cortex.llm` operations."""
        return {"model": self.model, "max_tokens": self.max_tokens, "local": self.local}

    def run_at_datetime(self) -> datetime | None:
        return datetime.fromisoformat(self.run_at.replace("Z", "+00:00")) if self.run_at else None


def reserve(
    conn: psycopg.Connection[Any],
    tenant_id: str,
    agent: str | None,
    operation: str,
    input_tokens: int,
    *,
    complex_work: bool = False,
    can_defer: bool = False,
    contact_id: str | None = None,
    settings: Settings | None = None,
) -> Plan:
    """Reserves the estimate of one model call (input_tokens + the agent's max_output_tokens)
    and returns what to do. Commit promptly: the budget lock is held until the transaction ends."""
    answer: dict[str, Any] = db.call(
        conn,
        "cortex.reserve_tokens",
        p_tenant_id=tenant_id,
        p_agent=db.typed(agent, "text"),
        p_operation=operation,
        p_input_tokens=input_tokens,
        p_complex=complex_work,
        p_can_defer=can_defer,
        p_contact_id=contact_id,
    )
    action: Action = answer["action"]
    model = None
    if action in ("proceed", "use_haiku"):
        model = resolve_model(answer.get("model"), complex_work=complex_work and action == "proceed", settings=settings)
    return Plan(
        tenant_id=str(tenant_id),
        reservation_id=answer.get("reservation_id"),
        agent=str(answer["agent"]),
        operation=operation,
        action=action,
        recommendation=str(answer.get("recommendation")),
        model=model,
        max_tokens=int(answer["max_output_tokens"]),
        run_at=answer.get("run_at"),
        budget=answer.get("budget") or {},
    )


def failed_usage(plan: Plan, error: BaseException, usage: Usage | None = None) -> dict[str, Any]:
    """The usage to record for a call that failed: what the API reported (an off-schema answer
    still cost its tokens), else zero tokens; the error text goes with it."""
    reported = usage or getattr(error, "usage", None)
    body = (
        asdict(reported)
        if reported is not None
        else {"model": plan.model or "unknown", "input_tokens": 0, "output_tokens": 0, "operation": plan.operation}
    )
    return {**body, "error": str(error)[:500]}


def settle(
    conn: psycopg.Connection[Any],
    plan: Plan,
    usage: Usage | Mapping[str, Any] | None,
    *,
    contact_id: str | None = None,
    interaction_id: str | None = None,
) -> dict[str, Any]:
    """Releases the plan's reservation in the transaction that records the call: call it after
    the write (which recorded the usage: that row is marked), or alone with the usage of a call
    that no write records (a failed call)."""
    body = asdict(usage) if isinstance(usage, Usage) else dict(usage) if usage is not None else None
    if plan.reservation_id is None:
        return {}
    result: dict[str, Any] = db.call(
        conn,
        "cortex.settle_reservation",
        p_tenant_id=plan.tenant_id,
        p_reservation_id=plan.reservation_id,
        p_usage=body,
        p_contact_id=contact_id,
        p_interaction_id=interaction_id,
    )
    return result
