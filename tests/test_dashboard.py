"""Dashboard (issue 12): who may sign in, what each page shows, and the live events.

Sign-in, refusals and pages run on the test client against a real database; the live path is
proved at the hub (one LISTEN connection, events handed to their tenant only) and end to end in
headless Chromium against `cortex serve`: a monitor signs in, a handoff created over the API
appears on the open page without a reload.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from cortex import db
from cortex.cli import main
from cortex.config import get_settings
from cortex.dashboard import live, service, views
from cortex.db import agent_claims, call
from cortex.errors import CortexError
from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import AsAgent, Tenant, cortex_serve

SESSION = "/api/v1/dashboard/session"
PAGES = (
    "/dashboard",
    "/dashboard/usage",
    "/dashboard/graph",
    "/dashboard/briefing",
    "/dashboard/contacts",
    "/dashboard/contacts/00000000-0000-0000-0000-000000000001",
)
API = ("/api/v1/dashboard/events", "/api/v1/dashboard/usage", SESSION)


# --- helpers ------------------------------------------------------------------------------------------


def system_key(admin: Any, tenant: Tenant) -> str:
    """A key of the tenant's admin agent, `system`."""
    key: str = admin.execute("select cortex.create_agent_key(%s, 'system') as k", (tenant.id,)).fetchone()["k"]
    return key


def sign_in(client: TestClient, key: str) -> dict[str, Any]:
    """Signs the test client in (its cookie jar keeps the session)."""
    response = client.post(SESSION, json={"key": key})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def handoff(as_agent: AsAgent, tenant: Tenant, contact_id: str, urgency: str, summary: str) -> dict[str, Any]:
    """A pending handoff from luna to jasper (context summary given: no model call)."""
    with as_agent(tenant, "luna") as conn:
        result: dict[str, Any] = call(
            conn,
            "create_handoff",
            contact_id=contact_id,
            to_agent="jasper",
            reason="warm_reply",
            urgency=urgency,
            context_summary=summary,
        )
    return result


def section(html: str, element_id: str) -> str:
    """The HTML of the element with this id (up to its closing </section> or </svg>)."""
    match = re.search(rf'<(section|svg)[^>]*id="{element_id}".*?</\1>', html, re.S)
    assert match, f"no #{element_id} in the page"
    return match.group(0)


def usage_data(html: str) -> dict[str, Any]:
    """The charts' numbers the page carries (its JSON data block, `#usage-data`)."""
    match = re.search(r'<script type="application/json" id="usage-data">(.*?)</script>', html, re.S)
    assert match, "no #usage-data in the page"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def record_usage(base: str, key: str, input_tokens: int, output_tokens: int) -> httpx.Response:
    """A model call of the key's agent, recorded over the API (POST /api/v1/usage)."""
    body = {"model": "claude-haiku-4-5", "operation": "write_email", "input_tokens": input_tokens,
            "output_tokens": output_tokens}  # fmt: skip
    return httpx.post(f"{base}/api/v1/usage", headers=bearer(key), json=body, timeout=30)


AGENTS = ["anna", "helios", "jasper", "luna", "mia", "system"]


# --- signing in and the refusals ----------------------------------------------------------------------


def test_a_monitor_key_signs_in_for_an_http_only_strict_cookie_stored_only_as_its_hash(
    client: TestClient, tenant: Tenant, admin: Any
) -> None:
    response = client.post(SESSION, json={"key": tenant.keys["helios"]})
    assert response.status_code == 200
    who = body_of(response)
    assert (who["agent"], who["role"], who["tenant_id"], who["read_only"]) == ("helios", "monitor", tenant.id, True)
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{service.COOKIE}=dsh_")
    assert {"HttpOnly", "SameSite=Strict", "Path=/", f"Max-Age={service.SESSION_SECONDS}"} <= {
        part.strip() for part in cookie.split(";")
    }
    token = cookie.split(";")[0].split("=", 1)[1]
    stored = admin.execute("select tenant_id, agent, token_hash from cortex.dashboard_sessions").fetchall()
    assert [(str(r["tenant_id"]), r["agent"]) for r in stored] == [(tenant.id, "helios")]
    assert token.encode() not in bytes(stored[0]["token_hash"])
    assert client.get(SESSION).json()["agent"] == "helios"


