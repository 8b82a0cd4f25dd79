"""Customers (issue 11, seed 002): two customer agents on Cortex's own memory.

The context builder and every tool are SQL functions tested as the agents call them (PostgREST's
way: a transaction as the agent); the controller is driven offline (the deterministic local agent)
and through the local stand-in of the Messages API, scripted per test to stream text, call tools
and hand off; the stream endpoint is read as an AI SDK client reads it.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from cortex import db
from cortex.cli import main
from cortex.customers import agents, controller, service
from cortex.customers.models import UIMessage
from cortex.errors import CortexError
from tests.api_helpers import bearer, error_of
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import FakeAnthropic, text_turn, tool_turn

V1 = "/api/v1/customers"
CM, PM = "customer_mgmt", "product_mgmt"


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def team(tenant: Tenant, admin: Any) -> Tenant:
    """The first tenant with the two customer agents and their keys."""
    for name in (CM, PM):
        admin.execute("select cortex.create_agent(%s, %s)", (tenant.id, name))
        row = admin.execute("select cortex.create_agent_key(%s, %s) as k", (tenant.id, name)).fetchone()
        tenant.keys[name] = row["k"]
    return tenant


@pytest.fixture
def customer(team: Tenant, as_agent: AsAgent) -> str:
    """Acme Corp, a customer with info (the seed's profile fields)."""
    with as_agent(team, CM) as conn:
        row = db.call(conn, "upsert_contact", email="alice@acme.example", name="Alice Doe", company_name="Acme Corp",
                      stage="customer", custom_fields=psycopg.types.json.Jsonb({
                          "vertical": "SaaS", "persona": "CTO", "icp": "Mid-market B2B SaaS",
                          "about": "Enterprise SaaS company.", "product": "Project management tool.",
                          "team": [{"name": "Alice", "role": "CTO"}, {"name": "Bob", "role": "VP Engineering"}]}))  # fmt: skip
    return str(row["id"])


def sql(t: Tenant, as_agent: AsAgent, function: str, agent: str = CM, **args: Any) -> Any:
    """One API function call as an agent of `t`."""
    with as_agent(t, agent) as conn:
        return db.call(conn, function, **args)


def context(t: Tenant, as_agent: AsAgent, customer_id: str, max_tokens: int = 3000) -> str:
    """build_customer_context as customer_mgmt."""
    return str(sql(t, as_agent, "build_customer_context", customer_id=customer_id, max_tokens=max_tokens))


def sqlstate(exc: pytest.ExceptionInfo[CortexError]) -> tuple[str | None, str | None]:
    """(SQLSTATE, field) of a refused call."""
    return exc.value.sqlstate, exc.value.field


# --- context and health signals ---------------------------------------------------------------------


def test_context_renders_the_seeds_markdown_sections(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    sql(team, as_agent, "add_customer_agreement", customer_id=customer, title="Monthly retainer", type="retainer",
        start_date=date(2026, 1, 1), end_date=date(2027, 6, 30), amount=5000, billing_period="monthly")  # fmt: skip
    sql(team, as_agent, "add_customer_receivable", customer_id=customer, amount=15000, due_date=date.today(),
        paid_at="2026-01-05T00:00:00Z")  # fmt: skip
    project = sql(team, as_agent, "create_customer_project", agent=PM, customer_id=customer,
                  name="Product Strategy", description="Strategic planning for Q1", status="active")  # fmt: skip
    sql(team, as_agent, "create_customer_artifact", agent=PM, project_id=project["id"], title="Go-to-Market Plan",
        type="strategy", content="# GTM")  # fmt: skip
    text = context(team, as_agent, customer)
    assert text.startswith("## Current Customer Context\n\n**Customer**: Alice Doe (Acme Corp)\n**Status**: active")
    for line in ("**Vertical**: SaaS", "**Persona**: CTO", "**ICP**: Mid-market B2B SaaS",
                 "**About**: Enterprise SaaS company.", "**Team**:\n- Alice (CTO)\n- Bob (VP Engineering)",
                 "**Agreements** (1):\n- Monthly retainer | retainer | 2026-01 - 2027-06 | $5,000.00 USD monthly",
                 "**Financial Summary**:\n- Total Invoiced: $15,000.00\n- Total Paid: $15,000.00\n- Outstanding: $0.00",
                 "**Active Projects** (1):\n- Product Strategy (active) - Strategic planning for Q1",
                 "**Deliverables** (1 total):\n- Go-to-Market Plan (strategy, draft)",
                 "**Recent Events** (last 1):\n- ["):  # fmt: skip
        assert line in text, line
    assert "artifact_created: Go-to-Market Plan (strategy) in Product Strategy" in text
    assert "Health Signals" not in text  # an event today, nothing expiring, nothing overdue


def test_health_signal_agreement_expiring_within_30_days(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    soon, later = date.today() + timedelta(days=20), date.today() + timedelta(days=90)
    sql(team, as_agent, "add_customer_agreement", customer_id=customer, title="Ends soon", end_date=soon)
    sql(team, as_agent, "add_customer_agreement", customer_id=customer, title="Ends later", end_date=later)
    sql(team, as_agent, "add_customer_agreement", customer_id=customer, title="Terminated", end_date=soon,
        status="terminated")  # fmt: skip
    sql(team, as_agent, "log_customer_event", customer_id=customer, event_type="note", description="recent")
    assert "**Health Signals**:\n- ⚠️ 1 agreement(s) expiring within 30 days" in context(team, as_agent, customer)


def test_health_signal_overdue_invoices_with_their_total(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    past = date.today() - timedelta(days=3)
    sql(team, as_agent, "add_customer_receivable", customer_id=customer, amount=1000, due_date=past)
    sql(team, as_agent, "add_customer_receivable", customer_id=customer, amount=Decimal("2000.50"), due_date=past)
    sql(team, as_agent, "add_customer_receivable", customer_id=customer, amount=700, due_date=past,
        paid_at="2026-01-01T00:00:00Z")  # fmt: skip
    sql(team, as_agent, "add_customer_receivable", customer_id=customer, amount=400, due_date=date.today() + timedelta(days=9))
    sql(team, as_agent, "log_customer_event", customer_id=customer, event_type="note", description="recent")
    text = context(team, as_agent, customer)
    assert "- ⚠️ 2 overdue invoice(s) totalling $3,000.50" in text
    assert "- Total Invoiced: $4,100.50\n- Total Paid: $700.00\n- Outstanding: $3,400.50" in text


def test_health_signal_no_activity_in_14_days(team: Tenant, as_agent: AsAgent, customer: str, admin: Any) -> None:
    assert "- ⚠️ No activity recorded yet" in context(team, as_agent, customer)
    sql(team, as_agent, "log_customer_event", customer_id=customer, event_type="call", description="Kickoff call")
    assert "No activity" not in context(team, as_agent, customer)
    # The log is append-only: the owner moves the event back in time with triggers off.
    admin.execute("set session_replication_role = replica")
    admin.execute("update cortex.interactions set occurred_at = now() - interval '21 days' where contact_id = %s",
                  (customer,))  # fmt: skip
    admin.execute("set session_replication_role = default")
    assert "- ⚠️ No activity in 21 days" in context(team, as_agent, customer)


def _fill(t: Tenant, as_agent: AsAgent, customer: str, events: int, projects: int, agreements: int, pad: int) -> None:
    """Many events, projects (each with an artifact) and agreements, with long text of `pad` chars."""
    words = ("lorem ipsum dolor sit amet " * (pad // 25 + 1))[:pad]
    with as_agent(t, PM) as conn:
        for i in range(events):
            db.call(conn, "log_customer_event", customer_id=customer, event_type="note", description=f"event {i} {words}")
        for i in range(projects):
            p = db.call(conn, "create_customer_project", customer_id=customer, name=f"project {i}",
                        description=f"{words}")  # fmt: skip
            db.call(conn, "create_customer_artifact", project_id=p["id"], title=f"artifact {i} {words[:100]}",
                    type="report", content="x")  # fmt: skip
        for i in range(agreements):
            db.call(conn, "add_customer_agreement", customer_id=customer, title=f"agreement {i} {words[:150]}")


def test_truncation_round_one_cuts_events_to_3(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    _fill(team, as_agent, customer, events=12, projects=0, agreements=0, pad=190)
    full = context(team, as_agent, customer, max_tokens=20000)
    assert "**Recent Events** (last 10):" in full
    cut = context(team, as_agent, customer, max_tokens=math.ceil(len(full) / 4) - 50)
    assert "**Recent Events** (last 3):" in cut and cut.count("\n- [") == 3


def test_truncation_round_two_cuts_projects_and_artifacts_to_5(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    _fill(team, as_agent, customer, events=0, projects=8, agreements=0, pad=180)
    full = context(team, as_agent, customer, max_tokens=20000)
    assert "**Active Projects** (8):" in full and "**Deliverables** (8 total):" in full
    events = full.split("**Recent Events**")[1]
    # More than round one can save (all the event lines), less than round two adds.
    cut = context(team, as_agent, customer, max_tokens=math.ceil((len(full) - len(events)) / 4) - 10)
    assert "**Active Projects** (showing 5 of 8):" in cut and "**Recent Events** (last 3):" in cut
    deliverables = cut.split("**Deliverables** (8 total):\n")[1].split("\n\n")[0]
    assert deliverables.count("- artifact") == 5


def test_truncation_round_three_cuts_agreements_to_3(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    _fill(team, as_agent, customer, events=0, projects=0, agreements=9, pad=160)
    full = context(team, as_agent, customer, max_tokens=20000)
    assert "**Agreements** (9):" in full
    cut = context(team, as_agent, customer, max_tokens=math.ceil(len(full) / 4) - 20)
    assert "**Agreements** (showing 3 of 9):" in cut
    assert cut.split("**Agreements** (showing 3 of 9):\n")[1].split("\n\n")[0].count("- agreement") == 3


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    events=st.integers(0, 14), projects=st.integers(0, 9), agreements=st.integers(0, 8),
    pad=st.integers(0, 600), about=st.integers(0, 30_000),
)  # fmt: skip
def test_context_never_exceeds_its_token_budget(
    team: Tenant, as_agent: AsAgent, admin: Any, events: int, projects: int, agreements: int, pad: int, about: int
) -> None:
    with as_agent(team, CM) as conn:
        c = db.call(conn, "upsert_contact", email=f"p{time.monotonic_ns()}@acme.example", name="Prop Test",
                    custom_fields=psycopg.types.json.Jsonb({"about": "word " * (about // 5), "team": ["x " * 80] * 12}))  # fmt: skip
    _fill(team, as_agent, str(c["id"]), events, projects, agreements, pad)
    for budget in (400, 3000):
        text = context(team, as_agent, str(c["id"]), budget)
        assert math.ceil(len(text) / 4) <= budget
        assert text.startswith("## Current Customer Context")


def test_context_refuses_another_tenants_customer_and_a_bad_budget(
    team: Tenant, other_tenant: Tenant, as_agent: AsAgent, customer: str
) -> None:
    with pytest.raises(CortexError) as exc:
        sql(other_tenant, as_agent, "build_customer_context", agent="luna", customer_id=customer)
    assert sqlstate(exc) == ("P0002", "customer_id")
    with pytest.raises(CortexError) as exc:
        context(team, as_agent, customer, max_tokens=10)
    assert sqlstate(exc) == ("22023", "max_tokens")


# --- the tools as SQL functions -------------------------------------------------------------------


def test_update_customer_status_maps_to_the_stage_and_logs_the_transition(
    team: Tenant, as_agent: AsAgent, customer: str, admin: Any
) -> None:
    result = sql(team, as_agent, "update_customer_status", customer_id=customer, new_status="paused",
                 reason="Budget freeze")  # fmt: skip
    assert (result["previous_status"], result["status"], result["stage"]) == ("active", "paused", "churning")
    row = admin.execute("select stage, custom_fields->>'lifecycle_status' as s from cortex.contacts where id = %s",
                        (customer,)).fetchone()  # fmt: skip
    assert (row["stage"], row["s"]) == ("churning", "paused")
    event = admin.execute("select type, subject, agent from cortex.interactions where contact_id = %s", (customer,)).fetchone()
    assert event == {"type": "status_change", "subject": "active -> paused: Budget freeze", "agent": CM}
    assert "**Status**: paused" in context(team, as_agent, customer)
    with pytest.raises(CortexError) as exc:
        sql(team, as_agent, "update_customer_status", customer_id=customer, new_status="live")
    assert sqlstate(exc) == ("22023", "new_status")


def test_merge_customer_info_merges_atomically_and_refuses_a_non_object(
    team: Tenant, as_agent: AsAgent, customer: str
) -> None:
    result = sql(team, as_agent, "merge_customer_info", cid=customer,
                 new_info=psycopg.types.json.Jsonb({"persona": "CEO", "budget": 50000}))  # fmt: skip
    assert result["info"]["persona"] == "CEO" and result["info"]["vertical"] == "SaaS" and result["info"]["budget"] == 50000
    with pytest.raises(CortexError) as exc:
        sql(team, as_agent, "merge_customer_info", cid=customer, new_info=psycopg.types.json.Jsonb([1]))
    assert sqlstate(exc) == ("22023", "new_info")


def test_concurrent_info_merges_keep_every_key(team: Tenant, as_agent: AsAgent, customer: str, admin: Any) -> None:
    def merge(i: int) -> None:
        sql(team, as_agent, "merge_customer_info", cid=customer, new_info=psycopg.types.json.Jsonb({f"k{i}": i}))

    threads = [threading.Thread(target=merge, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    info = admin.execute("select custom_fields from cortex.contacts where id = %s", (customer,)).fetchone()["custom_fields"]
    assert {f"k{i}" for i in range(8)} <= set(info)


def test_log_customer_event_logs_an_interaction_of_the_type(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    result = sql(team, as_agent, "log_customer_event", customer_id=customer, event_type="meeting",
                 description="Quarterly business review")  # fmt: skip
    assert result["event_type"] == "meeting"
    assert "meeting: Quarterly business review" in context(team, as_agent, customer)
    with pytest.raises(CortexError) as exc:
        sql(team, as_agent, "log_customer_event", customer_id=customer, event_type="status_change", description="x")
    assert sqlstate(exc) == ("22023", "event_type")


def test_projects_and_artifacts_tools(team: Tenant, as_agent: AsAgent, customer: str, admin: Any) -> None:
    project = sql(team, as_agent, "create_customer_project", agent=PM, customer_id=customer, name="Roadmap 2027")
    assert project["status"] == "planning" and project["created_by"] == PM
    artifact = sql(team, as_agent, "create_customer_artifact", agent=PM, project_id=project["id"], title="Roadmap",
                   type="roadmap", content="# Roadmap")  # fmt: skip
    assert artifact["status"] == "draft" and artifact["event_id"]
    logged = admin.execute("select type, metadata->>'artifact_id' as a from cortex.interactions where id = %s",
                           (artifact["event_id"],)).fetchone()  # fmt: skip
    assert logged == {"type": "artifact_created", "a": artifact["id"]}
    updated = sql(team, as_agent, "update_customer_artifact", agent=PM, artifact_id=artifact["id"], status="final",
                  content="# Roadmap v2")  # fmt: skip
    assert updated["status"] == "final" and updated["content_chars"] == len("# Roadmap v2")
    listed = sql(team, as_agent, "list_customer_projects", agent=PM, customer_id=customer)
    assert [p["name"] for p in listed["items"]] == ["Roadmap 2027"] and listed["items"][0]["artifact_count"] == 1
    by_project = sql(team, as_agent, "list_customer_artifacts", agent=PM, project_id=project["id"])
    by_customer = sql(team, as_agent, "list_customer_artifacts", agent=PM, customer_id=customer)
    assert [a["id"] for a in by_project["items"]] == [a["id"] for a in by_customer["items"]] == [artifact["id"]]
    for function, args, expected in (
        ("create_customer_project", {"customer_id": customer, "name": "x", "status": "paused"}, ("22023", "status")),
        ("create_customer_artifact", {"project_id": project["id"], "title": "t", "type": "memo", "content": "c"},
         ("22023", "type")),
        ("update_customer_artifact", {"artifact_id": artifact["id"]}, ("22023", "content")),
        ("list_customer_artifacts", {}, ("22023", "project_id")),
    ):  # fmt: skip
        with pytest.raises(CortexError) as exc:
            sql(team, as_agent, function, agent=PM, **args)
        assert sqlstate(exc) == expected, function


def test_every_tool_refuses_another_tenants_customer_and_changes_nothing(
    team: Tenant, other_tenant: Tenant, as_agent: AsAgent, customer: str, admin: Any
) -> None:
    project = sql(team, as_agent, "create_customer_project", agent=PM, customer_id=customer, name="Secret")
    artifact = sql(team, as_agent, "create_customer_artifact", agent=PM, project_id=project["id"], title="Secret doc",
                   type="spec", content="secret")  # fmt: skip
    before = admin.execute(
        "select (select custom_fields::text || stage from cortex.contacts where id = %(c)s) as c,"
        " (select count(*) from cortex.interactions) as i, (select string_agg(title || status || content, ',')"
        " from cortex.customer_artifacts) as a, (select count(*) from cortex.customer_projects) as p",
        {"c": customer},
    ).fetchone()
    attacks = [
        ("build_customer_context", {"customer_id": customer}),
        ("update_customer_status", {"customer_id": customer, "new_status": "churned"}),
        ("merge_customer_info", {"cid": customer, "new_info": psycopg.types.json.Jsonb({"x": 1})}),
        ("log_customer_event", {"customer_id": customer, "event_type": "note", "description": "x"}),
        ("create_customer_project", {"customer_id": customer, "name": "x"}),
        ("create_customer_artifact", {"project_id": project["id"], "title": "x", "type": "spec", "content": "x"}),
        ("update_customer_artifact", {"artifact_id": artifact["id"], "title": "pwned"}),
        ("list_customer_projects", {"customer_id": customer}),
        ("list_customer_artifacts", {"project_id": project["id"]}),
        ("list_customer_artifacts", {"customer_id": customer}),
        ("add_customer_agreement", {"customer_id": customer, "title": "x"}),
        ("add_customer_receivable", {"customer_id": customer, "amount": 1, "due_date": date.today()}),
    ]
    for function, args in attacks:
        with pytest.raises(CortexError) as exc:
            sql(other_tenant, as_agent, function, agent="luna", **args)
        assert exc.value.sqlstate == "P0002", function
    after = admin.execute(
        "select (select custom_fields::text || stage from cortex.contacts where id = %(c)s) as c,"
        " (select count(*) from cortex.interactions) as i, (select string_agg(title || status || content, ',')"
        " from cortex.customer_artifacts) as a, (select count(*) from cortex.customer_projects) as p",
        {"c": customer},
    ).fetchone()
    assert after == before
    # Read directly, the tables show the other tenant nothing.
    with as_agent(other_tenant, "luna") as conn:
        for table in ("customer_projects", "customer_artifacts", "customer_agreements", "customer_receivables"):
            assert conn.execute(f"select count(*) from cortex.{table}").fetchone()[0] == 0


def test_read_only_agents_cannot_use_the_writing_tools(team: Tenant, as_agent: AsAgent, customer: str) -> None:
    with pytest.raises(CortexError) as exc:
        sql(team, as_agent, "log_customer_event", agent="helios", customer_id=customer, event_type="note",
            description="x")  # fmt: skip
    assert exc.value.status in (401, 403)
