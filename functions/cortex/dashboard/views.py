"""The dashboard's HTML, rendered on the server: plain pages; the usage charts drawn by Chart.js.

No template engine: each page is a few small functions that escape every value they print
(`_e`). The usage charts (today against budgets, one bar per agent; tokens per day over the last
30 days, one line per agent) are <canvas> elements that static/dashboard.js draws with the
vendored Chart.js (static/chart.umd.min.js, no network at run time, no build step) from the
numbers the page carries as a JSON data block (`chart_data`, escaped so that no value can end the
element); the same numbers are printed as tables, so a page is readable without any script. The
neighbourhood graph is SVG drawn here. The page's script also signs in and keeps the page live.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from importlib import resources
from typing import Any
from urllib.parse import quote

URGENCIES = ("urgent", "high", "normal", "low")
# Chart.js 4.6.1, vendored as published on npm (docs/dashboard.md, Charts).
CHART_LIBRARY = "chart.umd.min.js"
NAV = (("/dashboard", "Overview"), ("/dashboard/usage", "Usage"), ("/dashboard/graph", "Graph"),
       ("/dashboard/briefing", "Briefing"), ("/dashboard/contacts", "Contacts"))  # fmt: skip


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def age(value: Any, now: datetime | None = None) -> str:
    """How long ago `value` (a timestamp) was, in words: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`."""
    at = _when(value)
    if at is None:
        return ""
    seconds = max(0, int(((now or datetime.now(UTC)) - at).total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


@functools.cache
def static_file(name: str) -> tuple[str, str]:
    """A file of the package's static/ folder (read once per process) and its version: the first
    12 hex digits of its SHA-256, which the pages put in its URL so that browsers may keep it."""
    text = resources.files("cortex.dashboard").joinpath("static", name).read_text(encoding="utf-8")
    return text, hashlib.sha256(text.encode()).hexdigest()[:12]


def static_url(name: str) -> str:
    """The URL of a static file, with its version (`?v=`): a changed file is a new URL."""
    return f"/dashboard/static/{name}?v={static_file(name)[1]}"


def layout(title: str, body: str, session: Mapping[str, Any] | None, *, live: bool = True) -> str:
    """A whole page: the header (tenant, agent, navigation, sign-out) and `body` in <main id="live">.
    A body with chart data (`#usage-data`) also loads the chart library, before the page's script."""
    header = ""
    if session is not None:
        links = "".join(f'<a href="{href}">{_e(label)}</a>' for href, label in NAV)
        header = (
            f'<header><strong>Cortex</strong> · <span id="tenant">{_e(session["tenant_name"])}</span>'
            f'<nav>{links}</nav><span class="who">{_e(session["agent"])} ({_e(session["role"])})'
            ' <span id="live-state" title="live updates">●</span>'
            ' <button id="sign-out" type="button">Sign out</button></span></header>'
        )
    live_attr = ' data-live="connecting"' if live and session is not None else ""
    # Deferred scripts run in document order: Chart is defined when dashboard.js draws.
    charts = f'<script src="{static_url(CHART_LIBRARY)}" defer></script>' if 'id="usage-data"' in body else ""
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)} · Cortex</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="stylesheet" href="{static_url("dashboard.css")}">'
        f'{charts}<script src="{static_url("dashboard.js")}" defer></script></head>'
        f'<body{live_attr}>{header}<main id="live"><h1>{_e(title)}</h1>{body}</main></body></html>'
    )


def sign_in(error: str | None = None, next_path: str | None = None) -> str:
    """The sign-in page: a key, exchanged by the script for a session cookie."""
    message = (
        f'<p class="error" id="sign-in-error">{_e(error)}</p>' if error else '<p class="error" id="sign-in-error"></p>'
    )
    body = (
        "<p>Sign in with the key of an admin or monitor agent of your tenant.</p>"
        f'<form id="sign-in" data-next="{_e(next_path or "/dashboard")}">'
        '<label>Agent key <input type="password" name="key" id="key" autocomplete="off" required></label>'
        f'<button type="submit" id="sign-in-button">Sign in</button></form>{message}'
    )
    return layout("Sign in", body, None, live=False)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str, css: str = "") -> str:
    cells = ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    if not cells:
        return f'<p class="empty">{_e(empty)}</p>'
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(cells)}</tbody></table>'


def _contact_link(contact: Mapping[str, Any] | None, contact_id: Any) -> str:
    name = (contact or {}).get("name") or (contact or {}).get("email") or contact_id
    return f'<a href="/dashboard/contacts/{_e(contact_id)}">{_e(name)}</a>'


