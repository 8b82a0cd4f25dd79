"""Customers (issue 11, seed 002): two customer agents on Cortex's own memory.

The context builder and every tool are SQL functions tested as the agents call them (PostgREST's
way: a transaction as the agent); the controller is driven offline (the deterministic local agent)
and through the local stand-in of the Messages API, scripted per test to stream text, call tools
and hand off; the stream endpoint is read as an AI SDK client reads it.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from selenium import webdriver
from selenium.webdriver.chrome.options import Options as ChromeOptions
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cortex import db
from cortex.cli import main
from cortex.customers import agents, controller, service
from cortex.customers.models import UIMessage
from cortex.errors import CortexError
from tests.api_helpers import bearer, error_of
from tests.conftest import AsAgent, Tenant, free_port
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
                          "team": [{"name": "Alice", "role": "CTO"},
                                   {"name": "Bob", "role": "VP Engineering"}]}))  # fmt: skip
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
    sql(
        team,
        as_agent,
        "add_customer_receivable",
        customer_id=customer,
        amount=400,
        due_date=date.today() + timedelta(days=9),
    )
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
            db.call(
                conn, "log_customer_event", customer_id=customer, event_type="note", description=f"event {i} {words}"
            )
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
                    custom_fields=psycopg.types.json.Jsonb({"about": "word " * (about // 5),
                                                            "team": ["x " * 80] * 12}))  # fmt: skip
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
    event = admin.execute(
        "select type, subject, agent from cortex.interactions where contact_id = %s", (customer,)
    ).fetchone()
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
    assert (
        result["info"]["persona"] == "CEO"
        and result["info"]["vertical"] == "SaaS"
        and result["info"]["budget"] == 50000
    )
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
    info = admin.execute("select custom_fields from cortex.contacts where id = %s", (customer,)).fetchone()[
        "custom_fields"
    ]
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


# --- the controller, offline (the deterministic local agent) --------------------------------------------


def chat_parts(
    t: Tenant, customer_id: str, text: str, history: list[UIMessage] | None = None, caller: str = CM
) -> list[dict[str, Any]]:
    """The whole response of one chat request as UI message stream parts."""

    async def run() -> list[dict[str, Any]]:
        try:
            chat = await service.start_chat(db.agent_claims(t.id, caller), customer_id)
            messages = [*(history or []), UIMessage(role="user", content=text)]
            return [part async for part in controller.run_chat(chat, messages)]
        finally:
            await db.aclose_pool()

    return asyncio.run(run())


def of_type(parts: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The parts of one type."""
    return [p for p in parts if p["type"] == kind]


def said(parts: list[dict[str, Any]]) -> str:
    """All streamed text."""
    return "".join(p["delta"] for p in of_type(parts, "text-delta"))


def test_offline_agent_answers_with_a_tool_and_one_follow_up(
    team: Tenant, as_agent: AsAgent, customer: str, admin: Any
) -> None:
    sql(
        team,
        as_agent,
        "add_customer_receivable",
        customer_id=customer,
        amount=900,
        due_date=date.today() - timedelta(days=5),
    )
    parts = chat_parts(team, customer, "How healthy is this account?")
    assert parts[0]["type"] == "start" and parts[0]["messageMetadata"] == {"agentType": CM}
    assert [p["data"]["agent"] for p in of_type(parts, "data-agent")] == [CM]
    assert [p["toolName"] for p in of_type(parts, "tool-input-available")] == ["getCustomerSummary"]
    output = of_type(parts, "tool-output-available")[0]["output"]
    assert output["summary"].startswith("## Current Customer Context")
    text = said(parts)
    assert "1 overdue invoice(s) totalling $900.00" in text and text.count("Want me to") == 1
    assert parts[-1] == {"type": "finish", "messageMetadata": {"agentType": CM, "handoffs": 0}}
    # Each model turn (tool call, answer) was reserved and settled on customer_mgmt's budget.
    usage = admin.execute(
        "select agent, model, operation from cortex.token_usage where operation = 'customer_chat'"
    ).fetchall()
    assert usage == [{"agent": CM, "model": "local-customer-agent-v1", "operation": "customer_chat"}] * 2
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0


