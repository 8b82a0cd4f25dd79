"""Bare functions-framework targets for scripts/bench_http.py and bench_voice.py: what the HTTP stack
alone costs, and what the stack plus one database round trip costs.

    functions-framework --asgi --source scripts/bench_http_bare.py --target bare       (the reference)
    functions-framework --source scripts/bench_http_bare.py --target bare_sync         (Flask/gunicorn)
    functions-framework --asgi --source scripts/bench_http_bare.py --target bare_db    (DATABASE_URL)

`bare` and `bare_sync`: no routing, no authentication, no database: a small JSON response, like
Cortex's /health. `bare_db`: the floor of any Python edge on the decided stack for a hot read. It
reads the JSON body {call, args, claims} (call: "voice_client_data" or "get_context") and sends the
claims and that SQL call to PostgreSQL in one round trip on a pooled async psycopg connection (as
Cortex's edge does), then answers SQL's JSON text as it came. No authentication, no validation, no
error mapping, no deadline: whatever Cortex spends beyond this is its own layers.
"""

from __future__ import annotations

import json
import os
from typing import Any

BODY = {"status": "ok", "service": "bare"}

_BECOME = "select set_config('role', 'authenticated', true), set_config('request.jwt.claims', %s, true); "
_CALLS = {
    "voice_client_data": _BECOME + "select public.voice_client_data(%s, %s)::text",
    "get_context": _BECOME + "select public.get_context(%s::uuid, %s::int)::text",
}
_pool: Any = None


async def bare(request: Any) -> dict[str, str]:
    """ASGI mode: functions-framework wraps a dict in a Starlette JSONResponse."""
    return BODY


def bare_sync(request: Any) -> dict[str, str]:
    """Flask mode: Flask turns a dict into a JSON response."""
    return BODY


async def _db_pool() -> Any:
    global _pool
    if _pool is None:
        import psycopg_pool

        size = int(os.environ.get("CORTEX_POOL_MAX", "10"))
        _pool = psycopg_pool.AsyncConnectionPool(
            os.environ["DATABASE_URL"], min_size=size, max_size=size, open=False, kwargs={"autocommit": True}
        )
        await _pool.open(wait=True)
    return _pool


async def bare_db(request: Any) -> Any:
    """A hot read's answer with nothing but one pooled round trip around it."""
    import psycopg
    from starlette.responses import Response

    pool = await _db_pool()
    if request.method == "GET":  # the readiness probe of the bench's server runner (the pool is open now)
        return BODY
    body = json.loads(await request.body())
    async with pool.connection() as conn, psycopg.AsyncClientCursor(conn) as cur:
        await cur.execute(_CALLS[body["call"]], (json.dumps(body["claims"]), *body["args"]))
        cur.nextset()
        row = await cur.fetchone()
    return Response(row[0] if row else "null", media_type="application/json")
