"""log_interaction / list_interactions and the append-only log."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from cortex.db import agent_claims, call
from cortex.errors import CortexError
from cortex.interactions import service as interactions
from tests.conftest import AsAgent, Tenant

EMAIL = (
    "Hi Luna, our order #1234 of 500 cups arrived two weeks late and half the lids are cracked. "
    "This is unacceptable, please refund the lids or we will cancel our subscription."
)


def test_log_interaction_over_the_python_path_is_summarised_at_once_and_metered(
    tenant: Tenant, contact: dict[str, Any], admin: Any
) -> None:
    result = interactions.log_interaction(
        agent_claims(tenant.id, "luna"),
        contact_id=contact["id"],
        type="email_received",
        direction="inbound",
        subject="Late order",
        raw_content=EMAIL,
    )
    assert result["analysis_status"] == "done"
    assert result["summary"] and result["key_points"]
    assert result["sentiment"] in ("negative", "escalation")
    assert result["intent"] in ("complaint", "churn_risk")
    assert result["token_usage"]["model"] == "local-summariser-v1"
    assert result["token_usage"]["input_tokens"] > 0
    assert result["context_refresh_triggered"] is True
    usage = admin.execute(
        "select agent, operation, interaction_id::text as iid, cost_usd from cortex.token_usage"
    ).fetchall()
    assert usage == [{"agent": "luna", "operation": "summarize", "iid": result["id"], "cost_usd": 0}]
    touched = admin.execute(
        "select interaction_count, last_touch_agent, last_touch_at is not null as t from cortex.contacts where id = %s",
        (contact["id"],),
    ).fetchone()
    assert touched == {"interaction_count": 1, "last_touch_agent": "luna", "t": True}


def test_log_interaction_through_postgrest_returns_the_row_and_queues_its_summary(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    with as_agent(tenant, "luna") as conn:
        row = call(conn, "log_interaction", contact_id=contact["id"], type="email_received", raw_content=EMAIL)
        # Same transaction: the job is there before commit.
        jobs = conn.execute("select kind, payload ->> 'interaction_id' from cortex.jobs").fetchall()
    assert row["analysis_status"] == "pending" and row["summary"] is None
    assert jobs == [("summarise_interaction", row["id"])]
    assert admin.execute("select count(*) as n from cortex.jobs where status = 'queued'").fetchone()["n"] == 1


def test_a_repeated_external_id_is_one_interaction(tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]) -> None:
    with as_agent(tenant, "luna") as conn:
        a = call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="ticket_opened",
            external_id="T-1",
            summary="Opened ticket",
        )
        b = call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="ticket_opened",
            external_id="T-1",
            summary="Opened ticket again",
        )
        listed = call(conn, "list_interactions", contact_id=contact["id"])
    assert b["id"] == a["id"] and b["duplicate"] is True
    assert len(listed["items"]) == 1


@pytest.mark.parametrize(
    ("args", "field", "status"),
    [
        ({"type": "fax"}, "type", 422),
        ({"type": "call", "direction": "sideways"}, "direction", 422),
        ({"type": "call", "sentiment": "meh", "summary": "x"}, "sentiment", 422),
        ({"type": "call", "intent": "world_domination", "summary": "x"}, "intent", 422),
        ({"type": "call", "agent": "mia"}, "agent", 422),
        ({"type": "call", "agent": "human"}, "human_id", 422),
        ({"type": "call", "contact_id": str(uuid.UUID(int=7))}, "contact_id", 404),
    ],
)
def test_log_interaction_rejects_bad_input_and_writes_nothing(
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Any,
    args: dict[str, Any],
    field: str,
    status: int,
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", **{"contact_id": contact["id"], **args})
    assert (err.value.field, err.value.status) == (field, status)
    counts = admin.execute(
        "select (select count(*) from cortex.interactions) as i, (select count(*) from "
        "cortex.jobs) as j, (select count(*) from cortex.token_usage) as u, (select "
        "interaction_count from cortex.contacts) as n"
    ).fetchone()
    assert counts == {"i": 0, "j": 0, "u": 0, "n": 0}


def test_unknown_contact_error_says_how_to_create_it(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=str(uuid.uuid4()), type="note")
    assert err.value.sqlstate == "P0002"
    assert "POST /api/v1/contacts" in (err.value.hint or "")


def test_an_agent_may_log_on_behalf_of_a_named_human(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        row = call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="call",
            agent="human",
            human_id="rep-7",
            summary="Called about renewal",
        )
    assert (row["agent"], row["human_id"]) == ("human", "rep-7")


def test_read_only_agent_cannot_log(tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
        call(conn, "log_interaction", contact_id=contact["id"], type="note", summary="x")
    assert err.value.status == 403


@pytest.mark.parametrize(
    "statement",
    [
        "update cortex.interactions set raw_content = 'rewritten'",
        "update cortex.interactions set summary = 'rewritten'",
        "delete from cortex.interactions",
    ],
)
def test_api_roles_can_neither_update_nor_delete_the_log(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], statement: str
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=contact["id"], type="note", raw_content="original")
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute(statement)


def test_even_the_owner_cannot_rewrite_recorded_fields_or_a_written_analysis(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    with as_agent(tenant, "luna") as conn:
        done = call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="note",
            raw_content="a",
            summary="first summary",
        )
        pending = call(conn, "log_interaction", contact_id=contact["id"], type="note", raw_content="b")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("update cortex.interactions set raw_content = 'x' where id = %s", (done["id"],))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("update cortex.interactions set summary = 'second' where id = %s", (done["id"],))
    # A pending analysis is written exactly once.
    admin.execute(
        "select cortex.record_interaction_analysis(%s, %s, %s::jsonb, null)",
        (tenant.id, pending["id"], '{"summary": "s", "sentiment": "neutral", "intent": "other"}'),
    )
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute(
            "select cortex.record_interaction_analysis(%s, %s, %s::jsonb, null)",
            (tenant.id, pending["id"], '{"summary": "t", "sentiment": "neutral", "intent": "other"}'),
        )


def test_list_interactions_filters_and_shows_raw_content_only_when_asked(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="note",
            raw_content="secret body",
            summary="n",
        )
    with as_agent(tenant, "mia") as conn:
        call(conn, "log_interaction", contact_id=contact["id"], type="call", summary="c")
        plain = call(conn, "list_interactions", contact_id=contact["id"])
        raw = call(conn, "list_interactions", contact_id=contact["id"], include_raw=True, agent="luna")
        calls = call(conn, "list_interactions", contact_id=contact["id"], type="call")
        future = call(conn, "list_interactions", contact_id=contact["id"], since="2999-01-01T00:00:00Z")
    assert [i["type"] for i in plain["items"]] == ["call", "note"] or len(plain["items"]) == 2
    assert all("raw_content" not in i for i in plain["items"])
    assert [i["raw_content"] for i in raw["items"]] == ["secret body"]
    assert [i["type"] for i in calls["items"]] == ["call"]
    assert future["items"] == []
    with pytest.raises(CortexError) as err, as_agent(tenant, "mia") as conn:
        call(conn, "list_interactions", contact_id=contact["id"], limit=101)
    assert err.value.field == "limit"
