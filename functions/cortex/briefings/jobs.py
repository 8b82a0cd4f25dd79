"""Background jobs of briefings: rendering an agent's briefings ahead of its reads (pre-computation)."""

from __future__ import annotations

from typing import Any

import psycopg

from cortex.briefings import service
from cortex.errors import CortexError
from cortex.queue.worker import register

FORMATS = ("markdown", "compact")


@register("render_briefing")
def render_briefing(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Builds and caches the agent's markdown and compact briefings (queued by
    cortex.job_precompute_briefings), as the agent itself, so a read then finds them ready."""
    agent = str(payload["agent"])
    rendered: dict[str, Any] = {}
    for fmt in FORMATS:
        try:
            result = service.render_for_cache(conn, tenant_id, agent, fmt)
        except CortexError as exc:
            if exc.status not in (401, 403, 422):
                raise
            # The agent was disabled or removed after its job was queued: nothing to render.
            return {"skipped": str(exc), "agent": agent}
        rendered[fmt] = {"graph_version": result["graph_version"], "chars": result["chars"]}
    return {"agent": agent, "rendered": rendered}