def handoffs_by_urgency(items: Sequence[Mapping[str, Any]], now: datetime | None = None) -> str:
    """Pending handoffs grouped by urgency (most urgent first), each with its age."""
    parts = []
    for urgency in URGENCIES:
        group = [h for h in items if h.get("urgency") == urgency]
        rows = [
            (
                _contact_link(h.get("contact"), h["contact_id"]),
                _e(h.get("to_agent") or f"human {h.get('to_human_id')}"),
                _e(h.get("from_agent")),
                _e(h.get("reason")),
                _e((h.get("context_summary") or "")[:160]),
                f'<span class="age">{_e(age(h.get("created_at"), now))}</span>',
            )
            for h in group
        ]
        table = _table(("contact", "to", "from", "reason", "summary", "waiting"), rows, "none", "handoffs")
        parts.append(
            f'<section class="urgency {urgency}" id="handoffs-{urgency}">'
            f"<h3>{urgency} ({len(group)})</h3>{table}</section>"
        )
    return f'<section id="handoffs"><h2>Pending handoffs ({len(items)})</h2>{"".join(parts)}</section>'


def alerts(data: Mapping[str, Any], now: datetime | None = None) -> str:
    """Open alerts, newest first."""
    rows = [
        (f'<span class="sev {_e(a["severity"])}">{_e(a["severity"])}</span>', _e(a["kind"]), _e(a["message"]),
         _e(age(a.get("created_at"), now)))
        for a in data.get("items", [])
    ]  # fmt: skip
    table = _table(("severity", "kind", "message", "age"), rows, "no open alerts", "alerts")
    return f'<section id="alerts"><h2>Open alerts ({_e(data.get("open", 0))})</h2>{table}</section>'


def _level(used: int, budget: int) -> str:
    """How close to its budget an agent is: `ok` to 80 %, `near` to 100 %, `over` beyond (usage
    without a budget is over it). The bar's colour and the table's share follow it."""
    if used > budget:
        return "over"
    return "near" if 5 * used > 4 * budget else "ok"


def today_rows(budget_status: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Today's usage against the daily budget per agent (by name): used, budget, share (None
    without a budget) and level."""
    rows = []
    for name in sorted(budget_status):
        used, budget = int(budget_status[name].get("used", 0)), int(budget_status[name].get("budget", 0))
        share = used / budget if budget else None
        rows.append({"agent": name, "used": used, "budget": budget, "share": share, "level": _level(used, budget)})
    return rows


def day_series(series: Mapping[str, Any]) -> dict[str, Any]:
    """dashboard_usage as the line chart reads it: the days (oldest first) and each agent's tokens per day."""
    agents = list(series.get("agents", []))
    days = [str(p["day"]) for p in agents[0]["series"]] if agents else []
    return {
        "time_zone": series.get("time_zone"),
        "days": days,
        "agents": [{"agent": a["agent"], "tokens": [int(p["total_tokens"]) for p in a["series"]]} for a in agents],
    }


