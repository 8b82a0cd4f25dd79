"""Interactions: summarised at write time, then appended through SQL log_interaction.

Before any model call the request is checked (cortex.check_interaction_request: a writing
caller, valid input, a known contact) and a repeated external_id is answered with the first row;
then the call is budgeted (cortex.usage.budget: reserved, and the model chosen from the agent's
config). The model call happens with no connection held; the write (row, usage, counters, jobs,
the reservation settled) is then one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import psycopg

from cortex import db, llm
from cortex.llm import prompts
from cortex.queue.worker import Deferred
from cortex.usage import budget

Claims = Mapping[str, Any]

# The fields cortex.check_interaction_request validates before a model call (named p_<field>).
_CHECKED = ("direction", "sentiment", "intent", "external_id", "agent", "human_id", "raw_content")


def _prompt_tokens(interaction_type: str, subject: str | None, raw_content: str | None) -> int:
    return budget.estimate(prompts.interaction_summary_prompt(interaction_type, subject, raw_content))


def log_interaction(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Logs an interaction. Without a caller-given summary it is summarised now (the agent's
    default model, the cheaper one or the local generator as the budget says) and the call is
    recorded in token_usage with the row; when the budget defers it, or the model fails, the row
    is still written and the worker summarises it later. A read-only caller, bad input or a
    repeated external_id costs no model call."""
    if fields.get("summary") is not None or fields.get("type") is None:
        with db.as_caller(claims) as conn:
            written: dict[str, Any] = db.call(conn, "log_interaction", **fields)
        return written
    tenant_id = str(claims.get("tenant_id"))
    metadata = fields.get("metadata")
    with db.as_caller(claims) as conn:
        checked = db.call(
            conn,
            "cortex.check_interaction_request",
            p_contact_id=fields.get("contact_id"),
            p_type=fields["type"],
            p_metadata=db.Jsonb(metadata) if metadata is not None else None,
            **{f"p_{name}": fields.get(name) for name in _CHECKED},
        )
        if checked.get("duplicate"):
            duplicate: dict[str, Any] = checked["duplicate"]
            return duplicate
        plan = budget.reserve(
            conn,
            tenant_id,
            checked["agent"],
            "summarize",
            _prompt_tokens(fields["type"], fields.get("subject"), fields.get("raw_content")),
            can_defer=True,
            contact_id=str(fields["contact_id"]),
        )
    if plan.deferred:
        # Written now, summarised after the tenant's midnight (the worker's job waits until then).
        with db.as_caller(claims) as conn:
            result: dict[str, Any] = db.call(conn, "log_interaction", **fields)
            run_at = db.call(
                conn,
                "cortex.postpone_interaction_summary",
                p_tenant_id=tenant_id,
                p_interaction_id=result["id"],
                p_run_at=plan.run_at_datetime(),
            )
        return {**result, "summary_deferred_until": run_at.isoformat() if run_at else None}
    usage: llm.Usage | dict[str, Any]
    try:
        analysis, usage = llm.summarise_interaction(
            fields["type"], fields.get("subject"), fields.get("raw_content"), **plan.llm_args()
        )
    except llm.LLMError as exc:
        analysis, usage = None, budget.failed_usage(plan, exc)
    if analysis is not None:
        assert isinstance(usage, llm.Usage)
        fields = {
            **fields,
            "summary": analysis.summary,
            "key_points": analysis.key_points,
            "sentiment": analysis.sentiment,
            "intent": analysis.intent,
            "usage": dict(asdict(usage)),
        }
    with db.as_caller(claims) as conn:
        result = db.call(conn, "log_interaction", **fields)
        budget.settle(conn, plan, usage, contact_id=str(fields["contact_id"]), interaction_id=result.get("id"))
    return result


def list_interactions(claims: Claims, **filters: Any) -> dict[str, Any]:
    """A contact's interactions, newest first; {items, limit}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "list_interactions", **filters)
    return result


def summarise_pending(conn: psycopg.Connection[Any], tenant_id: str, interaction_id: str) -> dict[str, Any]:
    """Worker side: summarises one interaction that was logged without analysis (PostgREST path)
    and writes the analysis once. Idempotent: an interaction already analysed is left alone."""
    row = db.call(conn, "cortex.interaction_for_analysis", p_tenant_id=tenant_id, p_interaction_id=interaction_id)
    if row is None:
        return {"skipped": "interaction not found"}
    if row["analysis_status"] == "done":
        return {"skipped": "already analysed"}
    contact_id = str(row["contact_id"])
    # Charged to the interaction's agent (the system agent for one logged for a human).
    plan = budget.reserve(
        conn,
        tenant_id,
        row["agent"],
        "summarize",
        _prompt_tokens(row["type"], row["subject"], row["raw_content"]),
        can_defer=True,
        contact_id=contact_id,
    )
    if plan.deferred:
        run_at = plan.run_at_datetime()
        assert run_at is not None
        raise Deferred(run_at, "budget")
    try:
        analysis, usage = llm.summarise_interaction(row["type"], row["subject"], row["raw_content"], **plan.llm_args())
    except llm.LLMError as exc:
        with conn.transaction():
            budget.settle(
                conn, plan, budget.failed_usage(plan, exc), contact_id=contact_id, interaction_id=interaction_id
            )
        raise
    with conn.transaction():
        out: dict[str, Any] = db.call(
            conn,
            "cortex.record_interaction_analysis",
            p_tenant_id=tenant_id,
            p_interaction_id=interaction_id,
            p_analysis=analysis.model_dump(),
            p_usage={**asdict(usage), "agent": plan.agent, "contact_id": contact_id},
        )
        budget.settle(conn, plan, usage, contact_id=contact_id, interaction_id=interaction_id)
    return {**dict(out or {}), "model": usage.model, "budget_action": plan.action}
