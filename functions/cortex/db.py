"""Connections, and the one way Python calls Cortex's SQL functions.

Every call names a function (`"get_context"` is `public.get_context`, `"cortex.store_context"`
is the private one) and passes named arguments, so nothing depends on parameter order and a
renamed parameter fails loudly. Database errors become `CortexError` in one place.

Every request runs in one transaction that first becomes the caller exactly the way PostgREST
does (`set local role authenticated` + `request.jwt.claims`), so the HTTP API, the CLI and a
PostgREST caller all meet the same functions, policies and checks. The HTTP edge is async (an
`AsyncConnectionPool` per server process); the CLI, the worker and model-calling services are
synchronous (a `ConnectionPool`). Both build their statements here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.adapt import Loader
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from cortex.config import get_settings
from cortex.errors import from_db_error

__all__ = [
    "Jsonb",
    "acall",
    "acall_as",
    "agent_claims",
    "arows",
    "as_caller",
    "become",
    "call",
    "call_as",
    "close_pool",
    "get_pool",
    "rows",
    "rows_json_text",
    "typed",
]

_pool: ConnectionPool | None = None
_pool_lock = threading.Lock()
_apools: dict[str, AsyncConnectionPool] = {}
_apool_loop: asyncio.AbstractEventLoop | None = None


def _pool_options(configure: Any) -> dict[str, Any]:
    # The same sizes, timeouts and per-connection set-up for the sync pool and the async one.
    s = get_settings()
    return {
        "conninfo": s.database_url,
        "min_size": s.pool_min,
        "max_size": s.pool_max,
        "timeout": s.pool_timeout_seconds,
        "kwargs": {"autocommit": True, "connect_timeout": s.connect_timeout_seconds},
        "configure": configure,
    }


def get_pool() -> ConnectionPool:
    """The process's synchronous connection pool (opened on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ConnectionPool(**_pool_options(_configure), open=True, name="cortex")
        return _pool


async def get_async_pool(purpose: str = "api", size: int | None = None) -> AsyncConnectionPool:
    """The event loop's async connection pool (the HTTP edge), opened on first use.

    `purpose` names a pool of its own, of exactly `size` connections (a bulkhead: the searches,
    `cortex.memories.search`), so that one kind of work neither waits for nor crowds out the
    connections of the rest. A pool belongs to the loop that opened it; a new loop (a test client)
    gets new pools."""
    global _apool_loop
    loop = asyncio.get_running_loop()
    if _apool_loop is not loop:
        _apools.clear()
        _apool_loop = loop
    pool = _apools.get(purpose)
    if pool is None:
        options = _pool_options(_aconfigure)
        if size is not None:
            options |= {"min_size": size, "max_size": size}
        pool = _apools[purpose] = AsyncConnectionPool(**options, open=False, name=f"cortex-{purpose}")
        await pool.open(wait=False)
    return pool


async def aclose_pool() -> None:
    """Closes the async pools of the running loop (tests and shutdown)."""
    global _apool_loop
    pools = list(_apools.values())
    _apools.clear()
    _apool_loop = None
    for pool in pools:
        await pool.close()


def close_pool() -> None:
    """Closes the synchronous pool (tests and shutdown); the async ones are forgotten."""
    global _pool, _apool_loop
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _pool = None
    _apools.clear()
    _apool_loop = None


# --- statements --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Typed:
    """An argument with an explicit SQL type (arrays of uuid, say), where inference cannot tell."""

    value: Any
    sql_type: str


def typed(value: Any, sql_type: str) -> Typed:
    """Marks an argument to be cast to `sql_type` (e.g. `typed(ids, "uuid[]")`)."""
    return Typed(value, sql_type)


def _function(name: str) -> sql.Composable:
    schema, _, function = name.rpartition(".")
    return sql.Identifier(schema or "public", function)


@functools.lru_cache(maxsize=1024)
def _template(name: str, shape: tuple[tuple[str, str | None], ...], set_returning: bool, as_text: bool) -> str:
    # Composed once per call shape (function, argument names, casts): composing SQL costs more
    # than a hot read's whole round trip, and a stable text hits psycopg's query-conversion cache.
    params: list[sql.Composable] = []
    for key, sql_type in shape:
        placeholder: sql.Composable = sql.Placeholder(key)
        if sql_type is not None:
            placeholder = sql.SQL("{}::{}").format(placeholder, sql.SQL(sql_type))
        params.append(sql.SQL("{} => {}").format(sql.Identifier(key), placeholder))
    template = "select * from {}({})" if set_returning else "select {}({})::text" if as_text else "select {}({})"
    return sql.SQL(template).format(_function(name), sql.SQL(", ").join(params)).as_string(None)