def chart_data(data: Mapping[str, Any]) -> str:
    """The charts' numbers as a JSON data block (`#usage-data`) that static/dashboard.js draws from.

    Safe inside HTML: `<`, `>` and `&` are written as JSON escapes (`\\u003c`, ...), so no value (an
    agent called `</script>`) can end the element or open a comment; JSON.parse reads them back."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<script type="application/json" id="usage-data">{text}</script>'


def _share_cell(row: Mapping[str, Any]) -> str:
    share = "no budget" if row["share"] is None else f"{row['share']:.0%}"
    return f'<span class="level {row["level"]}">{share}</span>'


def budget_chart(rows: Sequence[Mapping[str, Any]]) -> str:
    """Today's usage against the daily budget, one bar per agent: a canvas the script draws on, and
    the same numbers as a table (readable without the script)."""
    if not rows:
        return '<p class="empty">no agents</p>'
    table = _table(
        ("agent", "used today", "daily budget", "share"),
        [(_e(r["agent"]), f"{r['used']:,}", f"{r['budget']:,}", _share_cell(r)) for r in rows],
        "no agents",
        "numbers",
    )
    return (
        '<div class="chart-box bars"><canvas id="usage-today-chart" role="img" '
        'aria-label="tokens used today per agent against its daily budget">'
        "<p>Tokens used today per agent against its daily budget: the table below has the numbers.</p>"
        f"</canvas></div>{table}"
    )


def usage_lines(days: Mapping[str, Any]) -> str:
    """Tokens per day per agent, one line each: a canvas the script draws on, and the numbers as a
    table of days by agents (folded away: thirty rows)."""
    agents, labels = days.get("agents", []), days.get("days", [])
    if not agents or not labels:
        return '<p class="empty">no usage</p>'
    rows = [(_e(day), *(f"{a['tokens'][i]:,}" for a in agents)) for i, day in enumerate(labels)]
    table = _table(("day", *(a["agent"] for a in agents)), rows, "no usage", "numbers")
    return (
        '<div class="chart-box lines"><canvas id="usage-days-chart" role="img" '
        f'aria-label="tokens per day per agent, last {len(labels)} days">'
        f"<p>Tokens per day per agent over the last {len(labels)} days: the table below has the numbers.</p>"
        f"</canvas></div><details><summary>Tokens per day (table)</summary>{table}</details>"
    )


def graph_stats(stats: Mapping[str, Any]) -> str:
    """The graph's size: nodes by kind, edges by relation, the worker's backlog."""
    nodes, edges = stats.get("nodes", {}), stats.get("edges", {})
    kinds = ", ".join(f"{_e(k)} {_e(v)}" for k, v in (nodes.get("by_kind") or {}).items() if v)
    relations = ", ".join(f"{_e(k)} {_e(v)}" for k, v in (edges.get("by_relation") or {}).items() if v)
    return (
        '<section id="graph-stats"><h2>Graph</h2><dl>'
        f'<dt>nodes</dt><dd id="graph-nodes">{_e(nodes.get("total", 0))}</dd><dd>{kinds}</dd>'
        f'<dt>edges</dt><dd id="graph-edges">{_e(edges.get("total", 0))}</dd><dd>{relations}</dd>'
        f"<dt>indexing backlog</dt><dd>{_e(nodes.get('pending_embedding', 0))} to embed, "
        f"{_e(nodes.get('pending_linking', 0))} to link, {_e(nodes.get('needs_review', 0))} need review</dd>"
        f"<dt>version</dt><dd>{_e(stats.get('version'))}</dd></dl></section>"
    )


def overview(data: Mapping[str, Any], now: datetime | None = None) -> str:
    """The overview page's body."""
    usage = data["usage"]
    rows = today_rows(usage.get("budget_status") or {})
    return (
        handoffs_by_urgency(data["handoffs"]["items"], now)
        + alerts(data["alerts"], now)
        + f'<section id="usage-today"><h2>Usage today ({_e(usage.get("time_zone"))})</h2>'
        + budget_chart(rows)
        + '<p><a href="/dashboard/usage">Last 30 days</a></p></section>'
        + chart_data({"today": rows})
        + graph_stats(data["graph"])
    )


def usage(today: Mapping[str, Any], series: Mapping[str, Any]) -> str:
    """The usage page's body: today against budgets, and the last days per agent."""
    rows, days = today_rows(today.get("budget_status") or {}), day_series(series)
    return (
        f'<section id="usage-today"><h2>Today ({_e(today.get("time_zone"))})</h2>{budget_chart(rows)}</section>'
        f'<section id="usage-days"><h2>Last {_e(series.get("days"))} days</h2>{usage_lines(days)}</section>'
        + chart_data({"today": rows, "days": days})
    )


def agent_picker(path: str, agents: Sequence[str], current: str) -> str:
    """Links to the same page for each agent."""
    links = " ".join(
        f'<a href="{path}?agent={quote(a)}"{" class=current" if a == current else ""}>{_e(a)}</a>' for a in agents
    )
    return f'<p class="agents">Agent: {links}</p>'


def neighbourhood(agent: str, data: Mapping[str, Any]) -> str:
    """An agent's node and its neighbours, drawn around it (inline SVG), and listed."""
    node = data.get("node")
    if node is None:
        return f'<p class="empty">agent {_e(agent)} has no node in the graph yet</p>'
    items = list(data.get("items", []))
    size, centre, radius = 560, 280, 210
    shapes, rows = [], []
    for i, item in enumerate(items):
        memory = item["memory"]
        angle = 2 * math.pi * i / max(len(items), 1)
        x, y = centre + radius * math.cos(angle), centre + radius * math.sin(angle)
        weight = float(item.get("weight") or 0)
        shapes.append(
            f'<line x1="{centre}" y1="{centre}" x2="{x:.1f}" y2="{y:.1f}" stroke="#94a3b8" '
            f'stroke-width="{0.5 + 3 * weight:.1f}"/>'
            f'<g class="node" data-kind="{_e(memory.get("kind"))}">'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="7" fill="#2563eb"/>'
            f'<text x="{x:.1f}" y="{y - 10:.1f}" text-anchor="middle">{_e((memory.get("title") or "")[:28])}</text></g>'
        )
        cells = (memory.get("kind"), memory.get("title"), item.get("relation"), item.get("direction"))
        rows.append((*(_e(c) for c in cells), f"{weight:.2f}"))
    svg = (
        f'<svg class="graph" role="img" aria-label="neighbourhood of {_e(agent)}" viewBox="0 0 {size} {size}" '
        f'width="{size}" height="{size}" font-size="10">{"".join(shapes)}'
        f'<circle cx="{centre}" cy="{centre}" r="12" fill="#dc2626"/>'
        f'<text x="{centre}" y="{centre + 28}" text-anchor="middle" font-weight="bold">'
        f"{_e(node.get('title'))}</text></svg>"
    )
    table = _table(("kind", "title", "relation", "direction", "weight"), rows, "no neighbours", "neighbours")
    return f'<section id="neighbourhood"><h2>Neighbourhood of {_e(agent)} ({len(items)})</h2>{svg}{table}</section>'


