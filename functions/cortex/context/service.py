"""Working context: assembled in SQL (get_context), generated here (Claude or the local model).

Generation reads the material in one short transaction, calls the model with no connection
held, and stores the result in another. A failed generation leaves the cached context in place
(served as stale), counts the failure, and queues a retry five minutes later; the queue parks
the job and writes an alert after the third failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from cortex import db, llm
from cortex.llm import offline, prompts
from cortex.queue.worker import Deferred
from cortex.usage import budget

Claims = Mapping[str, Any]

# A failed regeneration is tried again this much later (seed 000).
RETRY_AFTER = timedelta(minutes=5)
# The worker generates contexts as the tenant's system agent, and its budget pays for them.
SYSTEM_AGENT = "system"


def get_context(claims: Claims, contact_id: str, level: int = 1, refresh: bool = False) -> dict[str, Any]:
    """The contact's working context at a level (0-3), regenerated first when refresh is true."""
    if refresh:
        refresh_context(claims, contact_id)
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_context", contact_id=contact_id, level=level)
    return result


# Complex context generation uses the agent's complex_task_model (Sonnet by default): a long
# history, i.e. more interactions than the material carries (context_material brings the newest
# 20, so the model summarises a truncated history), or material whose prompt is over 2,000 tokens
# (ceil(chars / 4)). Everything else uses the agent's default_model (Haiku by default).
LONG_HISTORY_INTERACTIONS = 20
LONG_MATERIAL_TOKENS = 2000


def is_complex(material: Mapping[str, Any], prompt_tokens: int) -> bool:
    """Whether generating this context is complex work (see LONG_HISTORY_INTERACTIONS)."""
    count = int(material.get("interaction_count") or 0)
    return count > LONG_HISTORY_INTERACTIONS or prompt_tokens > LONG_MATERIAL_TOKENS


def build_context(material: Mapping[str, Any], plan: budget.Plan | None = None) -> tuple[dict[str, Any], llm.Usage]:
    """The stored form of a generated context: the model's briefing plus computed signals. With
    a plan, its model and output cap (or the local generator, over budget) are used."""
    generated, usage = llm.generate_context(material, **(plan.llm_args() if plan else {}))
    signals = offline.compute_signals(material)
    context = {
        **generated.model_dump(),
        "signals": signals.model_dump(),
        "open_threads": signals.open_threads,
    }
    return context, usage


def _reserve(conn: psycopg.Connection[Any], tenant_id: str, agent: str | None, contact_id: str,
             material: Mapping[str, Any]) -> budget.Plan:  # fmt: skip
    tokens = budget.estimate(prompts.context_prompt(material))
    return budget.reserve(
        conn,
        tenant_id,
        agent,
        "generate_context",
        tokens,
        complex_work=is_complex(material, tokens),
        can_defer=True,
        contact_id=contact_id,
    )


def refresh_context(claims: Claims, contact_id: str) -> dict[str, Any]:
    """Regenerates a contact's context now (HTTP and CLI path); when the budget defers it, the
    regeneration is queued for the tenant's midnight instead."""
    tenant_id = str(claims.get("tenant_id"))
    with db.as_caller(claims) as conn:
        db.call(conn, "get_contact", contact_id=contact_id)  # 404 and 403 before any model call
        db.call(conn, "cortex.require_writer")
        material = db.call(conn, "cortex.context_material", p_tenant_id=tenant_id, p_contact_id=contact_id)
        plan = _reserve(conn, tenant_id, claims.get("agent"), contact_id, material)
    if plan.deferred:
        with db.as_caller(claims) as conn:
            job = db.call(
                conn,
                "cortex.request_context_refresh",
                p_tenant_id=tenant_id,
                p_contact_id=contact_id,
                p_reason="budget",
                p_run_at=plan.run_at_datetime(),
            )
        return {"contact_id": contact_id, "regenerated": False, "queued": True, "job_id": job,
                "deferred_until": plan.run_at}  # fmt: skip
    try:
        context, usage = build_context(material, plan)
    except llm.LLMError as exc:
        with db.as_caller(claims) as conn:
            db.call(
                conn, "cortex.record_context_failure", p_tenant_id=tenant_id, p_contact_id=contact_id, p_error=str(exc)
            )
            db.call(
                conn,
                "cortex.request_context_refresh",
                p_tenant_id=tenant_id,
                p_contact_id=contact_id,
                p_reason="retry",
                p_run_at=datetime.now(UTC) + RETRY_AFTER,
            )
            budget.settle(conn, plan, budget.failed_usage(plan, exc), contact_id=contact_id)
        return {"contact_id": contact_id, "regenerated": False, "queued": True, "error": str(exc)}
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(
            conn,
            "refresh_context",
            contact_id=contact_id,
            context=context,
            usage=asdict(usage),
            interaction_count=material["interaction_count"],
        )
        budget.settle(conn, plan, usage, contact_id=contact_id)
    return result


def generate_for_job(conn: psycopg.Connection[Any], tenant_id: str, contact_id: str) -> dict[str, Any]:
    """Worker side: regenerates one contact's context, budgeted as the tenant's system agent.
    Raises LLMError so the queue retries (the failure is counted on the context first, so readers
    see it stale), and Deferred when the budget defers it to the tenant's midnight."""
    material = db.call(conn, "cortex.context_material", p_tenant_id=tenant_id, p_contact_id=contact_id)
    plan = _reserve(conn, tenant_id, SYSTEM_AGENT, contact_id, material)
    if plan.deferred:
        run_at = plan.run_at_datetime()
        assert run_at is not None
        raise Deferred(run_at, "budget")
    try:
        context, usage = build_context(material, plan)
    except llm.LLMError as exc:
        with conn.transaction():
            db.call(
                conn, "cortex.record_context_failure", p_tenant_id=tenant_id, p_contact_id=contact_id, p_error=str(exc)
            )
            budget.settle(conn, plan, budget.failed_usage(plan, exc), contact_id=contact_id)
        raise
    with conn.transaction():
        result: dict[str, Any] = db.call(
            conn,
            "cortex.store_context",
            p_tenant_id=tenant_id,
            p_contact_id=contact_id,
            p_context=context,
            p_usage={**asdict(usage), "agent": plan.agent},
            p_interaction_count=material["interaction_count"],
        )
        budget.settle(conn, plan, usage, contact_id=contact_id)
    return result