def _statement(
    name: str, args: Mapping[str, Any], *, set_returning: bool, as_text: bool = False
) -> tuple[str, dict[str, Any]]:
    # None is omitted so the function's SQL default applies (PostgREST does the same for absent keys).
    shape: list[tuple[str, str | None]] = []
    values: dict[str, Any] = {}
    for key, value in args.items():
        if value is None:
            continue
        if isinstance(value, Typed):
            shape.append((key, value.sql_type))
            value = value.value
        else:
            shape.append((key, None))
        values[key] = Jsonb(value) if isinstance(value, dict) else value
    return _template(name, tuple(shape), set_returning, as_text), values


def _mapped(exc: psycopg.Error) -> Exception:
    """The caller's error for a database error; a lost or refused connection passes unchanged
    (no SQLSTATE, class 08, or a shutdown 57P0x), so workers reconnect and the edge answers 503."""
    state = exc.sqlstate
    if isinstance(exc, psycopg.OperationalError) and (state is None or state.startswith(("08", "57P"))):
        return exc
    return from_db_error(exc)


def call(conn: psycopg.Connection[Any], function: str, /, **args: Any) -> Any:
    """Calls `function` (public unless schema-qualified) with named arguments and returns its
    single value; None arguments are omitted so SQL defaults apply. Errors become CortexError."""
    query, values = _statement(function, args, set_returning=False)
    try:
        with conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(query, values)
            row = cur.fetchone()
    except psycopg.Error as exc:
        raise _mapped(exc) from exc
    return row[0] if row else None


def rows(conn: psycopg.Connection[Any], function: str, /, **args: Any) -> list[dict[str, Any]]:
    """Calls a set-returning `function` with named arguments; its rows as dicts."""
    query, values = _statement(function, args, set_returning=True)
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query, values)
            return cur.fetchall()
    except psycopg.Error as exc:
        raise _mapped(exc) from exc


class _JsonText(Loader):
    """Leaves a json/jsonb column as its JSON text."""

    def load(self, data: Any) -> str:
        return bytes(data).decode()


def rows_json_text(conn: psycopg.Connection[Any], function: str, /, **args: Any) -> list[dict[str, Any]]:
    """`rows`, with json and jsonb columns left as JSON text: for a caller that must survive a
    value nested deeper than Python's decoder can recurse, by decoding each row on its own."""
    query, values = _statement(function, args, set_returning=True)
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            for name in ("json", "jsonb"):
                cur.adapters.register_loader(name, _JsonText)
            cur.execute(query, values)
            return cur.fetchall()
    except psycopg.Error as exc:
        raise from_db_error(exc) from exc


async def acall(conn: psycopg.AsyncConnection[Any], function: str, /, **args: Any) -> Any:
    """`call` on an async connection."""
    query, values = _statement(function, args, set_returning=False)
    try:
        async with conn.cursor(row_factory=tuple_row) as cur:
            await cur.execute(query, values)
            row = await cur.fetchone()
    except psycopg.Error as exc:
        raise _mapped(exc) from exc
    return row[0] if row else None


async def arows(conn: psycopg.AsyncConnection[Any], function: str, /, **args: Any) -> list[dict[str, Any]]:
    """`rows` on an async connection."""
    query, values = _statement(function, args, set_returning=True)
    try:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(query, values)
            return await cur.fetchall()
    except psycopg.Error as exc:
        raise _mapped(exc) from exc


# --- acting as a caller ----------------------------------------------------------------------------

# As PostgREST does per request: the role and the claims. The role's own settings (timeouts),
# which ALTER ROLE alone never applies to a role that is switched to, are set once per pooled
# connection (`_configure`): every request on these connections runs as that role.
_BECOME = "select set_config('role', 'authenticated', true), set_config('request.jwt.claims', %s, true)"
_ONE_TRIP = _BECOME.replace("%s", "%(__claims)s") + "; "
_ROLE_SETTINGS = "select cortex.apply_role_settings('authenticated', false)"


def _configure(conn: psycopg.Connection[Any]) -> None:
    conn.execute(_ROLE_SETTINGS)


