"""The briefing API: thin calls to public.get_briefing and the operators' settings (all rules live in SQL)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from cortex import db

Claims = Mapping[str, Any]


def briefing_args(
    agent: str | None = None, *, format: str | None = None, max_chars: int | None = None
) -> dict[str, Any]:
    """The named arguments of public.get_briefing (None: the SQL default)."""
    return {"agent": agent, "format": format, "max_chars": max_chars}


def get_briefing(claims: Claims, agent: str | None = None, **options: Any) -> dict[str, Any]:
    """The agent's briefing (the caller's when agent is None), cached or freshly built."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_briefing", **briefing_args(agent, **options))
    return result


def render_for_cache(conn: psycopg.Connection[Any], tenant_id: str, agent: str, format: str) -> dict[str, Any]:
    """Builds and caches an agent's briefing as that agent (RLS as for its own reads), without
    counting it as served: the pre-computation. Runs in its own transaction on `conn`."""
    with db.as_caller(db.agent_claims(tenant_id, agent), conn) as c:
        result: dict[str, Any] = db.call(
            c, "cortex.briefing_get", p_agent=agent, p_format=format, p_max_chars=None, p_serve=False, p_force=True
        )
    return result


def settings(conn: psycopg.Connection[Any], tenant_id: str, agent: str | None = None) -> dict[str, Any]:
    """The effective briefing settings of the tenant (agent None) or of one agent."""
    row = conn.execute(
        "select to_jsonb(cortex.briefing_config(%s, %s)) - 'tenant_id' - 'agent' as s", (tenant_id, agent or "")
    ).fetchone()
    value: dict[str, Any] = (row[0] if not isinstance(row, dict) else row["s"]) if row else {}
    return value


def set_settings(
    conn: psycopg.Connection[Any], tenant_id: str, values: Mapping[str, Any], agent: str | None = None
) -> dict[str, Any]:
    """Sets the tenant's briefing settings, or one agent's overrides (cortex.set_briefing_settings)."""
    result: dict[str, Any] = db.call(
        conn, "cortex.set_briefing_settings", p_tenant_id=tenant_id, p_agent=agent, p_settings=Jsonb(dict(values))
    )
    return result