def test_offline_handoff_switches_agents_and_is_recorded_as_a_completed_cortex_handoff(
    team: Tenant, as_agent: AsAgent, customer: str, admin: Any
) -> None:
    parts = chat_parts(team, customer, "Please create a product roadmap for the next two quarters")
    assert [p["data"]["agent"] for p in of_type(parts, "data-agent")] == [CM, PM]
    handoff_output = of_type(parts, "tool-output-available")[0]["output"]
    assert handoff_output["__handoff"] is True and handoff_output["targetAgent"] == PM
    assert [p["toolName"] for p in of_type(parts, "tool-input-available")] == [
        "handoff", "listProjects", "createProject", "createArtifact"]  # fmt: skip
    assert "Roadmap draft" in said(parts) and parts[-1]["messageMetadata"]["agentType"] == PM
    row = admin.execute("select from_agent, to_agent, reason, status, context_summary, metadata->>'source' as source"
                        " from cortex.handoff_events").fetchall()  # fmt: skip
    assert row == [{"from_agent": CM, "to_agent": PM, "reason": "other", "status": "completed",
                    "context_summary": "The user asked: Please create a product roadmap for the next two quarters",
                    "source": "customer_chat"}]  # fmt: skip
    artifact = admin.execute("select type, created_by from cortex.customer_artifacts").fetchone()
    assert artifact == {"type": "roadmap", "created_by": PM}


def test_first_agent_comes_from_the_last_assistant_messages_agent_type(team: Tenant, customer: str) -> None:
    history = [UIMessage(role="user", content="hi"),
               UIMessage(role="assistant", content="hello", metadata={"agentType": PM})]  # fmt: skip
    parts = chat_parts(team, customer, "Which projects exist?", history)
    assert of_type(parts, "data-agent")[0]["data"]["agent"] == PM
    assert of_type(parts, "tool-input-available")[0]["toolName"] == "listProjects"


def test_offline_status_change_through_the_chat(team: Tenant, customer: str, admin: Any) -> None:
    parts = chat_parts(team, customer, "Set the status to paused, they froze the budget")
    assert of_type(parts, "tool-output-available")[0]["output"]["status"] == "paused"
    assert (
        admin.execute("select stage from cortex.contacts where id = %s", (customer,)).fetchone()["stage"] == "churning"
    )


# --- the controller on the Messages API (the local stand-in) --------------------------------------------

HANDOFF_ARGS = {"reason": "Needs product tools", "summary": "User wants a PRD", "pendingRequest": "Write the PRD"}


def _tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in request.get("tools") or []}


def test_handoff_aborts_the_stream_and_restarts_the_other_agent_with_the_handoff_context(
    team: Tenant, customer: str, admin: Any, claude: FakeAnthropic
) -> None:
    claude.script = [
        tool_turn("handoff", HANDOFF_ARGS, text="Handing over.", trailing_text="never sent " * 200, event_delay=0.005),
        text_turn("Product agent here: drafting the PRD."),
    ]
    parts = chat_parts(team, customer, "Write a PRD for the mobile app")
    first, second = claude.streams[0], claude.streams[1]
    assert not first["completed"]  # aborted: the trailing text was never all sent
    assert "never sent" not in said(parts) and "Product agent here: drafting the PRD." in said(parts)
    assert said(parts).startswith("Handing over.")
    system = second["request"]["system"]
    assert "## Handoff" in system and "- Reason: Needs product tools" in system
    assert "- Summary: User wants a PRD" in system and "- Pending request: Write the PRD" in system
    assert system.startswith("You are the Product Management Agent")
    assert set(_tools(second["request"])) == {*agents.AGENT_TOOLS[PM], "handoff"}
    assert first["request"]["max_tokens"] == 500  # the agent's max_output_tokens, as the budget reserved it
    assert of_type(parts, "data-handoff")[0]["data"]["to"] == PM
    usage = admin.execute(
        "select agent, model from cortex.token_usage where operation = 'customer_chat' order by created_at"
    ).fetchall()
    assert [u["agent"] for u in usage] == [CM, PM] and all(u["model"].startswith("claude") for u in usage)
    for _ in range(200):  # the stand-in notices the closed connection at its next write
        if first["aborted"]:
            break
        time.sleep(0.01)
    assert first["aborted"]


