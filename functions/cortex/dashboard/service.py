"""The dashboard's operations: sessions (sign-in by key, the cookie, sign-out) and each page's reads.

Why a session cookie: a browser's EventSource cannot send an Authorization header, and a key in a
URL ends up in logs and history. Sign-in takes the key once (in a POST body), checks it the way
every API request is checked, asks SQL whether its agent may use the dashboard
(`public.dashboard_session`: admins and monitors only) and opens a session: a random token, stored
in the database as its SHA-256 with an expiry (8 hours), set as an HttpOnly (no script reads it),
SameSite=Strict (no other site's page sends it: no cross-site request forgery) cookie, Secure over
HTTPS. Every request looks the token up again, so any server process serves any session, and a
disabled or demoted agent, or a signed-out session, is refused at its next request.

Every page reads through the existing API functions as the signed-in agent (RLS applies). Reads
that would otherwise record access (neighbours, briefings) run in a read-only transaction: looking
at the dashboard reinforces no edge and warms no cache.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from starlette.requests import Request

from cortex import auth, db
from cortex.config import get_settings
from cortex.errors import CortexError, from_db_error

COOKIE = "cortex_dashboard"
SESSION_SECONDS = 8 * 3600
TOKEN_PREFIX = "dsh_"
_MAX_TOKEN = 100


@dataclass(frozen=True)
class Session:
    """A signed-in dashboard user: the agent's claims and when the session ends."""

    claims: dict[str, str]
    expires_at: datetime
    token: str

    @property
    def tenant_id(self) -> str:
        """The tenant the session belongs to."""
        return self.claims["tenant_id"]


def _key_error(exc: CortexError) -> CortexError:
    """An authentication failure, named after the sign-in form's field."""
    return CortexError(exc.status, exc.code, exc.message, "key", exc.hint, exc.sqlstate, exc.details)


async def _owner_call(function: str, **args: Any) -> Any:
    pool = await db.get_async_pool()
    async with pool.connection() as conn:
        return await db.acall(conn, function, **args)


async def sign_in(key: str, ttl_seconds: int = SESSION_SECONDS) -> tuple[dict[str, Any], str]:
    """The session opened for `key` and its token: 401 naming `key` for a wrong key, 403 naming
    `key` for an agent that is not an admin or monitor (and for the service key, which is no agent's)."""
    service_key = get_settings().service_key
    if service_key and hmac.compare_digest(key.encode(), service_key.encode()):
        raise CortexError(
            403, "insufficient_privilege", "the service key cannot sign in to the dashboard", "key",
            "sign in with the key of an admin or monitor agent: cortex keys create <tenant> <agent>",
        )  # fmt: skip
    try:
        claims = await auth.authenticate_async({"Authorization": f"Bearer {key}"})
    except CortexError as exc:
        raise _key_error(exc) from None
    who: dict[str, Any] = await db.acall_as(claims, "dashboard_session")
    opened = await _owner_call(
        "cortex.open_dashboard_session",
        p_tenant_id=claims["tenant_id"],
        p_agent=claims["agent"],
        p_ttl_seconds=ttl_seconds,
    )
    return {**who, "expires_at": opened["expires_at"]}, str(opened["token"])


async def session_of(request: Request) -> Session | None:
    """The request's live session (from its cookie), or None."""
    token = request.cookies.get(COOKIE, "")
    if not token.startswith(TOKEN_PREFIX) or len(token) > _MAX_TOKEN:
        return None
    found = await _owner_call("cortex.dashboard_session_claims", p_token=token)
    if not found:
        return None
    expires = found["expires_at"]
    expires_at = expires if isinstance(expires, datetime) else datetime.fromisoformat(str(expires))
    return Session(db.agent_claims(str(found["tenant_id"]), str(found["agent"])), expires_at, token)


def no_session() -> CortexError:
    """The refusal of a dashboard API request without a live session."""
    return CortexError(
        401, "unauthorized", "no dashboard session (or it expired): sign in first", "cookie",
        "POST /api/v1/dashboard/session with an admin or monitor key, or open /dashboard/sign-in",
    )  # fmt: skip


