"""Interactions: summarised at write time, then appended through SQL log_interaction.

The model call happens before the write transaction opens, so no connection is held while a
model thinks; the write (row, usage, counters, jobs) is then one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import psycopg

from cortex import db, llm

Claims = Mapping[str, Any]


def log_interaction(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Logs an interaction. Without a caller-given summary it is summarised now (Claude Haiku, or
    the local summariser offline) and the call is recorded in token_usage with the row. If the
    model fails, the row is still written and the worker summarises it later."""
    # A read-only caller (known from its key) will be refused by SQL: spend no model call on it.
    if fields.get("summary") is None and fields.get("type") is not None and not claims.get("read_only"):
        try:
            analysis, usage = llm.summarise_interaction(
                fields["type"], fields.get("subject"), fields.get("raw_content")
            )
        except llm.LLMError:
            analysis = None
        if analysis is not None:
            fields = {
                **fields,
                "summary": analysis.summary,
                "key_points": analysis.key_points,
                "sentiment": analysis.sentiment,
                "intent": analysis.intent,
                "usage": {k: v for k, v in asdict(usage).items()},
            }
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "log_interaction", **fields)
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
    analysis, usage = llm.summarise_interaction(row["type"], row["subject"], row["raw_content"])
    with conn.transaction():
        out: dict[str, Any] = db.call(
            conn,
            "cortex.record_interaction_analysis",
            p_tenant_id=tenant_id,
            p_interaction_id=interaction_id,
            p_analysis=analysis.model_dump(),
            p_usage={**asdict(usage), "agent": row["agent"], "contact_id": str(row["contact_id"])},
        )
    return dict(out or {})
