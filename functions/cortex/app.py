"""The HTTP API: one async function for functions-framework's ASGI mode, and the list of mounted capabilities.

`handle(request)` matches the path against the routes every capability declared (werkzeug
`Map`), authenticates the caller (`cortex.auth`), validates path, query and body with the
route's pydantic models and awaits the handler. Every error is JSON
`{"error": {"code", "message", "field", "hint", "sqlstate", ...}}`; unexpected failures are
logged with the request id and answer 500.

Served by `functions-framework --asgi --source functions/main.py --target api` (Starlette under
uvicorn workers, one per core; `cortex serve` starts it with the edge's limits).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import secrets
import uuid
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import psycopg
import psycopg_pool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, RequestRedirect, Rule

from cortex import auth, health, openapi
from cortex.alerts import routes as alerts
from cortex.briefings import routes as briefings
from cortex.consolidation import routes as consolidation
from cortex.contacts import routes as contacts
from cortex.context import routes as context
from cortex.customers import routes as customers
from cortex.dashboard import routes as dashboard
from cortex.errors import CortexError
from cortex.graph import routes as graph
from cortex.handoffs import routes as handoffs
from cortex.ingest import routes as ingest
from cortex.interactions import routes as interactions
from cortex.memories import routes as memories
from cortex.memories import search as memory_search
from cortex.notifications import routes as notifications
from cortex.routing import (
    API_PREFIX,
    Call,
    Page,
    RawJSON,
    Reply,
    Route,
    Router,
    Stream,
    parse_json,
    read_body,
    validate,
)
from cortex.tenancy import routes as tenancy
from cortex.usage import routes as usage
from cortex.voice import routes as voice

logger = logging.getLogger("cortex.api")

meta = Router("meta", prefix="")


@meta.route("GET", "/openapi.json", name="openapi", summary="This document (OpenAPI 3.1)", responses={}, auth=False)
async def _openapi(call: Call) -> Reply:
    return Reply(200, openapi_document())


# The mounted capabilities: a new one is one line here.
ROUTERS: tuple[Router, ...] = (
    contacts.router,
    interactions.router,
    context.router,
    handoffs.router,
    usage.router,
    alerts.router,
    notifications.router,
    graph.router,
    memories.router,
    memory_search.router,
    briefings.router,
    ingest.router,
    voice.router,
    consolidation.router,
    dashboard.router,
    customers.router,
    tenancy.router,
    health.router,
    meta,
)
ROUTES: tuple[Route, ...] = tuple(r for router in ROUTERS for r in router.routes)
_BY_NAME: dict[str, Route] = {r.name: r for r in ROUTES}
_URL_MAP = Map(
    [Rule(p, endpoint=r.name, methods=[r.method]) for r in ROUTES for p in r.paths],
    strict_slashes=False,
    merge_slashes=False,
)
_ADAPTER = _URL_MAP.bind("cortex", "/")
# Paths without parameters (most hot reads' prefixes are not, but /health is) skip the matcher.
_STATIC: dict[tuple[str, str], Route] = {
    (r.method, p.rstrip("/") or "/"): r for r in ROUTES for p in r.paths if "<" not in p
}
_REQUEST_ID = re.compile(openapi.REQUEST_ID_PATTERN)


@functools.cache
def _document() -> bytes:
    return json.dumps(openapi.build(ROUTES, health.version()), ensure_ascii=False).encode()


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of every mounted route (a fresh copy)."""
    document: dict[str, Any] = json.loads(_document())
    return document


def routes() -> Sequence[Route]:
    """Every mounted route (what the dispatcher and the OpenAPI document read)."""
    return ROUTES


# --- dispatch ----------------------------------------------------------------------------------


