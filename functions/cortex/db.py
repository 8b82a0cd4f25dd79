"""Connections, and the one way Python calls Cortex's SQL functions.

Every request runs in one transaction that first becomes the caller exactly the way PostgREST
does (`set local role authenticated` + `request.jwt.claims`), so the HTTP API, the CLI and a
PostgREST caller all meet the same functions, policies and checks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

__all__ = ["Jsonb", "as_caller", "become", "call", "get_pool", "transaction"]
from psycopg_pool import ConnectionPool

from cortex.config import get_settings
from cortex.errors import from_db_error

_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()


def get_pool() -> ConnectionPool:
    """The process's connection pool (opened on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            s = get_settings()
            _pool = ConnectionPool(
                s.database_url,
                min_size=s.pool_min,
                max_size=s.pool_max,
                kwargs={"autocommit": True},
                open=True,
                name="cortex",
            )
        return _pool


def close_pool() -> None:
    """Closes the pool (tests and shutdown)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def become(conn: psycopg.Connection[Any], claims: Mapping[str, Any]) -> None:
    """Within the current transaction, act as an API caller with these JWT claims (as PostgREST does)."""
    # One round trip for both (set_config('role', ..., true) is SET LOCAL ROLE), as PostgREST does.
    conn.execute(
        "select set_config('role', 'authenticated', true), set_config('request.jwt.claims', %s, true)",
        (json.dumps(dict(claims)),),
    )


def _adapt(value: Any) -> Any:
    if isinstance(value, dict):
        return Jsonb(value)
    return value


def call(conn: psycopg.Connection[Any], function: str, /, **args: Any) -> Any:
    """Calls public.<function>(name => value, ...) with the given named arguments, None ones
    omitted so SQL defaults apply, and returns its single value. Database errors become CortexError."""
    present = {k: v for k, v in args.items() if v is not None}
    query = sql.SQL("select public.{}({})").format(
        sql.Identifier(function),
        sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in present),
    )
    try:
        with conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(query, {k: _adapt(v) for k, v in present.items()})
            row = cur.fetchone()
    except psycopg.Error as exc:
        raise from_db_error(exc) from exc
    return row[0] if row else None


@contextmanager
def transaction(conn: psycopg.Connection[Any] | None = None) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection inside one transaction (committed on success, rolled back on error)."""
    if conn is not None:
        with conn.transaction():
            yield conn
        return
    with get_pool().connection() as c, c.transaction():
        yield c


@contextmanager
def as_caller(
    claims: Mapping[str, Any], conn: psycopg.Connection[Any] | None = None
) -> Iterator[psycopg.Connection[Any]]:
    """One transaction acting as the caller with these claims (the PostgREST request path)."""
    with transaction(conn) as c:
        become(c, claims)
        yield c


def agent_claims(tenant_id: str, agent: str) -> dict[str, str]:
    """The claims an agent's requests carry."""
    return {"role": "authenticated", "tenant_id": str(tenant_id), "agent": agent}
