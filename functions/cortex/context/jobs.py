"""Background jobs of working context: regenerating a contact's context."""

from __future__ import annotations

from typing import Any

import psycopg

from cortex.context.service import generate_for_job
from cortex.errors import CortexError
from cortex.queue.worker import register


@register("generate_context")
def generate_context(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Regenerates a contact's working context; a model failure raises so the queue retries."""
    contact_id = str(payload["contact_id"])
    try:
        return generate_for_job(conn, tenant_id, contact_id)
    except CortexError as exc:
        if exc.status != 404:
            raise
        # The contact was deleted after its refresh was queued: nothing to do, nothing to alert.
        return {"skipped": "contact not found", "contact_id": contact_id}
