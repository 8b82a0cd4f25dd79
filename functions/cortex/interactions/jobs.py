"""Background jobs of interactions: summarising what was logged without a summary (the PostgREST
path, imports), and rendering the context levels an import deferred."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from cortex import db
from cortex.interactions.service import summarise_pending
from cortex.queue.worker import register

# Contacts rendered per transaction. Each transaction holds its contacts' row locks while it
# renders them (about 1 ms a contact), so a write to one of them waits at most about this long.
RENDER_CHUNK = 50


@register("summarise_interaction")
def summarise_interaction(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Summarises an interaction logged without analysis; idempotent."""
    return summarise_pending(conn, tenant_id, str(payload["interaction_id"]))


@register("render_contexts")
def render_contexts(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Renders get_context levels 0-2 of the contacts an import left unrendered
    (cortex.defer_context_render). Contacts rendered since, or deleted, are skipped, so a job
    that runs again, or late, does no harm."""
    ids = sorted({uuid.UUID(str(i)) for i in payload.get("contact_ids") or []})
    rendered = 0
    for start in range(0, len(ids), RENDER_CHUNK):
        chunk = ids[start : start + RENDER_CHUNK]
        rendered += int(db.call(conn, "cortex.render_pending_contexts", p_tenant_id=tenant_id, p_contact_ids=chunk))
    return {"contacts": len(ids), "rendered": rendered}