def test_at_most_two_handoffs_and_no_handoff_tool_on_the_last_iteration(
    team: Tenant, customer: str, admin: Any, claude: FakeAnthropic
) -> None:
    claude.script = [
        tool_turn("handoff", HANDOFF_ARGS),
        tool_turn("handoff", {**HANDOFF_ARGS, "pendingRequest": "Log the call"}),
        tool_turn("handoff", HANDOFF_ARGS),  # the model tries once more: the tool is gone
        text_turn("I will answer myself."),
    ]
    parts = chat_parts(team, customer, "Write a PRD and log the call")
    assert [p["data"]["agent"] for p in of_type(parts, "data-agent")] == [CM, PM, CM]
    assert [p["data"]["handoffToolAvailable"] for p in of_type(parts, "data-agent")] == [True, True, False]
    third = claude.streams[2]["request"]
    assert "handoff" not in _tools(third) and set(_tools(third)) == set(agents.AGENT_TOOLS[CM])
    assert "No further handoff is possible" in third["system"]
    error = of_type(parts, "tool-output-error")
    assert len(error) == 1 and "unknown tool 'handoff'" in error[0]["errorText"]
    assert said(parts).endswith("I will answer myself.")
    assert parts[-1]["messageMetadata"] == {"agentType": CM, "handoffs": 2}
    moves = admin.execute(
        "select from_agent, to_agent, status from cortex.handoff_events order by created_at"
    ).fetchall()
    assert moves == [{"from_agent": CM, "to_agent": PM, "status": "completed"},
                     {"from_agent": PM, "to_agent": CM, "status": "completed"}]  # fmt: skip


def test_the_agent_handed_the_conversation_sees_a_ping_pong_warning_from_the_previous_agent(
    team: Tenant, customer: str, claude: FakeAnthropic
) -> None:
    claude.script = [tool_turn("handoff", HANDOFF_ARGS), text_turn("Here is your PRD.")]
    chat_parts(team, customer, "Write a PRD")
    first = _tools(claude.streams[0]["request"])["handoff"]["description"]
    second = _tools(claude.streams[1]["request"])["handoff"]["description"]
    assert "WARNING" not in first
    assert "WARNING: Customer Management Agent (customer_mgmt) just handed this conversation to you" in second
    assert agents.ping_pong_warning(PM, None) is None and agents.ping_pong_warning(PM, CM) is not None


def test_a_tool_call_with_invalid_arguments_is_answered_to_the_model_as_a_tool_error(
    team: Tenant, customer: str, admin: Any, claude: FakeAnthropic
) -> None:
    claude.script = [
        tool_turn("createEventLogEntry", {"eventType": "party", "description": "x"}),
        tool_turn("updateCustomerStatus", '{"newStatus": "act'),  # cut-off JSON
        text_turn("Sorry, I could not do that."),
    ]
    parts = chat_parts(team, customer, "Log the party")
    errors = [p["errorText"] for p in of_type(parts, "tool-output-error")]
    assert len(errors) == 2 and "eventType" in errors[0] and "not valid JSON" in errors[1]
    results = claude.streams[1]["request"]["messages"][-1]["content"]
    assert (
        results[0]["type"] == "tool_result" and results[0]["is_error"] is True and "eventType" in results[0]["content"]
    )
    assert parts[-1]["type"] == "finish" and said(parts).endswith("Sorry, I could not do that.")
    assert admin.execute("select count(*) as n from cortex.interactions").fetchone()["n"] == 0


def test_a_tool_aimed_at_another_tenants_customer_is_a_tool_error(
    team: Tenant, other_tenant: Tenant, as_agent: AsAgent, customer: str, claude: FakeAnthropic
) -> None:
    theirs = sql(other_tenant, as_agent, "upsert_contact", agent="luna", email="x@globex.example")["id"]
    claude.script = [tool_turn("getCustomerSummary", {"customerId": str(theirs)}), text_turn("Not found.")]
    parts = chat_parts(team, customer, "Summarise")
    assert "not found" in of_type(parts, "tool-output-error")[0]["errorText"]
    assert "globex" not in json.dumps(parts)