def briefing(data: Mapping[str, Any]) -> str:
    """A briefing preview: its text as the agent would read it, and its size."""
    return (
        f'<section id="briefing"><p>{_e(data.get("nodes_consulted"))} nodes consulted, {_e(data.get("chars"))} '
        f"characters, {_e(data.get('tokens'))} tokens, scope {_e(data.get('scope'))}, generated "
        f'{_e(data.get("generated_at"))}</p><pre id="briefing-text">{_e(data.get("text"))}</pre></section>'
    )


def contacts(found: Mapping[str, Any], search: str | None) -> str:
    """The contact search page."""
    rows = [
        (_contact_link(c, c["id"]), _e(c.get("company_name")), _e(c.get("stage")), _e(c.get("owner_agent")),
         _e(c.get("last_touch_at")))
        for c in found.get("items", [])
    ]  # fmt: skip
    form = (
        '<form method="get" action="/dashboard/contacts"><input name="search" '
        f'value="{_e(search)}" placeholder="name, email or company"> <button>Search</button></form>'
    )
    return form + _table(("name", "company", "stage", "owner", "last touch"), rows, "no contacts", "contacts")


def contact(data: Mapping[str, Any], now: datetime | None = None) -> str:
    """A contact: its record, its context at levels 0-2, its interactions and handoffs."""
    c = data["contact"]
    levels = "".join(
        f'<section class="level" id="level-{_e(lv.get("level"))}"><h3>Level {_e(lv.get("level"))}: '
        f"{_e(lv.get('token_count'))} / {_e(lv.get('token_budget'))} tokens"
        f"{' (stale)' if lv.get('is_stale') else ''}</h3>"
        f"<pre>{_e(_context_text(lv))}</pre></section>"
        for lv in data["levels"]
    )
    interactions = [
        (_e(i.get("occurred_at")), _e(i.get("type")), _e(i.get("agent") or i.get("human_id")), _e(i.get("subject")),
         _e(i.get("summary")))
        for i in data["interactions"].get("items", [])
    ]  # fmt: skip
    handoffs = [
        (_e(h.get("created_at")), _e(h.get("status")), _e(h.get("urgency")), _e(h.get("from_agent")),
         _e(h.get("to_agent") or h.get("to_human_id")), _e(h.get("reason")), _e(age(h.get("created_at"), now)))
        for h in data["handoffs"].get("items", [])
    ]  # fmt: skip
    return (
        f'<section id="contact"><dl><dt>email</dt><dd>{_e(c.get("email"))}</dd>'
        f"<dt>phone</dt><dd>{_e(c.get('phone'))}</dd>"
        f"<dt>company</dt><dd>{_e(c.get('company_name'))}</dd><dt>stage</dt><dd>{_e(c.get('stage'))}</dd>"
        f"<dt>owner</dt><dd>{_e(c.get('owner_agent') or c.get('owner_human_id'))}</dd></dl></section>"
        f'<section id="context"><h2>Context</h2>{levels}</section>'
        f'<section id="interactions"><h2>Interactions</h2>'
        + _table(("when", "type", "by", "subject", "summary"), interactions, "no interactions")
        + '</section><section id="contact-handoffs"><h2>Handoffs</h2>'
        + _table(("created", "status", "urgency", "from", "to", "reason", "age"), handoffs, "no handoffs")
        + "</section>"
    )


_CONTEXT_PARTS = ("header", "context", "last_handoff", "recent_interactions", "history")


def _context_text(level: Mapping[str, Any]) -> str:
    shown = {k: v for k, v in level.items() if k in _CONTEXT_PARTS}
    return json.dumps(shown, indent=2, ensure_ascii=False, default=str)
