"""Interactions: summarised at write time, then appended through SQL log_interaction.

The model call happens before the write transaction opens, so no connection is held while a
model thinks; the write (row, usage, counters, jobs) is then one transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


# --- import (backfill) ------------------------------------------------------------------------------


class Unsendable:
    """An item that cannot reach SQL at all (a JSON line that does not parse): reported at the edge."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message


# Blank JSON lines keep the line numbering but are not items.
BLANK = object()


def _nul_path(value: Any, path: str) -> str | None:
    # PostgreSQL text and jsonb cannot hold U+0000: such an item is refused here, by itself.
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            if "\x00" in k:
                return path or "item"
            found = _nul_path(v, f"{path}.{k}" if path else k)
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _nul_path(v, f"{path}.{i}" if path else str(i))
            if found:
                return found
    return None


def _prepare(items: Sequence[Any]) -> tuple[list[Any], list[int], list[dict[str, Any]], int]:
    """The items SQL can receive, their positions in the batch, the errors found here, and the count
    of items (blank lines excluded)."""
    send: list[Any] = []
    where: list[int] = []
    errors: list[dict[str, Any]] = []
    received = 0
    for index, item in enumerate(items):
        if item is BLANK:
            continue
        received += 1
        if isinstance(item, Unsendable):
            errors.append({"index": index, "field": item.field, "message": item.message})
            continue
        nul = _nul_path(item, "")
        if nul is not None:
            errors.append({"index": index, "field": nul.split(".")[0] or "item",
                           "message": f"{nul} contains a NUL character (U+0000)"})  # fmt: skip
            continue
        send.append(item)
        where.append(index)
    return send, where, errors, received


def _merge(result: dict[str, Any], where: list[int], errors: list[dict[str, Any]], received: int) -> dict[str, Any]:
    sql_errors = [{**e, "index": where[e["index"]]} for e in result.get("errors") or []]
    merged = sorted(errors + sql_errors, key=lambda e: e["index"])
    return {**result, "received": received, "failed": len(merged), "errors": merged}


def import_interactions(claims: Claims, items: Sequence[Any]) -> dict[str, Any]:
    """Stores one batch (≤ 5,000 items) with one SQL call (import_interactions): new rows are
    stored with analysis pending and a summarise job each; duplicates by (contact, type,
    external_id) are counted, bad items reported as {index, field, message} and not written."""
    send, where, errors, received = _prepare(items)
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "import_interactions", items=db.Jsonb(send))
    return _merge(result, where, errors, received)


async def aimport_interactions(claims: Claims, items: Sequence[Any]) -> dict[str, Any]:
    """`import_interactions` on the async pool (the HTTP edge)."""
    send, where, errors, received = _prepare(items)
    result: dict[str, Any] = await db.acall_as(claims, "import_interactions", items=db.Jsonb(send))
    return _merge(result, where, errors, received)
