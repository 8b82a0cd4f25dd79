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
from cortex.llm import offline

Claims = Mapping[str, Any]

# A failed regeneration is tried again this much later (seed 000).
RETRY_AFTER = timedelta(minutes=5)


def get_context(claims: Claims, contact_id: str, level: int = 1, refresh: bool = False) -> dict[str, Any]:
    """The contact's working context at a level (0-3), regenerated first when refresh is true."""
    if refresh:
        refresh_context(claims, contact_id)
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_context", contact_id=contact_id, level=level)
    return result


def build_context(material: Mapping[str, Any]) -> tuple[dict[str, Any], llm.Usage]:
    """The stored form of a generated context: the model's briefing plus computed signals."""
    generated, usage = llm.generate_context(material)
    signals = offline.compute_signals(material)
    context = {
        **generated.model_dump(),
        "signals": signals.model_dump(),
        "open_threads": signals.open_threads,
    }
    return context, usage


def refresh_context(claims: Claims, contact_id: str) -> dict[str, Any]:
    """Regenerates a contact's context now (HTTP and CLI path)."""
    tenant_id = claims.get("tenant_id")
    with db.as_caller(claims) as conn:
        db.call(conn, "get_contact", contact_id=contact_id)  # 404 and 403 before any model call
        db.call(conn, "cortex.require_writer")
        material = db.call(conn, "cortex.context_material", p_tenant_id=tenant_id, p_contact_id=contact_id)
    try:
        context, usage = build_context(material)
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
    return result


def generate_for_job(conn: psycopg.Connection[Any], tenant_id: str, contact_id: str) -> dict[str, Any]:
    """Worker side: regenerates one contact's context. Raises LLMError so the queue retries;
    the failure is counted on the context first so readers see it stale."""
    material = db.call(conn, "cortex.context_material", p_tenant_id=tenant_id, p_contact_id=contact_id)
    try:
        context, usage = build_context(material)
    except llm.LLMError as exc:
        db.call(conn, "cortex.record_context_failure", p_tenant_id=tenant_id, p_contact_id=contact_id, p_error=str(exc))
        raise
    result: dict[str, Any] = db.call(
        conn,
        "cortex.store_context",
        p_tenant_id=tenant_id,
        p_contact_id=contact_id,
        p_context=context,
        p_usage={**asdict(usage), "agent": "system"},
        p_interaction_count=material["interaction_count"],
    )
    return result
