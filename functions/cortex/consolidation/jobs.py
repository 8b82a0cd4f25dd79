"""Background jobs of consolidation: the nightly run (queued by cortex.job_consolidation, pg_cron)."""

from __future__ import annotations

from typing import Any

import psycopg

from cortex import db
from cortex.consolidation import service
from cortex.consolidation.models import AGENTS
from cortex.errors import CortexError
from cortex.queue.worker import register


@register("consolidate")
def consolidate(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Runs the agents named in the payload (default all five, in pipeline order) for the tenant as
    its system agent. A run already in progress for the tenant is left alone (the job is done)."""
    names = [str(a) for a in payload.get("agents") or AGENTS]
    rate_limit = int(payload.get("rate_limit") or 100)
    try:
        report = service.run_agents(db.agent_claims(tenant_id, "system"), names, rate_limit=rate_limit, conn=conn)
    except CortexError as exc:
        if exc.sqlstate == "55000":
            return {"skipped": exc.message}
        raise
    return {
        "run_id": report["run_id"],
        "agents": {n: {k: a[k] for k in ("scanned", "processed", "failed")} for n, a in report["agents"].items()},
    }
