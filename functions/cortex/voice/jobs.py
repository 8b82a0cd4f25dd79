"""Background jobs of voice: a received call becomes tier 1, tier 2 and an interaction."""

from __future__ import annotations

from typing import Any

import psycopg

from cortex.queue.worker import register
from cortex.voice import service


@register("voice_post_call")
def voice_post_call(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Processes one post-call webhook recorded by cortex.voice_accept_call (idempotent)."""
    return service.process_call(conn, tenant_id, str(payload["conversation_id"]))