def _match(method: str, path: str) -> tuple[Route, dict[str, Any]]:
    static = _STATIC.get((method, path.rstrip("/") or "/"))
    if static is not None:
        return static, {}
    try:
        name, args = _ADAPTER.match(path, method)
    except MethodNotAllowed as exc:
        allowed = sorted(set(exc.valid_methods or ()) - {"HEAD"})
        raise CortexError(
            405,
            "method_not_allowed",
            f"{method} is not allowed on {path}",
            None,
            f"allowed: {', '.join(allowed)}",
            None,
            {"allowed": allowed},
        ) from None
    except (NotFound, RequestRedirect):
        raise CortexError(
            404,
            "route_not_found",
            f"no route for {method} {path}",
            None,
            f"the routes are listed at {API_PREFIX}/openapi.json",
        ) from None
    return _BY_NAME[str(name)], dict(args)


async def _dispatch(request: Request) -> Reply:
    route, args = _match(request.method, request.scope["path"])
    claims = await auth.authenticate_async(request.headers) if route.auth else {}
    path = validate(route.path, args, "path") if route.path else None
    query = validate(route.query, dict(request.query_params), "query") if route.query else None
    body = None
    if route.body:
        raw = await read_body(request)
        parse = route.body_parser or (lambda data, _: parse_json(data))
        body = validate(route.body, parse(raw, request.headers.get("content-type", "")), "body")
    return await route.handler(Call(request, claims, path, query, body))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _request_id(request: Request) -> str:
    given = request.headers.get("x-request-id", "")
    return given if given and _REQUEST_ID.match(given) else secrets.token_hex(16)


def _error_reply(exc: CortexError, request_id: str) -> Reply:
    body = exc.to_json()
    body["error"]["request_id"] = request_id
    headers = {"Allow": ", ".join(exc.details["allowed"])} if exc.status == 405 else {}
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="cortex"'
    if exc.status == 429 and "retry_after_seconds" in exc.details:
        headers["Retry-After"] = str(exc.details["retry_after_seconds"])
    return Reply(exc.status, body, headers)


async def handle(request: Request) -> Response:
    """The whole API: routes, authenticates, validates, awaits the handler and answers JSON.
    Every error is JSON with the field at fault; unexpected failures are logged and answer 500."""
    request_id = _request_id(request)
    try:
        reply = await _dispatch(request)
    except CortexError as exc:
        if exc.status >= 500:
            logger.error(
                "request %s %s %s failed: %s (sqlstate %s)",
                request_id,
                request.method,
                request.scope["path"],
                exc.message,
                exc.sqlstate,
            )
        reply = _error_reply(exc, request_id)
    except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as exc:
        logger.error("request %s: database unavailable: %s", request_id, health.brief(exc))
        reply = _error_reply(
            CortexError(503, "database_unavailable", "the database is not reachable", None, "retry shortly"),
            request_id,
        )
    except Exception:
        logger.exception("request %s %s %s failed", request_id, request.method, request.scope["path"])
        reply = _error_reply(
            CortexError(
                500,
                "internal_error",
                "internal server error",
                None,
                f"quote request id {request_id} when reporting it",
            ),
            request_id,
        )
    # Nothing is cached unless its reply says so (the dashboard's versioned static files).
    headers = {"Cache-Control": "no-store", **reply.headers, "X-Request-ID": request_id}
    if isinstance(reply.body, Stream):
        # No proxy may buffer an event stream: each event must reach the client as it is written.
        headers["X-Accel-Buffering"] = "no"
        return StreamingResponse(
            reply.body.chunks, status_code=reply.status, media_type=reply.body.media_type, headers=headers
        )
    if isinstance(reply.body, Page):
        return Response(
            reply.body.text.encode(), status_code=reply.status, media_type=reply.body.media_type, headers=headers
        )
    return Response(
        reply.body.text.encode()
        if isinstance(reply.body, RawJSON)
        else json.dumps(reply.body, ensure_ascii=False, default=_json_default).encode(),
        status_code=reply.status,
        media_type="application/json",
        headers=headers,
    )