async def require(request: Request) -> Session:
    """The request's live session, or 401 naming `cookie`."""
    session = await session_of(request)
    if session is None:
        raise no_session()
    return session


async def sign_out(request: Request) -> bool:
    """Ends the request's session, if it has one."""
    token = request.cookies.get(COOKIE, "")
    if not token.startswith(TOKEN_PREFIX) or len(token) > _MAX_TOKEN:
        return False
    return bool(await _owner_call("cortex.close_dashboard_session", p_token=token))


def cookie(token: str, max_age: int, secure: bool) -> str:
    """The Set-Cookie value of a session (max_age 0 removes it)."""
    return f"{COOKIE}={token}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


# --- reads ---------------------------------------------------------------------------------------

_BECOME = "select set_config('role', 'authenticated', true), set_config('request.jwt.claims', %s, true)"


def _statement(function: str, args: dict[str, Any]) -> tuple[sql.Composed, dict[str, Any]]:
    # As cortex.db builds calls: named arguments, None omitted so that the SQL default applies.
    present = {k: v for k, v in args.items() if v is not None}
    params = [
        sql.SQL("{} => {}").format(
            sql.Identifier(k),
            sql.SQL("{}::{}").format(sql.Placeholder(k), sql.SQL(v.sql_type))
            if isinstance(v, db.Typed)
            else sql.Placeholder(k),
        )
        for k, v in present.items()
    ]
    values = {k: v.value if isinstance(v, db.Typed) else v for k, v in present.items()}
    return sql.SQL("select {}({})").format(sql.Identifier("public", function), sql.SQL(", ").join(params)), values


async def read(claims: dict[str, str], function: str, /, **args: Any) -> Any:
    """`function` as the signed-in agent (RLS applies), in a read-only transaction: SQL records no
    access and fills no cache for what the dashboard only shows."""
    query, values = _statement(function, args)
    pool = await db.get_async_pool()
    async with pool.connection() as conn:
        try:
            async with conn.transaction():
                await conn.execute("set transaction read only")
                await conn.execute(_BECOME, (json.dumps(claims),))
                cur = await conn.execute(query, values)
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise from_db_error(exc) from exc
    return row[0] if row else None


async def call(claims: dict[str, str], function: str, /, **args: Any) -> Any:
    """`function` as the signed-in agent in its own transaction (reads that may queue work, such as
    a stale context's regeneration)."""
    return await db.acall_as(claims, function, **args)


async def overview(claims: dict[str, str]) -> dict[str, Any]:
    """The overview page's data: pending handoffs, open alerts, today's usage, graph stats."""
    return {
        "handoffs": await read(claims, "get_pending_handoffs", limit=100),
        "alerts": await read(claims, "list_alerts", status="open", limit=50),
        "usage": await read(claims, "usage_summary", period="day"),
        "graph": await read(claims, "graph_stats"),
    }


async def agents(claims: dict[str, str]) -> list[str]:
    """The tenant's enabled agents (from the usage chart's function, which lists them all)."""
    usage = await read(claims, "dashboard_usage", days=1)
    return [a["agent"] for a in usage["agents"]]


async def neighbourhood(claims: dict[str, str], agent: str) -> dict[str, Any]:
    """An agent's node in the memory graph and its neighbours (strongest first)."""
    found = await read(claims, "list_memories", kinds=db.typed(["agent"], "text[]"), agent=agent, limit=1)
    items = found.get("items") or []
    if not items:
        return {"node": None, "items": []}
    node = items[0]
    near = await read(claims, "neighbors", node_id=node["id"], limit=40)
    return {"node": node, "items": near["items"]}


async def contact_page(claims: dict[str, str], contact_id: str) -> dict[str, Any]:
    """A contact, its context at levels 0-2, its interactions and its handoffs."""
    contact = await read(claims, "get_contact", contact_id=contact_id)
    levels = [await call(claims, "get_context", contact_id=contact_id, level=level) for level in (0, 1, 2)]
    return {
        "contact": contact,
        "levels": levels,
        "interactions": await read(claims, "list_interactions", contact_id=contact_id, limit=50),
        "handoffs": await read(claims, "list_handoffs", contact_id=contact_id, limit=50),
    }
