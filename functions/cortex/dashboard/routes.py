"""HTTP routes of the dashboard: the pages under `/dashboard`, their JSON and event stream under
`/api/v1/dashboard` (sign-in, sign-out, who, usage series, live events)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from cortex.dashboard import live, service, views
from cortex.dashboard.models import (
    AgentQuery,
    ContactPath,
    ContactSearch,
    DashboardSession,
    NextQuery,
    SignedOut,
    SignIn,
    StaticPath,
    StaticQuery,
    UsageQuery,
    UsageSeries,
)
from cortex.errors import CortexError
from cortex.routing import Call, Page, Reply, Router, Stream

router = Router("dashboard")

# Pages may load only this server's own script, styles and images; no page may frame them.
_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
HEARTBEAT_SECONDS = 15.0
SIGN_IN = "/dashboard/sign-in"
_STATIC_TYPES = {
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "md": "text/plain; charset=utf-8",  # the licence: shown as text, never rendered
}
# A versioned static URL never changes its content.
_CACHE_FOREVER = "public, max-age=31536000, immutable"


def _secure(call: Call) -> bool:
    return call.request.url.scheme == "https"


def _to_sign_in(call: Call) -> Reply:
    path = call.request.url.path
    # Back to the page after signing in; the pages' /api/v1/dashboard/pages/... aliases go to the overview.
    target = path + (f"?{call.request.url.query}" if call.request.url.query else "")
    location = f"/dashboard/sign-in?next={quote(target, safe='/')}" if path.startswith("/dashboard") else SIGN_IN
    return Reply(303, Page(""), {"Location": location, **_PAGE_HEADERS})


PageBody = Callable[[service.Session, dict[str, Any]], Awaitable[tuple[str, str]]]


async def _page(call: Call, body: PageBody) -> Reply:
    """A page for a signed-in admin or monitor, else a redirect to the sign-in page."""
    session = await service.session_of(call.request)
    if session is None:
        return _to_sign_in(call)
    who: dict[str, Any] = await service.read(session.claims, "dashboard_session")
    title, html = await body(session, who)
    return Reply(200, Page(views.layout(title, html, who)), _PAGE_HEADERS)


# --- pages ---------------------------------------------------------------------------------------


@router.route(
    "GET", "/pages/sign-in", name="dashboard_sign_in_page", summary="Dashboard: the sign-in page (HTML)",
    responses={}, query=NextQuery, auth=False, absolute=("/dashboard/sign-in",), media_type="text/html",
)  # fmt: skip
async def sign_in_page(call: Call) -> Reply:
    """The sign-in form; the script posts the key to /api/v1/dashboard/session."""
    return Reply(200, Page(views.sign_in(None, call.query_as(NextQuery).next)), _PAGE_HEADERS)


@router.route(
    "GET", "/pages/overview", name="dashboard_overview_page",
    summary="Dashboard: pending handoffs by urgency, open alerts, usage today, graph stats (HTML)",
    responses={}, auth=False, absolute=("/dashboard",), media_type="text/html",
    description="Needs a dashboard session (cookie); without one, 303 to /dashboard/sign-in.",
)  # fmt: skip
async def overview_page(call: Call) -> Reply:
    """get_pending_handoffs, list_alerts, usage_summary and graph_stats, as the signed-in agent."""

    async def body(session: service.Session, _: dict[str, Any]) -> tuple[str, str]:
        data = await service.overview(session.claims)
        return "Overview", views.overview(data, datetime.now(UTC))

    return await _page(call, body)


@router.route(
    "GET", "/pages/usage", name="dashboard_usage_page", summary="Dashboard: usage against budgets (HTML)",
    responses={}, auth=False, absolute=("/dashboard/usage",), media_type="text/html",
)  # fmt: skip
async def usage_page(call: Call) -> Reply:
    """usage_summary (today's budgets) and dashboard_usage (30 days), as chart data and tables."""

    async def body(session: service.Session, _: dict[str, Any]) -> tuple[str, str]:
        today = await service.read(session.claims, "usage_summary", period="day")
        series = await service.read(session.claims, "dashboard_usage", days=30)
        return "Usage", views.usage(today, series)

    return await _page(call, body)


async def _agent_or_first(session: service.Session, query: AgentQuery, who: dict[str, Any]) -> tuple[str, list[str]]:
    agents = await service.agents(session.claims)
    agent = query.agent or next((a for a in agents if a != who["agent"]), who["agent"])
    if agent not in agents:
        raise CortexError(422, "validation_error", f'agent: "{agent}" is not an enabled agent of the tenant', "agent")
    return agent, agents


@router.route(
    "GET", "/pages/graph", name="dashboard_graph_page", summary="Dashboard: graph stats, an agent's neighbourhood",
    responses={}, query=AgentQuery, auth=False, absolute=("/dashboard/graph",), media_type="text/html",
)  # fmt: skip
async def graph_page(call: Call) -> Reply:
    """graph_stats, and neighbors of the agent's node (list_memories finds it), read-only."""

    async def body(session: service.Session, who: dict[str, Any]) -> tuple[str, str]:
        agent, agents = await _agent_or_first(session, call.query_as(AgentQuery), who)
        stats = await service.read(session.claims, "graph_stats")
        near = await service.neighbourhood(session.claims, agent)
        html = views.graph_stats(stats) + views.agent_picker("/dashboard/graph", agents, agent)
        return "Graph", html + views.neighbourhood(agent, near)

    return await _page(call, body)


@router.route(
    "GET", "/pages/briefing", name="dashboard_briefing_page", summary="Dashboard: an agent's briefing",
    responses={}, query=AgentQuery, auth=False, absolute=("/dashboard/briefing",), media_type="text/html",
)  # fmt: skip
async def briefing_page(call: Call) -> Reply:
    """get_briefing for any agent (admins and monitors may), read-only: no access recorded, no cache written."""

    async def body(session: service.Session, who: dict[str, Any]) -> tuple[str, str]:
        agent, agents = await _agent_or_first(session, call.query_as(AgentQuery), who)
        data = await service.read(session.claims, "get_briefing", agent=agent)
        html = views.agent_picker("/dashboard/briefing", agents, agent) + views.briefing(data)
        return f"Briefing of {agent}", html

    return await _page(call, body)


@router.route(
    "GET", "/pages/contacts", name="dashboard_contacts_page", summary="Dashboard: find a contact (HTML)",
    responses={}, query=ContactSearch, auth=False, absolute=("/dashboard/contacts",), media_type="text/html",
)  # fmt: skip
async def contacts_page(call: Call) -> Reply:
    """search_contacts."""
    search = call.query_as(ContactSearch).search

    async def body(session: service.Session, _: dict[str, Any]) -> tuple[str, str]:
        found = await service.read(session.claims, "search_contacts", search=search or None, limit=50)
        return "Contacts", views.contacts(found, search)

    return await _page(call, body)


@router.route(
    "GET", "/pages/contacts/<contact_id>", name="dashboard_contact_page",
    summary="Dashboard: a contact's context levels, interactions and handoffs (HTML)",
    responses={}, path_params=ContactPath, auth=False, absolute=("/dashboard/contacts/<contact_id>",),
    media_type="text/html", errors=(404,),
)  # fmt: skip
async def contact_page(call: Call) -> Reply:
    """get_contact, get_context (levels 0-2), list_interactions and list_handoffs of the contact."""
    contact_id = str(call.path_as(ContactPath).contact_id)

    async def body(session: service.Session, _: dict[str, Any]) -> tuple[str, str]:
        data = await service.contact_page(session.claims, contact_id)
        name = data["contact"].get("name") or data["contact"].get("email") or contact_id
        return f"Contact: {name}", views.contact(data, datetime.now(UTC))

    return await _page(call, body)


@router.route(
    "GET", "/static/<name>", name="dashboard_static",
    summary="Dashboard: its script, styles, chart library (Chart.js) and the library's licence",
    responses={}, path_params=StaticPath, query=StaticQuery, auth=False, absolute=("/dashboard/static/<name>",),
    media_type="text/*",
    description="With `v` equal to the file's version (as the pages link it) the answer may be cached for a "
    "year (a changed file has a new version, hence a new URL); otherwise `Cache-Control: no-cache`.",
)  # fmt: skip
async def static_file(call: Call) -> Reply:
    """A file shipped in the package (cortex/dashboard/static), never fetched from elsewhere."""
    name = call.path_as(StaticPath).name
    text, version = views.static_file(name)
    cache = _CACHE_FOREVER if call.query_as(StaticQuery).v == version else "no-cache"
    media = _STATIC_TYPES[name.rsplit(".", 1)[1]]
    return Reply(200, Page(text, media), {"X-Content-Type-Options": "nosniff", "Cache-Control": cache})


# --- JSON and events -----------------------------------------------------------------------------


@router.route(
    "POST", "/session", name="dashboard_sign_in", summary="Sign in to the dashboard with an admin or monitor key",
    responses={200: DashboardSession}, body=SignIn, auth=False, errors=(401, 403, 415),
    description="Exchanges the key for a session cookie (cortex_dashboard: HttpOnly, SameSite=Strict, Secure over "
    "HTTPS, 8 hours). 401 naming key for a wrong or revoked key; 403 naming key for an agent that is not an "
    "admin or monitor, and for the service key.",
)  # fmt: skip
async def sign_in(call: Call) -> Reply:
    """Checks the key, asks SQL (dashboard_session) whether its agent may look, opens a session."""
    # JSON only: a cross-site HTML form can send text/plain, never application/json (that needs CORS).
    media = call.request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise CortexError(
            415, "unsupported_media_type", "send the key as JSON", "body", "Content-Type: application/json"
        )
    who, token = await service.sign_in(call.body_as(SignIn).key)
    return Reply(200, who, {"Set-Cookie": service.cookie(token, service.SESSION_SECONDS, _secure(call))})


@router.route(
    "GET", "/session", name="dashboard_whoami", summary="The dashboard session: who is signed in",
    responses={200: DashboardSession}, auth=False, errors=(401,),
)  # fmt: skip
async def whoami(call: Call) -> Reply:
    """dashboard_session as the session's agent, with the session's expiry."""
    session = await service.require(call.request)
    who = await service.read(session.claims, "dashboard_session")
    return Reply(200, {**who, "expires_at": session.expires_at})


@router.route(
    "DELETE", "/session", name="dashboard_sign_out", summary="Sign out of the dashboard",
    responses={200: SignedOut}, auth=False,
)  # fmt: skip
async def sign_out(call: Call) -> Reply:
    """Ends the session and clears the cookie (also without a session: signing out twice is fine)."""
    ended = await service.sign_out(call.request)
    return Reply(200, {"signed_out": ended}, {"Set-Cookie": service.cookie("", 0, _secure(call))})


@router.route(
    "GET", "/usage", name="dashboard_usage", summary="Tokens per agent per day (the dashboard's usage chart)",
    responses={200: UsageSeries}, query=UsageQuery, auth=False, errors=(401, 403),
)  # fmt: skip
async def usage_series(call: Call) -> Reply:
    """One call to public.dashboard_usage as the session's agent."""
    session = await service.require(call.request)
    return Reply(200, await service.read(session.claims, "dashboard_usage", days=call.query_as(UsageQuery).days))


def _event(name: str, data: dict[str, Any], event_id: int | None = None) -> bytes:
    head = f"event: {name}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return (head + f"data: {json.dumps(data, separators=(',', ':'))}\n\n").encode()


async def event_stream(session: service.Session) -> AsyncIterator[bytes]:
    """The session's tenant's changes as server-sent events until the session expires: `ready` once
    LISTEN is under way, `change` per event, a comment every 15 s (so a dead client is noticed),
    `expired` at the end of the session."""
    try:
        async with live.hub().subscribe(session.tenant_id) as queue:
            yield b"retry: 3000\n" + _event("ready", {"tenant_id": session.tenant_id})
            while True:
                left = (session.expires_at - datetime.now(UTC)).total_seconds()
                if left <= 0:
                    yield _event("expired", {"sign_in": "/dashboard/sign-in"})
                    return
                try:
                    change = await asyncio.wait_for(queue.get(), timeout=min(HEARTBEAT_SECONDS, left))
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                yield _event("change", change.as_json(), change.id)
    except TimeoutError:  # the listener could not LISTEN: the browser tries again later
        yield b"retry: 10000\n: not listening yet; reconnect shortly\n\n"


@router.route(
    "GET", "/events", name="dashboard_events", summary="Live changes of the tenant (server-sent events)",
    responses={}, auth=False, errors=(401,), media_type="text/event-stream",
    description="text/event-stream for the session's tenant only: `ready` when listening, then `change` "
    "({id, event, subject}) for each handoff, alert and budget event, fed by the outbox's NOTIFY; `expired` "
    "when the session ends. Needs the session cookie (EventSource sends no Authorization header).",
)  # fmt: skip
async def events(call: Call) -> Reply:
    """The stream of the session's tenant; 401 naming cookie without a session."""
    session = await service.require(call.request)
    return Reply(200, Stream(event_stream(session)))
