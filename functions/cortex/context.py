"""Working context: assembled in SQL (get_context), generated here (Claude or the local model).

Generation reads the material in one short transaction, calls the model with no connection
held, and stores the result in another. A failed generation leaves the cached context in place
(served as stale), counts the failure, and queues a retry five minutes later; the queue parks
the job and writes an alert after the third failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import psycopg

from cortex import db, llm, local_model

Claims = Mapping[str, Any]


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
    signals = local_model.compute_signals(material)
    context = {
        **generated.model_dump(),
        "signals": signals.model_dump(),
        "open_threads": signals.open_threads,
    }
    return context, usage


def refresh_context(claims: Claims, contact_id: str) -> dict[str, Any]:
    """Regenerates a contact's context now (HTTP and CLI path)."""
    with db.as_caller(claims) as conn:
        db.call(conn, "get_contact", contact_id=contact_id)  # 404 before any model call
        material = conn.execute("select cortex.context_material(cortex.current_tenant(), %s)", (contact_id,)).fetchone()
    assert material is not None
    try:
        context, usage = build_context(material[0])
    except llm.LLMError as exc:
        with db.as_caller(claims) as conn:
            conn.execute(
                "select cortex.record_context_failure(cortex.current_tenant(), %s, %s)",
                (contact_id, str(exc)),
            )
            conn.execute(
                "select cortex.request_context_refresh(cortex.current_tenant(), %s, 'retry', "
                "now() + interval '5 minutes')",
                (contact_id,),
            )
        return {"contact_id": contact_id, "regenerated": False, "queued": True, "error": str(exc)}
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(
            conn,
            "refresh_context",
            contact_id=contact_id,
            context=context,
            usage=asdict(usage),
            interaction_count=material[0]["interaction_count"],
        )
    return result


def generate_for_job(conn: psycopg.Connection[Any], tenant_id: str, contact_id: str) -> dict[str, Any]:
    """Worker side: regenerates one contact's context. Raises LLMError so the queue retries;
    the failure is counted on the context first so readers see it stale."""
    row = conn.execute("select cortex.context_material(%s, %s)", (tenant_id, contact_id)).fetchone()
    assert row is not None
    material = row[0]
    try:
        context, usage = build_context(material)
    except llm.LLMError as exc:
        conn.execute("select cortex.record_context_failure(%s, %s, %s)", (tenant_id, contact_id, str(exc)))
        raise
    out = conn.execute(
        "select cortex.store_context(%s, %s, %s, %s, %s)",
        (
            tenant_id,
            contact_id,
            db.Jsonb(context),
            db.Jsonb({**asdict(usage), "agent": "system"}),
            material["interaction_count"],
        ),
    ).fetchone()
    assert out is not None
    result: dict[str, Any] = out[0]
    return result