async def _aconfigure(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.execute(_ROLE_SETTINGS)


def become(conn: psycopg.Connection[Any], claims: Mapping[str, Any]) -> None:
    """Within the current transaction, act as an API caller with these JWT claims (as PostgREST does)."""
    # One round trip for both (set_config('role', ..., true) is SET LOCAL ROLE), as PostgREST does.
    conn.execute(_BECOME, (json.dumps(dict(claims)),))


@contextmanager
def transaction(conn: psycopg.Connection[Any] | None = None) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection inside one transaction (committed on success, rolled back on error).
    An error at commit (deferred triggers render contexts then) is mapped like any call's."""
    committing = False
    try:
        if conn is not None:
            with conn.transaction():
                yield conn
                committing = True
            return
        with get_pool().connection() as c, c.transaction():
            yield c
            committing = True
    except psycopg.Error as exc:
        if not committing:
            raise  # raised by the body: the caller's own error handling applies
        raise _mapped(exc) from exc


@contextmanager
def as_caller(
    claims: Mapping[str, Any], conn: psycopg.Connection[Any] | None = None
) -> Iterator[psycopg.Connection[Any]]:
    """One transaction acting as the caller with these claims (the PostgREST request path)."""
    with transaction(conn) as c:
        become(c, claims)
        yield c


def call_as(claims: Mapping[str, Any], function: str, /, **args: Any) -> Any:
    """`call` in its own transaction as the caller with these claims."""
    with as_caller(claims) as conn:
        return call(conn, function, **args)


async def _acall_once(
    claims: Mapping[str, Any],
    function: str,
    args: Mapping[str, Any],
    *,
    as_text: bool,
    pool: AsyncConnectionPool | None = None,
) -> Any:
    # One round trip: the claims and the call go as one simple query of two statements, which
    # PostgreSQL runs as one implicit transaction (so the SET LOCALs of set_config(..., true) hold
    # for the call and end with it). Parameters are bound client-side with libpq's quoting.
    statement, values = _one_trip(claims, function, args, as_text)
    pool = pool or await get_async_pool()
    async with pool.connection() as conn:
        try:
            async with psycopg.AsyncClientCursor(conn) as cur:
                await cur.execute(statement, values)
                cur.nextset()
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise _mapped(exc) from exc
    return row[0] if row else None


def _one_trip(
    claims: Mapping[str, Any], function: str, args: Mapping[str, Any], as_text: bool
) -> tuple[str, dict[str, Any]]:
    query, values = _statement(function, args, set_returning=False, as_text=as_text)
    return _ONE_TRIP + query, {**values, "__claims": json.dumps(dict(claims))}


def call_once(conn: psycopg.Connection[Any], claims: Mapping[str, Any], function: str, /, **args: Any) -> Any:
    """The async edge's one round trip (`acall_as`: the claims and the call as one implicit
    transaction) on a synchronous connection in autocommit mode, for callers that measure what the
    HTTP edge sends (scripts/bench). Errors become CortexError."""
    if not conn.autocommit:
        raise ValueError("call_once needs a connection in autocommit mode")
    statement, values = _one_trip(claims, function, args, False)
    try:
        with psycopg.ClientCursor(conn) as cur:
            cur.execute(statement, values)
            cur.nextset()
            row = cur.fetchone()
    except psycopg.Error as exc:
        raise _mapped(exc) from exc
    return row[0] if row else None


async def acall_as_text(
    claims: Mapping[str, Any], function: str, /, *, pool: AsyncConnectionPool | None = None, **args: Any
) -> str:
    """`acall_as` for a function returning JSON, answered as its text: the hot reads hand SQL's
    rendering to the client without parsing and re-serialising it in Python. `pool`: one of
    `get_async_pool`'s own pools instead of the edge's."""
    text = await _acall_once(claims, function, args, as_text=True, pool=pool)
    return str(text) if text is not None else "null"


async def acall_as(claims: Mapping[str, Any], function: str, /, **args: Any) -> Any:
    """`call_as` on the async pool in one network round trip (the claims and the call together,
    as one transaction): the path of every pure-SQL route."""
    return await _acall_once(claims, function, args, as_text=False)


def agent_claims(tenant_id: str, agent: str) -> dict[str, str]:
    """The claims an agent's requests carry."""
    return {"role": "authenticated", "tenant_id": str(tenant_id), "agent": agent}