def test_an_operator_ends_the_tenants_dashboard_sessions_from_the_cli(
    client: TestClient, tenant: Tenant, dsn: str
) -> None:
    sign_in(client, tenant.keys["helios"])
    result = CliRunner().invoke(main, ["--json", "--tenant", tenant.slug, "dashboard", "sign-out"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"signed_out": 1}
    assert client.get(SESSION).status_code == 401


def test_an_admin_key_signs_in_too_and_an_expired_session_is_refused(
    client: TestClient, tenant: Tenant, admin: Any
) -> None:
    assert sign_in(client, system_key(admin, tenant))["role"] == "admin"
    assert client.get("/dashboard", follow_redirects=False).status_code == 200
    admin.execute("update cortex.dashboard_sessions set created_at = now() - interval '2 days', expires_at = now()")
    assert client.get(SESSION).status_code == 401
    assert client.get("/dashboard", follow_redirects=False).status_code == 303


def test_signing_in_is_refused_without_an_admin_or_monitor_key(
    client: TestClient, tenant: Tenant, admin: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    service_key = "svc_" + "k" * 40
    monkeypatch.setenv("CORTEX_SERVICE_KEY", service_key)
    get_settings.cache_clear()
    cases = {
        "no key": ({}, 422),
        "empty key": ({"key": ""}, 422),
        "unknown key": ({"key": "ctx_nope_" + "0" * 40}, 401),
        "garbage": ({"key": "not-a-key"}, 401),
        "an agent's key": ({"key": tenant.keys["luna"]}, 403),
        "the service key": ({"key": service_key}, 403),
    }
    for case, (body, status) in cases.items():
        response = client.post(SESSION, json=body)
        assert response.status_code == status, case
        error = error_of(response)
        assert error["field"] == "key" and error["message"], case
        assert "set-cookie" not in response.headers, case
    assert "may not use the dashboard" in error_of(client.post(SESSION, json={"key": tenant.keys["luna"]}))["message"]
    # A cross-site form can post text/plain; sign-in takes JSON only.
    plain = client.post(
        SESSION, content=f'{{"key": "{tenant.keys["helios"]}"}}', headers={"Content-Type": "text/plain"}
    )
    assert plain.status_code == 415 and error_of(plain)["field"] == "body" and "set-cookie" not in plain.headers
    assert admin.execute("select count(*) as n from cortex.dashboard_sessions").fetchone()["n"] == 0
    get_settings.cache_clear()


def test_without_a_session_pages_send_the_browser_to_sign_in_and_the_api_is_401_naming_the_cookie(
    client: TestClient, tenant: Tenant
) -> None:
    for path in PAGES:
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303, path
        assert response.headers["location"].startswith("/dashboard/sign-in?next=/dashboard"), path
    page = client.get(response.headers["location"])
    assert page.status_code == 200
    assert 'id="sign-in"' in page.text and "admin or monitor" in page.text
    alias = client.get("/api/v1/dashboard/pages/usage", follow_redirects=False)
    assert (alias.status_code, alias.headers["location"]) == (303, "/dashboard/sign-in")
    assert client.get("/dashboard/sign-in", params={"next": "https://evil.example/"}).status_code == 422
    for path in API:
        for cookies in ({}, {service.COOKIE: "dsh_forged"}, {service.COOKIE: "x" * 5000}):
            client.cookies.clear()
            client.cookies.update(cookies)
            response = client.get(path)
            assert response.status_code == 401, (path, cookies)
            assert error_of(response)["field"] == "cookie"
    # Authorization is not a session: the pages and the stream read the cookie only.
    client.cookies.clear()
    assert client.get("/dashboard", headers=bearer(tenant.keys["helios"]), follow_redirects=False).status_code == 303
    assert client.get("/api/v1/dashboard/events", headers=bearer(tenant.keys["helios"])).status_code == 401


def test_a_session_ends_when_its_agent_is_demoted_or_disabled_or_signs_out(
    client: TestClient, tenant: Tenant, admin: Any
) -> None:
    sign_in(client, tenant.keys["helios"])
    admin.execute("update cortex.agents set role = 'agent' where tenant_id = %s and name = 'helios'", (tenant.id,))
    assert client.get("/dashboard", follow_redirects=False).status_code == 303
    admin.execute("update cortex.agents set role = 'monitor' where tenant_id = %s and name = 'helios'", (tenant.id,))
    assert client.get("/dashboard", follow_redirects=False).status_code == 200
    admin.execute("update cortex.agents set enabled = false where tenant_id = %s and name = 'helios'", (tenant.id,))
    assert client.get(SESSION).status_code == 401
    admin.execute("update cortex.agents set enabled = true where tenant_id = %s and name = 'helios'", (tenant.id,))
    out = client.delete(SESSION)
    assert out.json() == {"signed_out": True}
    assert "Max-Age=0" in out.headers["set-cookie"]
    assert admin.execute("select count(*) as n from cortex.dashboard_sessions").fetchone()["n"] == 0
    assert client.get(SESSION).status_code == 401


# --- SQL: who may look --------------------------------------------------------------------------------


def test_sql_lets_only_admins_and_monitors_use_the_dashboard(
    tenant: Tenant, as_agent: AsAgent, dsn: str, admin: Any
) -> None:
    with as_agent(tenant, "helios") as conn:
        assert call(conn, "dashboard_session")["role"] == "monitor"
        assert len(call(conn, "dashboard_usage", days=3)["agents"][0]["series"]) == 3
    for function in ("dashboard_session", "dashboard_usage"):
        with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
            call(conn, function)
        assert (err.value.status, err.value.sqlstate, err.value.field) == (403, "42501", "key")
        with pytest.raises(CortexError) as err, psycopg.connect(dsn, autocommit=True) as c, c.transaction():
            c.execute("set local role authenticated")
            call(c, function)
        assert err.value.sqlstate == "28000"
    with pytest.raises(CortexError) as err:
        call(admin, "cortex.open_dashboard_session", p_tenant_id=tenant.id, p_agent="luna", p_ttl_seconds=600)
    assert (err.value.sqlstate, err.value.field) == ("42501", "key")
    for days in (0, 91):
        with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
            call(conn, "dashboard_usage", days=days)
        assert (err.value.status, err.value.field) == (422, "days")


OWNER_ONLY = (
    "cortex.open_dashboard_session",
    "cortex.dashboard_session_claims",
    "cortex.close_dashboard_session",
    "cortex.close_dashboard_sessions",
    "cortex.dashboard_cursor",
    "cortex.dashboard_events",
)


def test_session_and_event_functions_are_the_owners_only(admin: Any) -> None:
    rows = admin.execute(
        "select n.nspname || '.' || p.proname as f, has_function_privilege('authenticated', p.oid, 'execute') as api,"
        " has_function_privilege('anon', p.oid, 'execute') as anon"
        " from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname || '.' || p.proname = any(%s)",
        (list(OWNER_ONLY),),
    ).fetchall()
    assert sorted(r["f"] for r in rows) == sorted(OWNER_ONLY)
    assert not any(r["api"] or r["anon"] for r in rows)


# --- pages --------------------------------------------------------------------------------------------


def test_the_overview_shows_pending_handoffs_by_urgency_with_their_age_alerts_usage_and_graph(
    client: TestClient, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    handoff(as_agent, tenant, contact["id"], "urgent", "Wants a quote today")
    handoff(as_agent, tenant, contact["id"], "low", "Asked about the newsletter")
    with admin.transaction():  # as if made 3 h 5 min ago (the guard trigger keeps recorded fields)
        admin.execute("set local session_replication_role = replica")
        admin.execute("update cortex.handoff_events set created_at = now() - interval '3 hours 5 minutes'")
    admin.execute(
        "insert into cortex.alerts (tenant_id, kind, message) values (%s, 'job_parked', 'summary job 7 parked')",
        (tenant.id,),
    )
    with as_agent(tenant, "luna") as conn:
        call(conn, "record_usage", model="haiku", operation="write_email", input_tokens=700, output_tokens=300)
    sign_in(client, tenant.keys["helios"])
    response = client.get("/dashboard")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in response.headers["content-security-policy"]
    page = response.text
    urgent, low = section(page, "handoffs-urgent"), section(page, "handoffs-low")
    assert "Wants a quote today" in urgent and "John Smith" in urgent and "3 h 5 min" in urgent
    assert "Asked about the newsletter" in low and "Wants a quote today" not in low
    assert "(0)" in section(page, "handoffs-high")
    assert page.index('id="handoffs-urgent"') < page.index('id="handoffs-low"')
    assert "summary job 7 parked" in section(page, "alerts")
    today = section(page, "usage-today")
    assert 'id="usage-today-chart"' in today
    # The numbers without any script: a row per agent.
    assert '<td>luna</td><td>1,000</td><td>100,000</td><td><span class="level ok">1%</span></td>' in today
    rows = usage_data(page)["today"]
    assert [r["agent"] for r in rows] == AGENTS
    assert next(r for r in rows if r["agent"] == "luna") == {
        "agent": "luna", "used": 1000, "budget": 100000, "share": 0.01, "level": "ok"
    }  # fmt: skip
    assert 'id="graph-nodes"' in page
    assert 'data-live="connecting"' in page and "/dashboard/static/dashboard.js?v=" in page
    # The chart library loads before the page's script (both deferred: they run in this order).
    assert page.index("/dashboard/static/chart.umd.min.js?v=") < page.index("/dashboard/static/dashboard.js?v=")
    assert "chart.umd.min.js" not in client.get("/dashboard/contacts").text  # only pages with charts load it


def test_the_usage_page_carries_today_against_budgets_and_thirty_days_per_agent_for_its_charts(
    client: TestClient, tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "record_usage", model="haiku", operation="write_email", input_tokens=4000, output_tokens=1000)
    sign_in(client, tenant.keys["helios"])
    page = client.get("/dashboard/usage").text
    data = usage_data(page)
    assert [(r["agent"], r["used"]) for r in data["today"]] == [(a, 5000 if a == "luna" else 0) for a in AGENTS]
    days = data["days"]
    assert len(days["days"]) == 30 and days["days"] == sorted(days["days"])
    assert [a["agent"] for a in days["agents"]] == AGENTS
    for agent in days["agents"]:
        assert agent["tokens"] == [0] * 29 + [5000 if agent["agent"] == "luna" else 0], agent["agent"]
    assert 'id="usage-today-chart"' in section(page, "usage-today")
    table = section(page, "usage-days")
    assert 'id="usage-days-chart"' in table and "<details>" in table
    assert f"<tr><td>{days['days'][-1]}</td><td>0</td><td>0</td><td>0</td><td>5,000</td>" in table
    series = client.get("/api/v1/dashboard/usage", params={"days": 7}).json()
    luna = next(a for a in series["agents"] if a["agent"] == "luna")
    assert [p["total_tokens"] for p in luna["series"]] == [0] * 6 + [5000]
    assert luna["daily_budget"] == 100000 and series["to"] == luna["series"][-1]["day"]
    for bad in ("0", "91", "x"):
        response = client.get("/api/v1/dashboard/usage", params={"days": bad})
        assert response.status_code == 422 and error_of(response)["field"] == "days"


def test_the_graph_page_shows_an_agents_neighbourhood_without_reinforcing_it(
    client: TestClient, tenant: Tenant, as_agent: AsAgent, admin: Any
) -> None:
    with as_agent(tenant, "luna") as conn:
        node = call(conn, "list_memories", kinds=db.typed(["agent"], "text[]"), agent="luna", limit=1)["items"][0]
        call(
            conn,
            "remember",
            kind="fact",
            title="Luna answers billing questions",
            links=db.Jsonb([{"target_id": node["id"], "relation": "relates_to", "weight": 0.9}]),
        )
    before = admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"]
    sign_in(client, tenant.keys["helios"])
    page = client.get("/dashboard/graph", params={"agent": "luna"}).text
    near = section(page, "neighbourhood")
    assert "Luna answers billing questions" in near and "relates_to" in near
    assert near.count('<g class="node"') == 1
    assert admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"] == before
    assert "Neighbourhood of" in client.get("/dashboard/graph").text  # the first agent by default
    for bad, status in (("Luna!", 422), ("ghost", 422)):
        response = client.get("/dashboard/graph", params={"agent": bad})
        assert response.status_code == status and error_of(response)["field"] == "agent"


def test_the_briefing_page_previews_any_agents_briefing(
    client: TestClient, tenant: Tenant, as_agent: AsAgent, admin: Any
) -> None:
    with as_agent(tenant, "mia") as conn:
        call(
            conn,
            "remember",
            kind="decision",
            title="Mia escalates refunds over 500 EUR",
            importance=db.typed(0.9, "real"),
        )
    sign_in(client, tenant.keys["helios"])
    page = client.get("/dashboard/briefing", params={"agent": "mia"}).text
    text = section(page, "briefing")
    assert "# Cortex Briefing — mia" in text and "Mia escalates refunds over 500 EUR" in text
    assert admin.execute("select count(*) as n from cortex.briefings").fetchone()["n"] == 0  # a preview caches nothing


def test_the_contact_page_shows_context_levels_interactions_and_handoffs(
    client: TestClient, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="email_sent",
            subject="Pricing",
            summary="Asked for a quote",
        )
    handoff(as_agent, tenant, contact["id"], "high", "Ready to buy")
    sign_in(client, tenant.keys["helios"])
    found = client.get("/dashboard/contacts", params={"search": "john"}).text
    assert f'href="/dashboard/contacts/{contact["id"]}"' in found
    page = client.get(f"/dashboard/contacts/{contact['id']}").text
    assert "Contact: John Smith" in page
    for level in (0, 1, 2):
        assert f"Level {level}:" in section(page, f"level-{level}")
    assert "Acme Corp" in section(page, "level-0")
    assert "Asked for a quote" in section(page, "interactions")
    assert "pending" in section(page, "contact-handoffs") and "high" in section(page, "contact-handoffs")


def test_another_tenants_contact_is_404_and_its_data_never_shows(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    handoff(as_agent, tenant, contact["id"], "urgent", "First tenant's secret handoff")
    sign_in(client, other_tenant.keys["helios"])
    response = client.get(f"/dashboard/contacts/{contact['id']}")
    assert response.status_code == 404 and error_of(response)["field"] == "contact_id"
    assert "secret handoff" not in client.get("/dashboard").text
    assert "John Smith" not in client.get("/dashboard/contacts").text
    bad = client.get("/dashboard/contacts/not-a-uuid")
    assert bad.status_code == 422 and error_of(bad)["field"] == "contact_id"


def test_pages_escape_what_agents_wrote(client: TestClient, tenant: Tenant, as_agent: AsAgent) -> None:
    with as_agent(tenant, "luna") as conn:
        evil = call(conn, "upsert_contact", email="x@evil.example", name="<script>alert(1)</script>")
    handoff(as_agent, tenant, evil["id"], "urgent", '"><img src=x onerror=alert(1)>')
    sign_in(client, tenant.keys["helios"])
    page = client.get("/dashboard").text
    assert "<script>alert(1)</script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_static_files_are_served_from_the_package_and_nothing_else(client: TestClient) -> None:
    script = client.get("/dashboard/static/dashboard.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert "EventSource" in script.text and "setInterval" not in script.text  # live by events, no polling
    assert client.get("/dashboard/static/dashboard.css").headers["content-type"].startswith("text/css")
    for name in ("../app.py", "other.js", "dashboard.py", "chart.umd.js", "chart.umd.min.js.map"):
        assert client.get(f"/dashboard/static/{name}").status_code in (404, 422)


CHART_JS_SHA256 = "87364cc2b2a76a6684929e7d6b80b18a897794db38400caff1fcf1791c6925d2"  # npm chart.js@4.6.1


def test_the_vendored_chart_library_is_served_as_javascript_and_cached_by_its_version(client: TestClient) -> None:
    import hashlib

    shipped = Path(views.__file__).parent / "static" / "chart.umd.min.js"
    assert hashlib.sha256(shipped.read_bytes()).hexdigest() == CHART_JS_SHA256  # as published, unchanged
    assert CHART_JS_SHA256 in (Path(__file__).parents[1] / "docs" / "dashboard.md").read_text()
    plain = client.get("/dashboard/static/chart.umd.min.js")
    assert plain.status_code == 200
    assert plain.headers["content-type"] == "text/javascript; charset=utf-8"
    assert plain.headers["x-content-type-options"] == "nosniff"
    assert plain.content == shipped.read_bytes() and len(plain.content) > 200_000
    assert plain.text.startswith("/*!\n * Chart.js v4.6.1\n")
    assert plain.headers["cache-control"] == "no-cache"  # an unversioned URL: ask again each time
    versioned = client.get(views.static_url("chart.umd.min.js"))
    assert versioned.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert versioned.content == plain.content
    stale = client.get("/dashboard/static/chart.umd.min.js", params={"v": "0123456789ab"})
    assert stale.headers["cache-control"] == "no-cache"  # another version's URL is not this file forever
    assert client.get("/dashboard/static/chart.umd.min.js", params={"v": "<x>"}).status_code == 422
    licence = client.get("/dashboard/static/chart.js.LICENSE.md")
    assert licence.headers["content-type"].startswith("text/plain") and "The MIT License" in licence.text
    assert client.get("/dashboard/sign-in").headers["cache-control"] == "no-store"  # pages are never cached


def test_chart_data_is_embedded_so_that_no_agent_name_can_end_the_script_element() -> None:
    hostile = "</script><script>alert(1)</script><!--"
    body = views.usage(
        {"budget_status": {hostile: {"used": 5, "budget": 10}}},
        {"days": 1, "agents": [{"agent": hostile, "series": [{"day": "2026-11-23", "total_tokens": 5}]}]},
    )
    block = re.search(r'<script type="application/json" id="usage-data">(.*?)</script>', body, re.S)
    assert block is not None
    assert "<" not in block.group(1) and ">" not in block.group(1)  # the element ends only where it should
    data = json.loads(block.group(1))
    assert data["today"][0]["agent"] == hostile and data["days"]["agents"][0]["agent"] == hostile
    assert body.count("<script") == 1 and "<script>alert" not in body  # the tables escape it too
    assert "&lt;/script&gt;" in body


def test_bars_are_green_to_80_percent_amber_to_100_and_red_beyond() -> None:
    status = {
        "a": {"used": 80000, "budget": 100000},
        "b": {"used": 80001, "budget": 100000},
        "c": {"used": 100000, "budget": 100000},
        "d": {"used": 100001, "budget": 100000},
        "e": {"used": 5, "budget": 0},
        "f": {"used": 0, "budget": 0},
    }
    rows = views.today_rows(status)
    assert [(r["agent"], r["level"]) for r in rows] == [
        ("a", "ok"), ("b", "near"), ("c", "near"), ("d", "over"), ("e", "over"), ("f", "ok")
    ]  # fmt: skip
    assert [r["share"] for r in rows][:4] == [0.8, 0.80001, 1.0, 1.00001] and rows[4]["share"] is None


def test_ages_read_as_a_person_would_say_them() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    ages = [views.age(now - timedelta(seconds=s), now) for s in (5, 600, 3 * 3600 + 300, 2 * 86400 + 4 * 3600)]
    assert ages == ["5 s", "10 min", "3 h 5 min", "2 d 4 h"]


# --- live: the hub and the stream ---------------------------------------------------------------------


def test_the_hub_hands_each_tenant_only_its_own_events(
    dsn: str, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, make_tenant: Any
) -> None:
    with as_agent(other_tenant, "luna") as conn:
        theirs = call(conn, "upsert_contact", email="z@globex.example", name="Zed")

    async def scenario() -> tuple[list[live.Change], list[live.Change], int]:
        hub = live.hub()
        try:
            async with hub.subscribe(tenant.id) as mine, hub.subscribe(other_tenant.id) as other:
                created = handoff(as_agent, other_tenant, theirs["id"], "normal", "theirs")
                with as_agent(tenant, "luna") as conn:
                    contact = call(conn, "upsert_contact", email="a@acme.example", name="Ann")
                ours = handoff(as_agent, tenant, contact["id"], "urgent", "ours")
                got_mine = [await asyncio.wait_for(mine.get(), 10)]
                got_other = [await asyncio.wait_for(other.get(), 10)]
                await asyncio.sleep(0.3)  # anything else already read would be queued by now
                while not mine.empty():
                    got_mine.append(mine.get_nowait())
                while not other.empty():
                    got_other.append(other.get_nowait())
                assert got_mine[0].subject == ours["id"] and got_other[0].subject == created["id"]
                return got_mine, got_other, hub.subscribers
        finally:
            await db.aclose_pool()

    got_mine, got_other, open_subscriptions = asyncio.run(scenario())
    assert [(c.tenant_id, c.event) for c in got_mine] == [(tenant.id, "handoff.created")]
    assert [(c.tenant_id, c.event) for c in got_other] == [(other_tenant.id, "handoff.created")]
    assert open_subscriptions == 2


def test_the_event_stream_says_ready_then_each_change_of_its_tenant_then_expired(
    dsn: str, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    from datetime import UTC, datetime, timedelta

    from cortex.dashboard.routes import event_stream

    async def scenario() -> list[bytes]:
        ends = datetime.now(UTC) + timedelta(seconds=3)
        stream = event_stream(service.Session(agent_claims(tenant.id, "helios"), ends, "dsh_test"))
        try:
            chunks = [await anext(stream)]
            made = handoff(as_agent, tenant, contact["id"], "high", "over the stream")
            chunks.append(await asyncio.wait_for(anext(stream), 10))
            chunks.extend([chunk async for chunk in stream])  # until the session's end
            assert made["id"].encode() in chunks[1]
            return chunks
        finally:
            await stream.aclose()
            await db.aclose_pool()

    ready, change, *rest = asyncio.run(scenario())
    assert ready.startswith(b"retry: 3000\nevent: ready\n") and ready.endswith(b"\n\n")
    assert re.fullmatch(
        rb'event: change\nid: \d+\ndata: \{"id":\d+,"event":"handoff.created","subject":"[0-9a-f-]{36}"\}\n\n', change
    )
    assert rest[-1] == b'event: expired\ndata: {"sign_in":"/dashboard/sign-in"}\n\n'
    assert all(chunk == b": keep-alive\n\n" for chunk in rest[:-1])


# --- in a browser -------------------------------------------------------------------------------------


@pytest.fixture
def chrome() -> Iterator[Any]:
    """Headless Chromium (Debian's), driven by selenium, with a throwaway profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="cortex-chrome-")
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                 "--window-size=1280,1000"):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # CSP violations and script errors
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# What a page's Chart.js chart holds (null when none is drawn on the canvas).
CHART = """
var chart = Chart.getChart(document.getElementById(arguments[0]));
if (!chart) { return null; }
return {id: chart.id, type: chart.config.type, labels: chart.data.labels,
        datasets: chart.data.datasets.map(function (d) {
          return {label: d.label, data: d.data, colour: d.backgroundColor}; }),
        instances: Object.keys(Chart.instances).length, width: chart.width, height: chart.height};
"""
AMBER, GREEN = "#d97706", "#16a34a"


@pytest.mark.slow
def test_a_monitor_signs_in_sees_a_handoff_appear_live_and_the_usage_charts_in_chromium(
    dsn: str, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], chrome: Any, tmp_path: Path
) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    shots = Path(os.environ.get("CORTEX_SCREENSHOTS") or tmp_path)
    # Pages navigate and <main> is swapped under the driver: each check looks its element up afresh.
    wait = WebDriverWait(chrome, 20, ignored_exceptions=(StaleElementReferenceException,))

    def text(element_id: str) -> str:
        return str(chrome.execute_script(f"return document.getElementById('{element_id}').textContent"))

    def live_state() -> Any:
        return chrome.execute_script("return [document.body.dataset.live, document.body.dataset.updates]")

    def chart(canvas_id: str) -> Any:
        return chrome.execute_script(CHART, canvas_id)

    def used_by(drawn: Any) -> dict[str, int]:
        return dict(zip(drawn["labels"], drawn["datasets"][0]["data"], strict=True))

    with cortex_serve(dsn, tmp_path / "serve.log", CORTEX_EMBEDDINGS="none") as base:
        assert record_usage(base, tenant.keys["luna"], 60000, 25000).status_code == 201  # 85 % of 100,000

        chrome.get(f"{base}/dashboard")  # no session: the sign-in page
        wait.until(ec.presence_of_element_located((By.ID, "sign-in")))
        chrome.find_element(By.ID, "key").send_keys(tenant.keys["luna"])
        chrome.find_element(By.ID, "sign-in-button").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "sign-in-error"), "may not use the dashboard"))
        chrome.save_screenshot(str(shots / "dashboard-refused.png"))

        key = chrome.find_element(By.ID, "key")
        key.clear()
        key.send_keys(tenant.keys["helios"])
        chrome.find_element(By.ID, "sign-in-button").click()
        wait.until(lambda d: live_state()[0] == "connected")
        assert "Pending handoffs (0)" in text("handoffs")
        # Today against budgets: a Chart.js bar per agent, drawn from the page's data.
        today = wait.until(lambda d: chart("usage-today-chart"))
        assert (today["type"], today["labels"]) == ("bar", AGENTS)
        assert used_by(today) == {a: 85000 if a == "luna" else 0 for a in AGENTS}
        assert [d["label"] for d in today["datasets"]] == ["used today", "daily budget"]
        assert today["datasets"][1]["data"][AGENTS.index("luna")] == 100000
        assert today["datasets"][0]["colour"][AGENTS.index("luna")] == AMBER  # over 80 %
        assert today["datasets"][0]["colour"][AGENTS.index("anna")] == GREEN
        assert today["width"] > 300 and today["height"] > 150
        chrome.save_screenshot(str(shots / "dashboard-before.png"))

        created = httpx.post(
            f"{base}/api/v1/handoffs",
            headers=bearer(tenant.keys["luna"]),
            json={
                "contact_id": contact["id"],
                "to_agent": "jasper",
                "reason": "warm_reply",
                "urgency": "urgent",
                "context_summary": "Replied warmly, wants a call back today",
            },
            timeout=30,
        )
        assert created.status_code == 201, created.text
        wait.until(ec.text_to_be_present_in_element((By.ID, "handoffs-urgent"), "wants a call back today"))
        assert "Pending handoffs (1)" in text("handoffs")
        assert live_state() == ["connected", "1"]  # no reload: one event, one re-read of the page
        redrawn = chart("usage-today-chart")  # the swapped <main> has its chart: a new one, the old destroyed
        assert redrawn["id"] != today["id"] and redrawn["instances"] == 1 and used_by(redrawn) == used_by(today)
        chrome.save_screenshot(str(shots / "dashboard-live.png"))
        assert chrome.get_cookie(service.COOKIE)["httpOnly"] is True
        assert chrome.execute_script("return document.cookie") == ""  # the script cannot read the session

        chrome.get(f"{base}/dashboard/usage")
        wait.until(lambda d: live_state()[0] == "connected")
        days = wait.until(lambda d: chart("usage-days-chart"))
        assert days["type"] == "line" and len(days["labels"]) == 30
        assert [d["label"] for d in days["datasets"]] == AGENTS  # one line per agent
        for line in days["datasets"]:
            assert line["data"] == [0] * 29 + [85000 if line["label"] == "luna" else 0], line["label"]
        assert used_by(chart("usage-today-chart"))["luna"] == 85000
        chrome.save_screenshot(str(shots / "dashboard-usage.png"))

        # Usage alone announces nothing; the refused call after it does (budget.exceeded): the page
        # re-reads itself and both charts are drawn again from the new numbers.
        assert record_usage(base, tenant.keys["luna"], 8000, 2000).status_code == 201  # 95,000
        assert record_usage(base, tenant.keys["luna"], 10000, 0).status_code == 429  # refused, not spent
        wait.until(lambda d: int(live_state()[1] or 0) >= 1)  # budget.exceeded (and the alert it raises)
        wait.until(lambda d: used_by(chart("usage-today-chart"))["luna"] == 95000)
        later = chart("usage-days-chart")
        assert later["id"] != days["id"] and later["datasets"][AGENTS.index("luna")]["data"][-1] == 95000
        assert later["instances"] == 2  # the two charts of the page, none left over
        chrome.save_screenshot(str(shots / "dashboard-usage-live.png"))
        chrome.execute_script("document.getElementById('usage-days').scrollIntoView()")
        chrome.find_element(By.ID, "usage-days").screenshot(str(shots / "dashboard-usage-days.png"))

        flagged = ("Content Security Policy", "Uncaught", "dashboard charts")  # CSP reports, script errors
        problems = [e["message"] for e in chrome.get_log("browser") if any(f in e["message"] for f in flagged)]
        assert problems == []
    assert {p.name for p in shots.glob("dashboard-*.png")} >= {
        "dashboard-before.png", "dashboard-live.png", "dashboard-usage.png", "dashboard-usage-live.png",
        "dashboard-usage-days.png",
    }  # fmt: skip
