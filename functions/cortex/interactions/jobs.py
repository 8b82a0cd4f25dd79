"""Background jobs of interactions: summarising what was logged without a summary (the PostgREST path)."""

from __future__ import annotations

from typing import Any

import psycopg

from cortex.interactions.service import summarise_pending
from cortex.queue.worker import register


@register("summarise_interaction")
def summarise_interaction(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Summarises an interaction logged without analysis; idempotent."""
    return summarise_pending(conn, tenant_id, str(payload["interaction_id"]))