@pytest.mark.parametrize("how", ["error", "drop"])
def test_a_model_stream_that_breaks_midway_ends_with_an_error_part(
    how: str, team: Tenant, customer: str, admin: Any, claude: FakeAnthropic
) -> None:
    claude.script = [text_turn("Hello there, let me think about this account.", break_after=5, break_with=how)]
    parts = chat_parts(team, customer, "Hi")
    assert parts[-1]["type"] == "error" and "stream" in parts[-1]["errorText"]
    assert said(parts).startswith("Hello")
    assert of_type(parts, "text-end")  # the open text block was closed first
    usage = admin.execute(
        "select metadata->>'error' as error from cortex.token_usage where operation = 'customer_chat'"
    ).fetchone()
    assert usage["error"]


def test_closing_the_response_aborts_the_model_stream_and_settles_the_turn(
    team: Tenant, customer: str, claude: FakeAnthropic, admin: Any
) -> None:
    claude.script = [text_turn("word " * 400, event_delay=0.005)]

    async def run() -> list[bytes]:
        try:
            chat = await service.start_chat(db.agent_claims(team.id, CM), customer)
            body = controller.stream_chat(chat, [UIMessage(role="user", content="Hi")])
            got = []
            async for chunk in body:
                got.append(chunk)
                if len(got) == 8:
                    break
            await body.aclose()  # what Starlette does when the client disconnects
            return got
        finally:
            await db.aclose_pool()

    got = asyncio.run(run())
    assert any(b'"text-delta"' in chunk for chunk in got)
    for _ in range(300):
        if claude.streams[0]["aborted"]:
            break
        time.sleep(0.01)
    assert claude.streams[0]["aborted"] and not claude.streams[0]["completed"]
    # The cut-off turn is settled at once (recorded with its reason), not left to expire.
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0
    usage = admin.execute(
        "select metadata->>'error' as error from cortex.token_usage where operation = 'customer_chat'"
    ).fetchone()
    assert usage is not None and usage["error"] == "the client disconnected mid-turn"


# --- HTTP: POST /customers/{id}/chat/stream and the bad inputs --------------------------------------------


def sse_parts(raw: str) -> list[Any]:
    """The `data:` payloads of an SSE body, decoded ([DONE] kept as a string)."""
    events = [e for e in raw.split("\n\n") if e.strip()]
    assert all(e.startswith("data: ") for e in events), events
    return [e[6:] if e[6:] == "[DONE]" else json.loads(e[6:]) for e in events]


