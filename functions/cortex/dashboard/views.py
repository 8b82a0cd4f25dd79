"""The dashboard's HTML, rendered on the server: plain pages, charts as inline SVG.

No template engine and no chart library: each page is a few small functions that escape every
value they print (`_e`), and the charts are SVG drawn here from the numbers, so a page needs no
script to show its data and nothing is fetched from the network. The one script
(static/dashboard.js) signs in and keeps the page live.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import quote

URGENCIES = ("urgent", "high", "normal", "low")
_PALETTE = ("#2563eb", "#16a34a", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#be185d", "#4b5563")
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


def layout(title: str, body: str, session: Mapping[str, Any] | None, *, live: bool = True) -> str:
    """A whole page: the header (tenant, agent, navigation, sign-out) and `body` in <main id="live">."""
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
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{_e(title)} · Cortex</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="stylesheet" href="/dashboard/static/dashboard.css">'
        '<script src="/dashboard/static/dashboard.js" defer></script></head>'
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


def budget_bars(budget_status: Mapping[str, Mapping[str, Any]]) -> str:
    """Today's usage against the daily budget, one bar per agent (inline SVG)."""
    names = sorted(budget_status)
    if not names:
        return '<p class="empty">no agents</p>'
    width, row, label, bar = 680, 26, 120, 360
    bars = []
    for i, name in enumerate(names):
        used, budget = int(budget_status[name].get("used", 0)), int(budget_status[name].get("budget", 0))
        share = used / budget if budget else (1.0 if used else 0.0)
        filled = min(share, 1.0) * bar
        colour = "#dc2626" if share > 1 else "#d97706" if share > 0.8 else "#16a34a"
        y = i * row
        bars.append(
            f'<g class="bar" data-agent="{_e(name)}"><text x="0" y="{y + 17}">{_e(name)}</text>'
            f'<rect x="{label}" y="{y + 4}" width="{bar}" height="16" fill="#e5e7eb"/>'
            f'<rect x="{label}" y="{y + 4}" width="{filled:.1f}" height="16" fill="{colour}"/>'
            f'<text x="{label + bar + 10}" y="{y + 17}">{used:,} / {budget:,} ({share:.0%})</text></g>'
        )
    height = row * len(names)
    return (
        f'<svg class="chart" role="img" aria-label="usage today against budgets" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-size="12">{"".join(bars)}</svg>'
    )


def usage_lines(series: Mapping[str, Any]) -> str:
    """Tokens per day per agent over the period, one line each, with a legend (inline SVG)."""
    agents = [a for a in series.get("agents", [])]
    days = int(series.get("days", 0))
    if not agents or days == 0:
        return '<p class="empty">no usage</p>'
    width, height, left, bottom = 720, 260, 60, 30
    peak = max([p["total_tokens"] for a in agents for p in a["series"]] + [100])  # an axis of 0..100 at least
    scale = 10 ** max(0, len(str(peak)) - 1)
    top = math.ceil(peak / scale) * scale
    step = (width - left - 10) / max(days - 1, 1)

    def y(v: float) -> float:
        return float(height - bottom - (height - bottom - 10) * v / top)

    lines, legend = [], []
    for i, a in enumerate(agents):
        colour = _PALETTE[i % len(_PALETTE)]
        points = " ".join(f"{left + j * step:.1f},{y(p['total_tokens']):.1f}" for j, p in enumerate(a["series"]))
        lines.append(f'<polyline class="line" data-agent="{_e(a["agent"])}" fill="none" stroke="{colour}" '
                     f'stroke-width="2" points="{points}"/>')  # fmt: skip
        # A swatch drawn in SVG: the pages' CSP allows no inline style attributes.
        legend.append(
            f'<span class="key"><svg width="10" height="10" aria-hidden="true"><rect width="10" height="10" '
            f'fill="{colour}"/></svg> {_e(a["agent"])}</span>'
        )
    grid = "".join(
        f'<line x1="{left}" x2="{width - 10}" y1="{y(top * k / 4):.1f}" y2="{y(top * k / 4):.1f}" stroke="#e5e7eb"/>'
        f'<text x="{left - 6}" y="{y(top * k / 4) + 4:.1f}" text-anchor="end">{int(top * k / 4):,}</text>'
        for k in range(5)
    )
    first, last = agents[0]["series"][0]["day"], agents[0]["series"][-1]["day"]
    axis = (
        f'<text x="{left}" y="{height - 8}">{_e(first)}</text>'
        f'<text x="{width - 10}" y="{height - 8}" text-anchor="end">{_e(last)}</text>'
    )
    return (
        f'<svg class="chart" role="img" aria-label="tokens per day, last {days} days" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" font-size="11">{grid}{"".join(lines)}{axis}</svg>'
        f'<p class="legend">{"".join(legend)}</p>'
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
    return (
        handoffs_by_urgency(data["handoffs"]["items"], now)
        + alerts(data["alerts"], now)
        + f'<section id="usage-today"><h2>Usage today ({_e(usage.get("time_zone"))})</h2>'
        + budget_bars(usage.get("budget_status") or {})
        + '<p><a href="/dashboard/usage">Last 30 days</a></p></section>'
        + graph_stats(data["graph"])
    )


def usage(today: Mapping[str, Any], series: Mapping[str, Any]) -> str:
    """The usage page's body: today against budgets, and the last days per agent."""
    return (
        f'<section id="usage-today"><h2>Today</h2>{budget_bars(today.get("budget_status") or {})}</section>'
        f'<section id="usage-days"><h2>Last {_e(series.get("days"))} days</h2>{usage_lines(series)}</section>'
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
