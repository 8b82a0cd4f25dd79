"""Handoffs: creation in one transaction (owner, context refresh, last_handoff, outbox, usage),
the briefing (local model, Claude, SQL fallback), the pending queue and the stand-up list, the
status machine with its audit trail, concurrent accepts, bad input and tenant isolation."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

from cortex.context import service as context_service
from cortex.db import Jsonb, agent_claims, as_caller, call
from cortex.errors import CortexError
from cortex.handoffs import service as handoffs
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import HANDOFF_ANSWER, FakeAnthropic

MOVES = {"pending": ["accepted", "rejected"], "accepted": ["completed", "rejected"], "completed": [], "rejected": []}
# How to bring a fresh handoff into each status through legal moves.
PATH_TO = {"pending": [], "accepted": ["accepted"], "completed": ["accepted", "completed"], "rejected": ["rejected"]}
STATUSES = list(MOVES)


def create(as_agent: AsAgent, tenant: Tenant, agent: str = "anna", **fields: Any) -> dict[str, Any]:
    """create_handoff through the PostgREST path (SQL only, no model)."""
    with as_agent(tenant, agent) as conn:
        result: dict[str, Any] = call(conn, "create_handoff", **fields)
    return result


def move(
    as_agent: AsAgent, tenant: Tenant, handoff_id: str, status: str, agent: str = "jasper", note: str | None = None
) -> dict[str, Any]:
    with as_agent(tenant, agent) as conn:
        result: dict[str, Any] = call(conn, "update_handoff_status", handoff_id=handoff_id, status=status, note=note)
    return result


def snapshot(admin: Any, tenant: Tenant, contact_id: str) -> dict[str, Any]:
    """Everything a handoff writes, to prove a refused one wrote nothing."""
    row = admin.execute(
        """select (select count(*) from cortex.handoff_events where tenant_id = %(t)s) as handoffs,
                  (select count(*) from cortex.handoff_audit where tenant_id = %(t)s) as audit,
                  (select count(*) from cortex.outbox where tenant_id = %(t)s) as outbox,
                  (select count(*) from cortex.token_usage where tenant_id = %(t)s) as usage,
                  (select count(*) from cortex.jobs where tenant_id = %(t)s and kind = 'generate_context') as jobs,
                  (select count(*) from cortex.contact_context where tenant_id = %(t)s) as contexts,
                  (select owner_agent from cortex.contacts where tenant_id = %(t)s and id = %(c)s) as owner_agent,
                  (select owner_human_id from cortex.contacts where tenant_id = %(t)s and id = %(c)s) as owner_human""",
        {"t": tenant.id, "c": contact_id},
    ).fetchone()
    assert row is not None
    return dict(row)


def outbox(admin: Any, tenant: Tenant, event_prefix: str = "handoff.") -> list[dict[str, Any]]:
    return list(
        admin.execute(
            "select event, recipient, payload, idempotency_key from cortex.outbox "
            "where tenant_id = %s and event like %s order by id",
            (tenant.id, event_prefix + "%"),
        ).fetchall()
    )


def log_note(as_agent: AsAgent, tenant: Tenant, contact_id: str, summary: str, agent: str = "anna") -> None:
    with as_agent(tenant, agent) as conn:
        # Not significant on its own, so any context job queued later is the handoff's.
        call(
            conn,
            "log_interaction",
            contact_id=contact_id,
            type="email_received",
            summary=summary,
            sentiment="neutral",
            intent="question",
        )


def store_context(as_agent: AsAgent, tenant: Tenant, contact_id: str, summary: str) -> None:
    with as_agent(tenant, "luna") as conn:
        count = conn.execute("select interaction_count from cortex.contacts where id = %s", (contact_id,)).fetchone()
        assert count is not None
        call(
            conn,
            "refresh_context",
            contact_id=contact_id,
            interaction_count=count[0],
            context={
                "summary": summary,
                "key_facts": ["Buys in bulk"],
                "current_status": "Evaluating",
                "recommended_tone": "Friendly",
            },
        )


# --- creation ---------------------------------------------------------------------------------


def test_handoff_to_an_agent_moves_owner_refreshes_context_notifies_and_meters_the_briefing(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    log_note(as_agent, tenant, contact["id"], "John asked about bulk pricing for 1000+ units.")
    store_context(as_agent, tenant, contact["id"], "John runs procurement at Acme Corp.")

    result = handoffs.create_handoff(
        agent_claims(tenant.id, "anna"),
        contact_id=contact["id"],
        to_agent="jasper",
        reason="warm_reply",
        reason_detail="Prospect asked about bulk pricing for 1000+ units",
        urgency="high",
    )

    assert result["status"] == "pending" and result["contact_id"] == contact["id"]
    assert result["notifications_sent"] == ["jasper", "helios"]
    assert result["context_refreshed"] is True
    # The local generator's briefing: why, the working context, the latest interaction.
    assert result["context_summary"].startswith("Anna is handing John Smith (Acme Corp) to jasper — warm reply")
    assert "John runs procurement at Acme Corp." in result["context_summary"]
    assert "bulk pricing" in result["context_summary"]
    assert result["suggested_action"]

    row = admin.execute("select * from cortex.handoff_events where id = %s", (result["id"],)).fetchone()
    assert (row["from_agent"], row["to_agent"], row["to_human_id"], row["urgency"], row["urgency_rank"]) == (
        "anna",
        "jasper",
        None,
        "high",
        3,
    )
    assert row["previous_owner_agent"] is None
    c = admin.execute(
        "select owner_agent, owner_human_id from cortex.contacts where id = %s", (contact["id"],)
    ).fetchone()
    assert c == {"owner_agent": "jasper", "owner_human_id": None}

    x = admin.execute(
        "select stale_since, last_handoff_id, last_handoff_summary from cortex.contact_context where contact_id = %s",
        (contact["id"],),
    ).fetchone()
    assert x["stale_since"] is not None
    assert str(x["last_handoff_id"]) == result["id"] and x["last_handoff_summary"] == result["context_summary"]
    jobs = admin.execute(
        "select payload from cortex.jobs where kind = 'generate_context' and status = 'queued' and dedup_key = %s",
        (contact["id"],),
    ).fetchall()
    assert [j["payload"]["reason"] for j in jobs] == ["handoff"]

    messages = outbox(admin, tenant)
    assert [(m["event"], m["recipient"]) for m in messages] == [
        ("handoff.created", "agent:jasper"),
        ("handoff.created", "monitor"),
    ]
    for m in messages:
        assert m["idempotency_key"] == f"handoff.created:{result['id']}:{m['recipient']}"
        assert m["payload"]["id"] == result["id"] and m["payload"]["reason"] == "warm_reply"
        assert m["payload"]["contact"]["email"] == "john@acme.com"
        assert m["payload"]["contact"]["name"] == "John Smith"

    usage = admin.execute(
        "select agent, model, operation, contact_id, input_tokens, output_tokens "
        "from cortex.token_usage where operation = 'handoff_summary'"
    ).fetchall()
    assert len(usage) == 1
    assert usage[0]["agent"] == "anna" and usage[0]["model"] == "local-summariser-v1"
    assert str(usage[0]["contact_id"]) == contact["id"]
    assert usage[0]["input_tokens"] > 0 and usage[0]["output_tokens"] > 0

    with as_agent(tenant, "jasper") as conn:
        ctx = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert ctx["is_stale"] is True
    handoff = ctx["last_handoff"]
    assert (handoff["from"], handoff["to"], handoff["reason"]) == ("anna", "jasper", "warm_reply")
    assert handoff["date"].endswith("Z")


def test_handoff_to_a_human_sets_owner_human_id_and_notifies_that_human(
    tenant: Tenant, as_agent: AsAgent, admin: Any, dsn: str, contact: dict[str, Any]
) -> None:
    admin.execute("update cortex.contacts set owner_agent = 'luna' where id = %s", (contact["id"],))
    log_note(as_agent, tenant, contact["id"], "Customer wants a refund beyond policy.", agent="luna")

    # The seed's request body, from_agent included, sent straight to SQL (PostgREST): no model runs.
    result = create(
        as_agent,
        tenant,
        "luna",
        contact_id=contact["id"],
        from_agent="luna",
        to_human_id="support-manager-1",
        reason="escalation",
        reason_detail="Customer requesting refund beyond policy, needs manager approval",
        urgency="high",
    )

    assert result["notifications_sent"] == ["support-manager-1", "helios"]
    assert result["to_human_id"] == "support-manager-1" and result["to_agent"] is None
    # SQL's fallback briefing: who, why, stage, and the latest interaction summaries.
    assert result["context_summary"].startswith("Luna is handing John Smith (Acme Corp) to support-manager-1")
    assert "Recent:" in result["context_summary"] and "refund beyond policy" in result["context_summary"]
    c = admin.execute(
        "select owner_agent, owner_human_id from cortex.contacts where id = %s", (contact["id"],)
    ).fetchone()
    assert c == {"owner_agent": "luna", "owner_human_id": "support-manager-1"}
    assert [m["recipient"] for m in outbox(admin, tenant)] == ["human:support-manager-1", "monitor"]
    assert (
        admin.execute("select count(*) as n from cortex.token_usage where operation = 'handoff_summary'").fetchone()[
            "n"
        ]
        == 0
    )

    # No context had been generated: a stale stand-in carries last_handoff until the worker runs...
    with as_agent(tenant, "luna") as conn:
        ctx = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert ctx["is_stale"] is True and ctx["last_handoff"]["to"] == "support-manager-1"
    # ...and the generated context keeps it.
    with psycopg.connect(dsn) as worker_conn:
        context_service.generate_for_job(worker_conn, tenant.id, contact["id"])
        worker_conn.commit()
    with as_agent(tenant, "luna") as conn:
        ctx = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert ctx["is_stale"] is False
    assert ctx["last_handoff"]["from"] == "luna" and ctx["last_handoff"]["reason"] == "escalation"


def test_briefing_is_written_by_claude_haiku_when_configured(
    tenant: Tenant, admin: Any, contact: dict[str, Any], claude: FakeAnthropic
) -> None:
    result = handoffs.create_handoff(
        agent_claims(tenant.id, "anna"),
        contact_id=contact["id"],
        to_agent="jasper",
        reason="warm_reply",
        reason_detail="Asked about pricing",
    )
    assert result["context_summary"] == HANDOFF_ANSWER["context_summary"]
    assert result["suggested_action"] == HANDOFF_ANSWER["suggested_action"]
    assert len(claude.requests) == 1
    assert claude.requests[0]["model"] == "claude-haiku-4-5"
    assert claude.requests[0]["messages"][0]["content"].startswith("You are creating a handoff summary")
    usage = admin.execute(
        "select model, input_tokens, output_tokens from cortex.token_usage where operation = 'handoff_summary'"
    ).fetchall()
    assert len(usage) == 1 and usage[0]["model"] == "claude-haiku-4-5" and usage[0]["output_tokens"] > 0


def test_model_failure_falls_back_to_the_sql_briefing_and_still_hands_off(
    tenant: Tenant, admin: Any, contact: dict[str, Any], claude: FakeAnthropic
) -> None:
    claude.always_fail = True
    claude.fail_status = 500
    result = handoffs.create_handoff(
        agent_claims(tenant.id, "anna"),
        contact_id=contact["id"],
        to_agent="jasper",
        reason="complex_question",
        suggested_action="Call them",
    )
    assert len(claude.requests) == 1
    assert result["context_summary"].startswith("Anna is handing John Smith (Acme Corp) to jasper — complex question")
    assert result["suggested_action"] == "Call them"
    # The failed call is recorded with what the API reported (nothing: 0 tokens) and its error.
    usage = admin.execute("select total_tokens, metadata from cortex.token_usage").fetchall()
    assert len(usage) == 1 and usage[0]["total_tokens"] == 0 and "500" in usage[0]["metadata"]["error"]
    assert (
        admin.execute("select owner_agent from cortex.contacts where id = %s", (contact["id"],)).fetchone()[
            "owner_agent"
        ]
        == "jasper"
    )


def test_a_given_context_summary_is_kept_and_no_model_is_called(
    tenant: Tenant, admin: Any, contact: dict[str, Any], claude: FakeAnthropic
) -> None:
    result = handoffs.create_handoff(
        agent_claims(tenant.id, "anna"),
        contact_id=contact["id"],
        to_agent="mia",
        reason="upsell_opportunity",
        context_summary="Ready for the annual plan.",
    )
    assert result["context_summary"] == "Ready for the annual plan."
    assert claude.requests == []
    assert admin.execute("select count(*) as n from cortex.token_usage").fetchone()["n"] == 0


def test_handoff_without_a_monitor_agent_still_notifies_the_monitor_recipient(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    admin.execute("update cortex.agents set role = 'agent' where tenant_id = %s and name = 'helios'", (tenant.id,))
    result = create(as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="other")
    assert result["notifications_sent"] == ["jasper", "monitor"]
    assert [m["recipient"] for m in outbox(admin, tenant)] == ["agent:jasper", "monitor"]


# --- the pending queue and the stand-up list -----------------------------------------------------


def test_pending_queue_is_most_urgent_first_then_oldest_and_filters(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    def make(urgency: str, **to: str) -> str:
        return str(
            create(
                as_agent,
                tenant,
                contact_id=contact["id"],
                reason="other",
                urgency=urgency,
                context_summary=f"{urgency} {to}",
                **to,
            )["id"]
        )

    low = make("low", to_agent="jasper")
    urgent_1 = make("urgent", to_agent="jasper")
    normal_mia = make("normal", to_agent="mia")
    urgent_2 = make("urgent", to_agent="jasper")
    high_human = make("high", to_human_id="jedd-123")
    done = make("urgent", to_agent="jasper")
    move(as_agent, tenant, done, "accepted")

    def pending(**filters: Any) -> list[str]:
        with as_agent(tenant, "helios") as conn:
            return [h["id"] for h in call(conn, "get_pending_handoffs", **filters)["items"]]

    assert pending() == [urgent_1, urgent_2, high_human, normal_mia, low]
    assert pending(agent="jasper") == [urgent_1, urgent_2, low]
    assert pending(human_id="jedd-123") == [high_human]
    assert pending(urgency="urgent") == [urgent_1, urgent_2]
    assert pending(agent="mia", urgency="urgent") == []
    assert pending(limit=2) == [urgent_1, urgent_2]
    with as_agent(tenant, "helios") as conn:
        item = call(conn, "get_pending_handoffs", agent="mia")["items"][0]
    assert item["contact"]["email"] == "john@acme.com" and item["status"] == "pending"


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"urgency": "asap"}, "urgency"),
        ({"agent": "nobody"}, "agent"),
        ({"agent": "jasper", "human_id": "jedd-123"}, "agent"),
        ({"limit": 0}, "limit"),
    ],
)
def test_pending_queue_rejects_bad_filters_naming_the_field(
    tenant: Tenant, as_agent: AsAgent, filters: dict[str, Any], field: str
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
        call(conn, "get_pending_handoffs", **filters)
    assert err.value.status == 422 and err.value.field == field


def test_list_handoffs_filters_by_since_status_and_contact(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        other = call(conn, "upsert_contact", email="mary@globex.com", name="Mary")
    first = create(
        as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="warm_reply", context_summary="first"
    )["id"]
    second = create(
        as_agent, tenant, contact_id=other["id"], to_agent="mia", reason="churn_risk", context_summary="second"
    )["id"]
    third = create(
        as_agent, tenant, contact_id=contact["id"], to_human_id="jedd", reason="escalation", context_summary="third"
    )["id"]
    since = admin.execute("select clock_timestamp() as t").fetchone()["t"]
    move(as_agent, tenant, first, "accepted")
    move(as_agent, tenant, first, "completed")

    def listed(**filters: Any) -> list[str]:
        with as_agent(tenant, "helios") as conn:
            return [h["id"] for h in call(conn, "list_handoffs", **filters)["items"]]

    assert listed() == [first, third, second]  # most recently changed first
    assert listed(since=since) == [first]
    assert listed(since=since, status="completed") == [first]
    assert listed(status="pending") == [third, second]
    assert listed(contact_id=other["id"]) == [second]
    assert listed(contact_id=contact["id"], status="pending") == [third]
    assert listed(limit=1) == [first]

    with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
        call(conn, "list_handoffs", status="done")
    assert err.value.status == 422 and err.value.field == "status"
    with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
        call(conn, "list_handoffs", contact_id=str(uuid.uuid4()))
    assert err.value.status == 404 and err.value.field == "contact_id"


# --- the status machine and its audit trail ------------------------------------------------------


@pytest.mark.parametrize("target", STATUSES)
@pytest.mark.parametrize("start", STATUSES)
def test_status_moves_only_along_the_allowed_paths(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any], start: str, target: str
) -> None:
    hid = create(as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="other", context_summary="x")[
        "id"
    ]
    for step in PATH_TO[start]:
        move(as_agent, tenant, hid, step)
    before = snapshot(admin, tenant, contact["id"])

    if target in MOVES[start]:
        result = move(as_agent, tenant, hid, target, note=f"to {target}")
        assert result["status"] == target and result["status_note"] == f"to {target}"
        assert result["allowed_moves"] == MOVES[target]
        assert result[f"{target}_at"] is not None
        if target == "accepted":
            assert result["accepted_by"] == "jasper"
        assert [m["event"] for m in outbox(admin, tenant, f"handoff.{target}")] == [f"handoff.{target}"] * 2
    else:
        with pytest.raises(CortexError) as err:
            move(as_agent, tenant, hid, target)
        e = err.value
        assert (e.status, e.code, e.field, e.sqlstate) == (409, "object_not_in_prerequisite_state", "status", "55000")
        assert json.loads(e.details["detail"]) == {"from": start, "to": target, "allowed": MOVES[start]}
        if MOVES[start]:
            assert e.message.endswith(f"allowed moves from {start}: {', '.join(MOVES[start])}")
        else:
            assert "no further moves are allowed" in e.message
        assert snapshot(admin, tenant, contact["id"]) == before
        status = admin.execute("select status from cortex.handoff_events where id = %s", (hid,)).fetchone()
        assert status["status"] == start


def test_update_status_rejects_unknown_status_unknown_handoff_and_read_only_agents(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    hid = create(as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="other", context_summary="x")[
        "id"
    ]
    with pytest.raises(CortexError) as err:
        move(as_agent, tenant, hid, "done")
    assert err.value.status == 422 and err.value.field == "status"
    with pytest.raises(CortexError) as err:
        move(as_agent, tenant, str(uuid.uuid4()), "accepted")
    assert err.value.status == 404 and err.value.field == "handoff_id"
    with pytest.raises(CortexError) as err:
        move(as_agent, tenant, hid, "accepted", agent="helios")
    assert err.value.status == 403
    with as_agent(tenant, "helios") as conn:
        assert call(conn, "get_handoff", handoff_id=hid)["status"] == "pending"


def test_rejection_gives_the_contact_back_and_notifies_the_sender(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    admin.execute("update cortex.contacts set owner_agent = 'anna' where id = %s", (contact["id"],))
    hid = create(
        as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="warm_reply", context_summary="x"
    )["id"]
    result = move(as_agent, tenant, hid, "rejected", note="Not my territory")
    assert result["status"] == "rejected" and result["rejected_at"] is not None
    assert result["notifications_sent"] == ["anna", "helios"]
    assert (
        admin.execute("select owner_agent from cortex.contacts where id = %s", (contact["id"],)).fetchone()[
            "owner_agent"
        ]
        == "anna"
    )
    rejected = outbox(admin, tenant, "handoff.rejected")
    assert [m["recipient"] for m in rejected] == ["agent:anna", "monitor"]
    assert rejected[0]["payload"]["actor"] == "jasper" and rejected[0]["payload"]["status_note"] == "Not my territory"


def test_every_change_is_audited_and_no_api_role_can_rewrite_the_trail(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    hid = create(
        as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="warm_reply", context_summary="x"
    )["id"]
    move(as_agent, tenant, hid, "accepted", note="On it")
    move(as_agent, tenant, hid, "completed", agent="jasper", note="Sent the pricing sheet")

    trail = admin.execute(
        "select from_status, to_status, actor, note, changes from cortex.handoff_audit "
        "where handoff_id = %s order by id",
        (hid,),
    ).fetchall()
    assert [(t["from_status"], t["to_status"], t["actor"], t["note"]) for t in trail] == [
        (None, "pending", "anna", "created"),
        ("pending", "accepted", "jasper", "On it"),
        ("accepted", "completed", "jasper", "Sent the pricing sheet"),
    ]
    assert trail[1]["changes"]["status"] == {"from": "pending", "to": "accepted"}
    assert trail[1]["changes"]["accepted_by"] == {"from": None, "to": "jasper"}
    with as_agent(tenant, "helios") as conn:
        history = call(conn, "get_handoff", handoff_id=hid)["history"]
    assert [h["to_status"] for h in history] == ["pending", "accepted", "completed"]

    for agent in ("jasper", "helios"):
        for statement in (
            "update cortex.handoff_audit set note = 'rewritten'",
            "delete from cortex.handoff_audit",
            f"insert into cortex.handoff_audit (tenant_id, handoff_id, to_status, actor) "
            f"values ('{tenant.id}', '{hid}', 'completed', 'jasper')",
            "delete from cortex.handoff_events",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, agent) as conn:
                conn.execute(statement)
    # Not even the owner rewrites it.
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("update cortex.handoff_audit set note = 'rewritten'")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("delete from cortex.handoff_audit where handoff_id = %s", (hid,))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("truncate cortex.handoff_audit")
    assert admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"] == 3


def test_direct_table_writes_cannot_skip_the_status_machine_or_change_the_record(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    hid = create(as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="other", context_summary="x")[
        "id"
    ]
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState), as_agent(tenant, "jasper") as conn:
        conn.execute("update cortex.handoff_events set status = 'completed' where id = %s", (hid,))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState), as_agent(tenant, "jasper") as conn:
        conn.execute("update cortex.handoff_events set context_summary = 'forged' where id = %s", (hid,))
    # An agent cannot insert a handoff in another agent's name.
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "jasper") as conn:
        conn.execute(
            "insert into cortex.handoff_events (tenant_id, contact_id, from_agent, to_agent, reason, "
            "context_summary) values (%s, %s, 'anna', 'mia', 'other', 'x')",
            (tenant.id, contact["id"]),
        )


def test_deleting_a_contact_or_tenant_takes_its_audit_trail_with_it(
    tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        other = call(conn, "upsert_contact", email="mary@globex.com", name="Mary")
    for contact_id in (contact["id"], other["id"]):
        hid = create(as_agent, tenant, contact_id=contact_id, to_agent="jasper", reason="other", context_summary="x")[
            "id"
        ]
        move(as_agent, tenant, hid, "accepted")
    assert admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"] == 4
    # The erasure of a contact (an operator's job) cascades through its handoffs to their trail.
    admin.execute("delete from cortex.contacts where id = %s", (other["id"],))
    assert admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"] == 2
    admin.execute("delete from cortex.tenants where id = %s", (tenant.id,))
    assert admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"] == 0
    assert admin.execute("select count(*) as n from cortex.handoff_events").fetchone()["n"] == 0


def test_two_agents_accepting_at_once_exactly_one_wins(
    tenant: Tenant, as_agent: AsAgent, admin: Any, dsn: str, contact: dict[str, Any]
) -> None:
    # Two who may accept it: the addressee and an admin (the system agent, what the service key acts as).
    hid = create(
        as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="warm_reply", context_summary="x"
    )["id"]
    barrier = threading.Barrier(2)
    release = threading.Event()
    outcomes: dict[str, Any] = {}

    def accept(agent: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            try:
                with as_caller(agent_claims(tenant.id, agent), conn):
                    barrier.wait(timeout=10)
                    outcomes[agent] = call(conn, "update_handoff_status", handoff_id=hid, status="accepted")
                    # Hold the row lock until the other request is seen waiting for it.
                    release.wait(timeout=10)
            except CortexError as exc:
                outcomes[agent] = exc

    threads = [threading.Thread(target=accept, args=(a,)) for a in ("jasper", "system")]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    waiting = 0
    while time.monotonic() < deadline and not waiting:
        waiting = admin.execute(
            "select count(*) as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'"
        ).fetchone()["n"]
        time.sleep(0.02)
    release.set()
    for t in threads:
        t.join(timeout=15)

    assert waiting == 1, "the second accept should have waited on the first one's row lock"
    winners = [a for a, o in outcomes.items() if isinstance(o, dict)]
    losers = [o for o in outcomes.values() if isinstance(o, CortexError)]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0].status == 409 and json.loads(losers[0].details["detail"])["allowed"] == ["completed", "rejected"]
    row = admin.execute("select status, accepted_by from cortex.handoff_events where id = %s", (hid,)).fetchone()
    assert row == {"status": "accepted", "accepted_by": winners[0]}
    assert (
        admin.execute(
            "select count(*) as n from cortex.handoff_audit where handoff_id = %s and to_status = 'accepted'", (hid,)
        ).fetchone()["n"]
        == 1
    )
    assert len(outbox(admin, tenant, "handoff.accepted")) == 2


# --- bad input: a clear 4xx naming the field, nothing written, no model called ---------------------

BAD_REQUESTS: list[tuple[str, str, dict[str, Any], int, str | None]] = [
    (
        "unknown_contact",
        "anna",
        {"contact_id": "00000000-0000-4000-8000-000000000000", "to_agent": "jasper"},
        404,
        "contact_id",
    ),
    ("unknown_agent", "anna", {"to_agent": "zeus"}, 422, "to_agent"),
    ("both_recipients", "anna", {"to_agent": "jasper", "to_human_id": "jedd-123"}, 422, "to_agent"),
    ("no_recipient", "anna", {}, 422, "to_agent"),
    ("blank_human", "anna", {"to_human_id": "  "}, 422, "to_human_id"),
    ("unknown_reason", "anna", {"to_agent": "jasper", "reason": "bored"}, 422, "reason"),
    ("missing_reason", "anna", {"to_agent": "jasper", "reason": None}, 422, "reason"),
    ("unknown_urgency", "anna", {"to_agent": "jasper", "urgency": "asap"}, 422, "urgency"),
    ("to_itself", "anna", {"to_agent": "anna"}, 422, "to_agent"),
    ("to_read_only_agent", "anna", {"to_agent": "helios"}, 422, "to_agent"),
    ("from_someone_else", "anna", {"to_agent": "jasper", "from_agent": "luna"}, 422, "from_agent"),
    ("metadata_not_object", "anna", {"to_agent": "jasper", "metadata": [1]}, 422, "metadata"),
    ("read_only_writer", "helios", {"to_agent": "jasper"}, 403, None),
]


@pytest.mark.parametrize(
    ("agent", "fields", "status", "field"), [b[1:] for b in BAD_REQUESTS], ids=[b[0] for b in BAD_REQUESTS]
)
@pytest.mark.parametrize("path", ["python", "sql"])
def test_bad_handoff_request_is_refused_naming_the_field_and_writes_nothing(
    tenant: Tenant,
    as_agent: AsAgent,
    admin: Any,
    contact: dict[str, Any],
    claude: FakeAnthropic,
    path: str,
    agent: str,
    fields: dict[str, Any],
    status: int,
    field: str | None,
) -> None:
    admin.execute("update cortex.contacts set owner_agent = 'anna' where id = %s", (contact["id"],))
    before = snapshot(admin, tenant, contact["id"])
    request = {"contact_id": contact["id"], "reason": "warm_reply", **fields}
    if path == "python":
        request = {k: v for k, v in request.items() if v is not None}
        with pytest.raises(CortexError) as err:
            handoffs.create_handoff(agent_claims(tenant.id, agent), **request)
    else:
        if isinstance(request.get("metadata"), list):
            request["metadata"] = Jsonb(request["metadata"])
        with pytest.raises(CortexError) as err:
            create(as_agent, tenant, agent, **request)
    assert err.value.status == status
    assert err.value.field == field
    assert err.value.message
    assert snapshot(admin, tenant, contact["id"]) == before
    assert claude.requests == []


# --- tenant isolation ------------------------------------------------------------------------------


def test_another_tenant_can_neither_see_nor_move_nor_target_a_handoff(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]
) -> None:
    hid = create(as_agent, tenant, contact_id=contact["id"], to_agent="jasper", reason="other", context_summary="x")[
        "id"
    ]
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "jasper") as conn:
        call(conn, "get_handoff", handoff_id=hid)
    assert err.value.status == 404 and err.value.field == "handoff_id"
    with pytest.raises(CortexError) as err:
        move(as_agent, other_tenant, hid, "accepted")
    assert err.value.status == 404
    with as_agent(other_tenant, "helios") as conn:
        assert call(conn, "get_pending_handoffs")["items"] == []
        assert call(conn, "list_handoffs")["items"] == []
        assert conn.execute("select count(*) from cortex.handoff_audit").fetchone() == (0,)
    with pytest.raises(CortexError) as err:
        create(as_agent, other_tenant, contact_id=contact["id"], to_agent="jasper", reason="other")
    assert err.value.status == 404 and err.value.field == "contact_id"
    assert (
        admin.execute("select status from cortex.handoff_events where id = %s", (hid,)).fetchone()["status"]
        == "pending"
    )