def user(text: str) -> dict[str, Any]:
    """A user UIMessage as useChat sends it."""
    return {"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}


def test_chat_stream_speaks_the_ai_sdk_ui_message_stream_protocol(
    team: Tenant, customer: str, client: TestClient
) -> None:
    response = client.post(f"{V1}/{customer}/chat/stream", headers=bearer(team.keys[CM]),
                           json={"id": "chat1", "messages": [user("How is the account doing?")],
                                 "trigger": "submit-message"})  # fmt: skip
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    parts = sse_parts(response.text)
    assert parts[-1] == "[DONE]" and parts[-2]["type"] == "finish"
    kinds = [p["type"] for p in parts[:-1]]
    assert kinds[:3] == ["start", "data-agent", "start-step"]
    assert {"text-start", "text-delta", "text-end", "tool-input-available", "tool-output-available",
            "finish-step", "message-metadata"} <= set(kinds)  # fmt: skip
    text_ids = {p["id"] for p in parts[:-1] if p["type"].startswith("text-")}
    assert all(p["type"] != "text-delta" or p["id"] in text_ids for p in parts[:-1])


def test_chat_stream_error_part_then_done_when_the_model_breaks(
    team: Tenant, customer: str, client: TestClient, claude: FakeAnthropic
) -> None:
    claude.script = [text_turn("Partial answer that breaks", break_after=4, break_with="drop")]
    response = client.post(
        f"{V1}/{customer}/chat/stream", headers=bearer(team.keys[CM]), json={"messages": [user("Hi")]}
    )
    assert response.status_code == 200
    parts = sse_parts(response.text)
    assert parts[-2]["type"] == "error" and parts[-1] == "[DONE]"


WRONG_SHAPES: list[tuple[dict[str, Any], str]] = [
    ({"messages": []}, "messages"),
    ({}, "messages"),
    ({"messages": "hello"}, "messages"),
    ({"messages": [{"role": "robot", "parts": [{"type": "text", "text": "hi"}]}]}, "messages.0.role"),
    ({"messages": [{"role": "user", "parts": [{"text": "no type"}]}]}, "messages.0.parts.0.type"),
    ({"messages": [{"role": "user", "parts": "hi"}]}, "messages.0.parts"),
    ({"messages": [{"role": "user", "parts": [{"type": "text", "text": 42}]}]}, "messages.0.parts.0.text"),
    ({"messages": [{"role": "assistant", "parts": [{"type": "text", "text": "hi"}]}]}, "messages.0"),
    ({"messages": [{"role": "user", "parts": [{"type": "text", "text": "  "}]}]}, "messages.0"),
    (
        {
            "messages": [
                user("x"),
                {"role": "assistant", "content": "y", "metadata": {"agentType": "sales"}},
                user("z"),
            ]
        },
        "messages.1.metadata.agentType",
    ),
]


def test_chat_stream_refuses_empty_or_wrongly_shaped_messages_naming_the_field(
    team: Tenant, customer: str, client: TestClient, admin: Any
) -> None:
    for body, field in WRONG_SHAPES:
        response = client.post(f"{V1}/{customer}/chat/stream", headers=bearer(team.keys[CM]), json=body)
        assert response.status_code == 422, body
        assert error_of(response)["field"] == field, body
    assert admin.execute("select count(*) as n from cortex.token_usage").fetchone()["n"] == 0


def test_chat_stream_unknown_customer_wrong_agent_and_missing_agents(
    team: Tenant, other_tenant: Tenant, as_agent: AsAgent, customer: str, client: TestClient
) -> None:
    body = {"messages": [user("Hi")]}
    unknown = client.post(
        f"{V1}/00000000-0000-4000-8000-000000000000/chat/stream", headers=bearer(team.keys[CM]), json=body
    )
    assert unknown.status_code == 404 and error_of(unknown)["field"] == "customer_id"
    theirs = client.post(f"{V1}/{customer}/chat/stream", headers=bearer(other_tenant.keys["luna"]), json=body)
    assert theirs.status_code == 403  # luna is no customer agent (and the customer is not hers to see)
    not_uuid = client.post(f"{V1}/nope/chat/stream", headers=bearer(team.keys[CM]), json=body)
    assert not_uuid.status_code == 422 and error_of(not_uuid)["field"] == "customer_id"
    wrong_agent = client.post(f"{V1}/{customer}/chat/stream", headers=bearer(team.keys["luna"]), json=body)
    assert wrong_agent.status_code == 403 and error_of(wrong_agent)["field"] == "agent"
    theirs_customer = sql(other_tenant, as_agent, "upsert_contact", agent="luna", email="c@globex.example")["id"]
    missing = client.post(f"{V1}/{theirs_customer}/chat/stream", headers=bearer(team.keys[CM]), json=body)
    assert missing.status_code == 404  # another tenant's customer is unknown here
    assert client.post(f"{V1}/{customer}/chat/stream", json=body).status_code == 401


def test_chat_needs_both_customer_agents_registered(
    tenant: Tenant, admin: Any, as_agent: AsAgent, client: TestClient
) -> None:
    admin.execute("select cortex.create_agent(%s, %s)", (tenant.id, CM))
    key = admin.execute("select cortex.create_agent_key(%s, %s) as k", (tenant.id, CM)).fetchone()["k"]
    cid = sql(tenant, as_agent, "upsert_contact", email="solo@acme.example")["id"]
    response = client.post(f"{V1}/{cid}/chat/stream", headers=bearer(key), json={"messages": [user("Hi")]})
    assert response.status_code == 409 and "product_mgmt" in error_of(response)["message"]


def test_context_route_and_the_chat_page(team: Tenant, customer: str, client: TestClient) -> None:
    got = client.get(f"{V1}/{customer}/context?max_tokens=500", headers=bearer(team.keys[PM]))
    assert got.status_code == 200 and got.json()["context"].startswith("## Current Customer Context")
    assert got.json()["tokens"] <= 500
    page = client.get(f"/chat/customers/{customer}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/chat/stream" in page.text and "Authorization" in page.text
    assert "sessionStorage" in page.text and customer in page.text
    assert client.get("/chat/customers/not-a-uuid").status_code == 422


def test_cli_shows_the_context_and_chats_offline(team: Tenant, customer: str, dsn: str) -> None:
    runner = CliRunner()
    shown = runner.invoke(main, ["--tenant", team.slug, "--agent", CM, "customers", "context", customer])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("## Current Customer Context")
    chat = runner.invoke(main, ["--tenant", team.slug, "--agent", CM, "customers", "chat", customer, "Draft a roadmap"])
    assert chat.exit_code == 0, chat.output
    assert (
        "[customer_mgmt]" in chat.output
        and "[product_mgmt]" in chat.output
        and "handoff customer_mgmt -> product_mgmt" in chat.output
    )


# --- the page, in headless Chromium -----------------------------------------------------------------------


@contextmanager
def served(app: Starlette) -> Iterator[str]:
    """The app under uvicorn in a thread on a free loopback port (no embedding model: the chat needs none)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.mark.slow
def test_chat_page_streams_the_answer_a_tool_card_and_an_agent_switch_in_chromium(
    team: Tenant, customer: str, app: Starlette, tmp_path: Path
) -> None:
    options = ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1100,1500",
                 f"--user-data-dir={tmp_path / 'chromium'}"):  # fmt: skip
        options.add_argument(flag)
    with served(app) as base:
        driver = webdriver.Chrome(service=ChromeService("/usr/bin/chromedriver"), options=options)
        try:
            driver.get(f"{base}/chat/customers/{customer}")
            # The key a person types once at the prompt, kept for the tab.
            driver.execute_script("sessionStorage.setItem('cortex.agentKey', arguments[0])", team.keys[CM])
            driver.find_element(By.ID, "message").send_keys("Please create a product roadmap for next quarter")
            driver.find_element(By.ID, "send").click()
            wait = WebDriverWait(driver, 30)
            wait.until(lambda d: "Roadmap draft" in d.find_element(By.ID, "log").text)
            log = driver.find_element(By.ID, "log").text
            assert "customer_mgmt handed over to product_mgmt" in log
            assert "handing you over" in log
            cards = [c.text for c in driver.find_elements(By.CSS_SELECTOR, ".card")]
            assert any(c.startswith("createArtifact") for c in cards) and any(c.startswith("handoff") for c in cards)
            assert driver.find_element(By.ID, "agent").text == PM
            shot = tmp_path / "customer-chat.png"
            assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 1000
        finally:
            driver.quit()


def test_a_recorded_handoff_is_completed_by_the_receiver_and_the_callers_claims_are_restored(
    team: Tenant, as_agent: AsAgent, customer: str, admin: Any
) -> None:
    with as_agent(team, CM) as conn:
        result = db.call(conn, "record_customer_handoff", customer_id=customer, to_agent=PM,
                         reason="complex_question", summary="Needs a roadmap", pending_request="Draft it")  # fmt: skip
        assert conn.execute("select cortex.current_agent()").fetchone()[0] == CM
    assert (result["status"], result["reason"], result["from_agent"]) == ("completed", "complex_question", CM)
    row = admin.execute("select accepted_by, suggested_action from cortex.handoff_events where id = %s",
                        (result["handoff_id"],)).fetchone()  # fmt: skip
    assert row == {"accepted_by": PM, "suggested_action": "Draft it"}
    for agent, to, expected in ((CM, CM, ("22023", "to_agent")), ("luna", PM, ("42501", "agent"))):
        with pytest.raises(CortexError) as exc:
            sql(team, as_agent, "record_customer_handoff", agent=agent, customer_id=customer, to_agent=to,
                reason="x", summary="y")  # fmt: skip
        assert sqlstate(exc) == expected
