"""One tenant never sees or changes another's rows: every API function, on the PostgREST path.

(The HTTP path is covered in test_api.py with a second tenant's key.)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from cortex.db import Jsonb, agent_claims, become, call, call_once
from cortex.errors import CortexError
from tests.api_helpers import bearer
from tests.conftest import AsAgent, Tenant

# Each API function, called by the other tenant against the first tenant's contact / handoff.
Attack = Callable[[psycopg.Connection[Any], dict[str, str]], Any]


def _import(c: psycopg.Connection[Any], t: dict[str, str]) -> Any:
    # import_interactions reports an unknown contact per row (200); here it stands for the 404.
    item = {"contact_id": t["contact"], "type": "note", "external_id": "x", "occurred_at": "2024-01-01T00:00:00Z"}
    result = call(c, "import_interactions", items=Jsonb([item]))
    if result["inserted"] == 0 and "unknown contact" in result["errors"][0]["message"]:
        raise CortexError(404, "not_found", result["errors"][0]["message"], "contact_id")
    return result


ATTACKS: dict[str, Attack] = {
    "get_contact": lambda c, t: call(c, "get_contact", contact_id=t["contact"]),
    "update_contact": lambda c, t: call(c, "update_contact", contact_id=t["contact"], patch={"name": "pwned"}),
    "log_interaction": lambda c, t: call(c, "log_interaction", contact_id=t["contact"], type="note", summary="x"),
    "list_interactions": lambda c, t: call(c, "list_interactions", contact_id=t["contact"]),
    "import_interactions": _import,
    "get_context": lambda c, t: call(c, "get_context", contact_id=t["contact"], level=3),
    "refresh_context": lambda c, t: call(c, "refresh_context", contact_id=t["contact"], context={"summary": "forged"}),
    "create_handoff": lambda c, t: call(
        c, "create_handoff", contact_id=t["contact"], to_agent="jasper", reason="warm_reply", context_summary="x"
    ),
    "get_handoff": lambda c, t: call(c, "get_handoff", handoff_id=t["handoff"]),
    "update_handoff_status": lambda c, t: call(c, "update_handoff_status", handoff_id=t["handoff"], status="accepted"),
}
# Functions that take no contact id: they must simply not return the other tenant's rows.
LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "search_contacts": lambda c: call(c, "search_contacts", search="john")["items"],
    "upsert_contact": lambda c: [call(c, "upsert_contact", email="john@acme.com", name="Other John")],
    "get_pending_handoffs": lambda c: call(c, "get_pending_handoffs")["items"],
    "list_handoffs": lambda c: call(c, "list_handoffs")["items"],
    "list_alerts": lambda c: call(c, "list_alerts")["items"],
}
# Admin-only functions, called by the other tenant's admin (system) against the first tenant's alert
# and webhook endpoint, and the admin listings, which must not show them.
ADMIN_ATTACKS: dict[str, Attack] = {
    "ack_alert": lambda c, t: call(c, "ack_alert", alert_id=int(t["alert"])),
    "remove_webhook": lambda c, t: call(c, "remove_webhook", webhook_id=t["webhook"]),
}
ADMIN_LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "list_webhooks": lambda c: call(c, "list_webhooks")["items"],
    "add_webhook": lambda c: [call(c, "add_webhook", recipient="monitor", url="https://other.example.com/hook")],
}
# Usage functions answer about the caller's own tenant only: the first tenant's spend must not show.
USAGE: dict[str, Callable[[psycopg.Connection[Any]], int]] = {
    "usage_summary": lambda c: int(call(c, "usage_summary", period="month")["totals"]["total_tokens"]),
    "budget_check": lambda c: int(call(c, "budget_check", agent="luna")["used_today"]),
    "record_usage": lambda c: int(
        call(c, "record_usage", model="haiku", operation="probe", input_tokens=0, output_tokens=0)["budget"][
            "used_today"
        ]
    ),
}


@pytest.fixture
def target(tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any) -> dict[str, str]:
    """The first tenant's contact, a handoff of it, some spend, an alert and a webhook endpoint."""
    with as_agent(tenant, "luna") as conn:
        handoff = call(
            conn,
            "create_handoff",
            contact_id=contact["id"],
            to_agent="jasper",
            reason="warm_reply",
            context_summary="Asked for pricing",
        )
        call(conn, "record_usage", model="haiku", operation="write_email", input_tokens=700, output_tokens=300)
    alert = admin.execute(
        "insert into cortex.alerts (tenant_id, kind, message) values (%s, 'job_parked', 'x') returning id", (tenant.id,)
    ).fetchone()["id"]
    webhook = admin.execute(
        "insert into cortex.webhook_endpoints (tenant_id, recipient, url) values (%s, 'monitor', 'https://a.example')"
        " returning id",
        (tenant.id,),
    ).fetchone()["id"]
    return {"contact": contact["id"], "handoff": handoff["id"], "alert": str(alert), "webhook": str(webhook)}


def _api_functions(admin: Any) -> set[str]:
    rows = admin.execute(
        """select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname = 'public' and has_function_privilege('authenticated', p.oid, 'execute')"""
    ).fetchall()
    return {r["proname"] for r in rows}


def test_every_api_function_has_an_isolation_check(admin: Any) -> None:
    checked = set(ATTACKS) | set(LISTINGS) | set(USAGE) | set(ADMIN_ATTACKS) | set(ADMIN_LISTINGS)
    checked |= set(CONSOLIDATION_ATTACKS) | set(CONSOLIDATION_LISTINGS)
    voice = set(VOICE_ATTACKS) | set(VOICE_LISTINGS)
    checked |= set(DASHBOARD_LISTINGS)
    checked |= set(CUSTOMER_ATTACKS)
    checked |= {"whoami"}  # answers only about the caller: test_whoami_names_only_the_callers_own_tenant_and_agent
    assert _api_functions(admin) <= checked | set(MEMORY_ATTACKS) | set(MEMORY_LISTINGS) | voice


# --- the memory graph, briefings and ingest (issues 13 and 8) ------------------------------------

# Called by the other tenant against the first tenant's memory (`memory`, linked to `other`) or
# ingested file: each is a 404, and the memory is unchanged.
MEMORY_ATTACKS: dict[str, Attack] = {
    "get_memory": lambda c, t: call(c, "get_memory", memory_id=t["memory"]),
    "update_memory": lambda c, t: call(c, "update_memory", memory_id=t["memory"], patch={"title": "pwned"}),
    "supersede_memory": lambda c, t: call(c, "supersede_memory", memory_id=t["memory"], title="pwned"),
    "forget_memory": lambda c, t: call(c, "forget_memory", memory_id=t["memory"]),
    "link_memories": lambda c, t: call(
        c, "link_memories", source_id=t["memory"], target_id=t["other"], relation="relates_to"
    ),
    "neighbors": lambda c, t: call(c, "neighbors", node_id=t["memory"]),
    "traverse_graph": lambda c, t: call(c, "traverse_graph", start_ids=[t["memory"]]),
    "remember": lambda c, t: call(
        c,
        "remember",
        kind="fact",
        title="pwned link",
        links=Jsonb([{"target_id": t["memory"], "relation": "relates_to"}]),
    ),
    "get_ingest_file": lambda c, t: call(c, "get_ingest_file", file_id=t["ingest"]),
}
# No memory id to aim at: what they return must not hold the first tenant's memories or files.
MEMORY_LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "list_memories": lambda c: call(c, "list_memories", kinds=["fact"])["items"],
    "search_memories": lambda c: [r["memory"] for r in call(c, "search_memories", query="Acme pallets")["results"]],
    "graph_stats": lambda c: [call(c, "graph_stats")],
    "graph_version": lambda c: [call(c, "graph_version")],
    "get_briefing": lambda c: [call(c, "get_briefing")],
    "list_ingest_files": lambda c: call(c, "list_ingest_files")["items"],
    "ingest_chunks": lambda c: [
        call(
            c,
            "ingest_chunks",
            file_name="notes.md",
            format="md",
            chunks=Jsonb([{"title": "Acme pallets", "body": "x"}]),
        )
    ],
    "fail_ingest": lambda c: [call(c, "fail_ingest", file_name="bad.bin", error="binary")],
}


@pytest.fixture
def memory_target(tenant: Tenant, as_agent: AsAgent) -> dict[str, str]:
    """The first tenant's memories (one linked to another) and an ingested file."""
    with as_agent(tenant, "luna") as conn:
        other = call(conn, "remember", kind="fact", title="Acme ships on pallets")["memory"]["id"]
        memory = call(
            conn, "remember", kind="fact", title="Acme pallets secret: 40 per truck",
            links=Jsonb([{"target_id": other, "relation": "relates_to"}]),
        )["memory"]["id"]  # fmt: skip
        chunk = {"title": "Acme pallets rule", "body": "Always strap Acme pallets."}
        ingested = call(conn, "ingest_chunks", file_name="acme.md", format="md", chunks=Jsonb([chunk]))
    return {"memory": str(memory), "other": str(other), "ingest": str(ingested["file_id"])}


def _memory_state(admin: Any, target: dict[str, str]) -> Any:
    return admin.execute(
        "select title, status, (select count(*) from cortex.memory_edges where source_id = %s) as edges"
        " from cortex.memory_nodes where id = %s",
        (target["memory"], target["memory"]),
    ).fetchone()


@pytest.mark.parametrize("name", sorted(MEMORY_ATTACKS))
def test_other_tenant_cannot_reach_a_memory_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, memory_target: dict[str, str]
) -> None:
    before = _memory_state(admin, memory_target)
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "luna") as conn:
        MEMORY_ATTACKS[name](conn, memory_target)
    assert err.value.status == 404
    assert _memory_state(admin, memory_target) == before


@pytest.mark.parametrize("name", sorted(MEMORY_LISTINGS))
def test_other_tenant_sees_none_of_the_first_tenants_memories_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, memory_target: dict[str, str]
) -> None:
    before = _memory_state(admin, memory_target)
    with as_agent(other_tenant, "luna") as conn:
        text = json.dumps(MEMORY_LISTINGS[name](conn), default=str)
    for value in memory_target.values():
        assert value not in text
    assert "40 per truck" not in text and "strap Acme" not in text
    assert _memory_state(admin, memory_target) == before


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_other_tenant_cannot_reach_a_contact_through(
    name: str,
    tenant: Tenant,
    other_tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Any,
    target: dict[str, str],
) -> None:
    before = admin.execute(
        "select (select count(*) from cortex.interactions) as i, "
        "(select count(*) from cortex.contact_context) as x, (select count(*) from cortex.handoff_events) as h, "
        "(select string_agg(status, ',') from cortex.handoff_events) as hs, "
        "(select name from cortex.contacts where id = %s) as name",
        (contact["id"],),
    ).fetchone()
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "luna") as conn:
        ATTACKS[name](conn, target)
    assert err.value.status == 404
    after = admin.execute(
        "select (select count(*) from cortex.interactions) as i, "
        "(select count(*) from cortex.contact_context) as x, (select count(*) from cortex.handoff_events) as h, "
        "(select string_agg(status, ',') from cortex.handoff_events) as hs, "
        "(select name from cortex.contacts where id = %s) as name",
        (contact["id"],),
    ).fetchone()
    assert after == before


@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_other_tenant_sees_only_its_own_rows_through(
    name: str,
    tenant: Tenant,
    other_tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    target: dict[str, str],
) -> None:
    with as_agent(other_tenant, "luna") as conn:
        rows = LISTINGS[name](conn)
    assert all(str(r["id"]) not in target.values() for r in rows)
    assert all(r.get("contact_id") != target["contact"] for r in rows)
    with as_agent(tenant, "luna") as conn:
        mine = call(conn, "get_contact", contact_id=contact["id"])
    assert mine["name"] == "John Smith"


# Direct reads of every table an API role can read: tests/test_guards.py (driven by the catalog).


def _alert_and_webhook(admin: Any, target: dict[str, str]) -> Any:
    return admin.execute(
        "select (select acknowledged_at from cortex.alerts where id = %s) as acked,"
        " (select url from cortex.webhook_endpoints where id = %s) as url",
        (int(target["alert"]), target["webhook"]),
    ).fetchone()


@pytest.mark.parametrize("name", sorted(ADMIN_ATTACKS))
def test_other_tenants_admin_cannot_reach_an_alert_or_webhook_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, target: dict[str, str]
) -> None:
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "system") as conn:
        ADMIN_ATTACKS[name](conn, target)
    assert err.value.status == 404
    assert _alert_and_webhook(admin, target) == {"acked": None, "url": "https://a.example"}


@pytest.mark.parametrize("name", sorted(ADMIN_LISTINGS))
def test_other_tenants_admin_sees_only_its_own_endpoints_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, target: dict[str, str]
) -> None:
    with as_agent(other_tenant, "system") as conn:
        rows = ADMIN_LISTINGS[name](conn)
    assert all(str(r["id"]) not in target.values() and r["url"] != "https://a.example" for r in rows)
    assert _alert_and_webhook(admin, target) == {"acked": None, "url": "https://a.example"}


def test_a_request_without_tenant_claims_is_refused(dsn: str, contact: dict[str, Any]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("set local role authenticated")
        with pytest.raises(CortexError) as err:
            call(conn, "get_contact", contact_id=contact["id"])
    assert err.value.status == 401


def test_anon_cannot_call_api_functions(dsn: str, contact: dict[str, Any]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("set local role anon")
        with pytest.raises(CortexError) as err:
            call(conn, "get_contact", contact_id=contact["id"])
    assert err.value.status == 403


def test_api_roles_cannot_read_api_keys(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select * from cortex.agent_keys")


@pytest.mark.parametrize("name", sorted(USAGE))
def test_other_tenant_never_counts_the_first_tenants_usage_through(
    name: str, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, target: dict[str, str]
) -> None:
    with as_agent(other_tenant, "luna") as conn:
        assert USAGE[name](conn) == 0
    with as_agent(tenant, "luna") as conn:
        assert USAGE[name](conn) == 1000


# Owner-only functions of the operators (CLI, demo loader): they see every tenant, so no API role may
# run them. Each with arguments that would work for the owner.
OPERATOR_FUNCTIONS: dict[str, Callable[[Tenant], dict[str, Any]]] = {
    "cortex.list_tenants": lambda t: {},
    "cortex.resolve_tenant": lambda t: {"p_ref": t.slug},
    "cortex.list_agents": lambda t: {"p_tenant_id": t.id},
    "cortex.list_agent_keys": lambda t: {"p_tenant_id": t.id},
    "cortex.delete_tenant": lambda t: {"p_tenant_id": t.id},
    "cortex.tenant_config": lambda t: {"p_tenant_id": t.id},
    "cortex.merge_tenant_config": lambda t: {"p_tenant_id": t.id, "p_config": {"x": 1}},
    "cortex.request_tenant_context_refresh": lambda t: {"p_tenant_id": t.id, "p_reason": "probe"},
    "cortex.tenant_stats": lambda t: {"p_tenant_id": t.id},
    "cortex.open_dashboard_session": lambda t: {"p_tenant_id": t.id, "p_agent": "helios", "p_ttl_seconds": 600},
    "cortex.dashboard_session_claims": lambda t: {"p_token": "dsh_probe"},
    "cortex.close_dashboard_session": lambda t: {"p_token": "dsh_probe"},
    "cortex.close_dashboard_sessions": lambda t: {"p_tenant_id": t.id},
    "cortex.dashboard_cursor": lambda t: {},
    "cortex.dashboard_events": lambda t: {"p_after": 0},
}


@pytest.mark.parametrize("role", ["authenticated", "anon"])
def test_operator_functions_are_not_executable_by_api_roles(dsn: str, tenant: Tenant, role: str) -> None:
    for function, args in OPERATOR_FUNCTIONS.items():
        with pytest.raises(CortexError) as err, psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
            if role == "authenticated":
                become(conn, agent_claims(tenant.id, "luna"))
            else:
                conn.execute("set local role anon")
            call(conn, function, **args(tenant))
        assert err.value.sqlstate == "42501", function
    # The owner can, and nothing was changed by the refused calls.
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert call(conn, "cortex.resolve_tenant", p_ref=tenant.slug) is not None
        assert call(conn, "cortex.tenant_config", p_tenant_id=tenant.id) == {}


# --- voice (issue 9) ---------------------------------------------------------------------------------------

VOICE_PHONE = "+16125551234"
# Called by the other tenant against the first tenant's caller: a 404, and nothing changed.
VOICE_ATTACKS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "get_voice_caller": lambda c: call(c, "get_voice_caller", phone=VOICE_PHONE),
}
# No caller to aim at: what they return must not hold the first tenant's voice agent, caller or greeting,
# and writes land in the caller's own tenant.
VOICE_LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "voice_client_data": lambda c: [call(c, "voice_client_data", agent_id="agent_acme", caller_id=VOICE_PHONE)],
    "list_voice_agents": lambda c: call(c, "list_voice_agents")["items"],
    "add_voice_agent": lambda c: [call(c, "add_voice_agent", platform_agent_id="agent_acme", agent="system")],
    "set_voice_secrets": lambda c: [call(c, "set_voice_secrets", rotate_webhook_secret=True)],
}


# --- consolidation (issue 10) ----------------------------------------------------------------------

# Called by the other tenant's admin (system) against the first tenant's consolidation item (a merge
# of `memory` and `other`, done, so it can be undone) or its memories: each is a 404, and nothing changes.
CONSOLIDATION_ATTACKS: dict[str, Attack] = {
    "get_consolidation_item": lambda c, t: call(c, "get_consolidation_item", item_id=t["item"]),
    "claim_consolidation_item": lambda c, t: call(c, "claim_consolidation_item", item_id=t["item"]),
    "close_consolidation_item": lambda c, t: call(c, "close_consolidation_item", item_id=t["item"], reason="pwned"),
    "block_consolidation_item": lambda c, t: call(c, "block_consolidation_item", item_id=t["item"], error="pwned"),
    "undo_consolidation_merge": lambda c, t: call(c, "undo_consolidation_merge", item_id=t["item"]),
    "create_consolidation_item": lambda c, t: call(
        c, "create_consolidation_item", agent="cluster", memory_ids=[t["memory"], t["other"]], action="merge"
    ),
}
CONSOLIDATION_LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "list_consolidation_items": lambda c: call(c, "list_consolidation_items", status=None)["items"],
    "consolidation_status": lambda c: [call(c, "consolidation_status")],
}


@pytest.fixture
def voice_target(tenant: Tenant, as_agent: AsAgent, admin: Any) -> dict[str, str]:
    """The first tenant's voice agent (luna as agent_acme), a caller and luna's state with it."""
    with as_agent(tenant, "system") as conn:
        call(conn, "add_voice_agent", platform_agent_id="agent_acme", agent="luna", name="Acme Luna")
        call(conn, "set_voice_secrets", rotate_webhook_secret=True, post_call_secret="acme-post-call")
    admin.execute("select cortex.voice_accept_call(%s, 'conv_acme', 'agent_acme', 'luna', %s, '{}')",
                  (tenant.id, VOICE_PHONE))  # fmt: skip
    admin.execute(
        """select cortex.voice_store_call(%s, 'conv_acme', 'Stefan', '{"next_greeting": "Hi Stefan, secret greeting!",
           "key_topics": ["acme topic", "b", "c"], "sentiment": "engaged", "conversation_summary": "Talked."}',
           'User: my name is Stefan', null)""",
        (tenant.id,),
    )
    return {"tenant": tenant.id}


def _voice_state(admin: Any) -> Any:
    return admin.execute(
        "select (select string_agg(agent || ':' || platform_agent_id || ':' || coalesce(name, ''), ',' order by agent)"
        "        from cortex.voice_agents) as agents,"
        " (select string_agg(encode(webhook_secret_hash, 'hex'), ',' order by tenant_id) from cortex.voice_settings)"
        "   as secrets,"
        " (select string_agg(phone || ':' || total_interactions, ',') from cortex.voice_callers) as callers,"
        " (select string_agg(next_greeting, ',') from cortex.voice_caller_states) as states"
    ).fetchone()


@pytest.mark.parametrize("name", sorted(VOICE_ATTACKS))
def test_other_tenant_cannot_reach_a_caller_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, voice_target: dict[str, str]
) -> None:
    before = _voice_state(admin)
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "luna") as conn:
        VOICE_ATTACKS[name](conn)
    assert err.value.status == 404
    assert _voice_state(admin) == before


FIRST_TENANT_VOICE = (
    "select (select string_agg(agent || ':' || coalesce(name, ''), ',') from cortex.voice_agents"
    " where tenant_id = %s) as agents,"
    " (select webhook_secret_hash from cortex.voice_settings where tenant_id = %s) as secret"
)


@pytest.mark.parametrize("name", sorted(VOICE_LISTINGS))
def test_other_tenant_sees_and_changes_none_of_the_first_tenants_voice_memory_through(
    name: str, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, admin: Any, voice_target: dict[str, str]
) -> None:
    first = admin.execute(FIRST_TENANT_VOICE, (tenant.id, tenant.id)).fetchone()
    with as_agent(other_tenant, "system") as conn:
        text = json.dumps(VOICE_LISTINGS[name](conn), default=str)
    assert "Acme Luna" not in text and "secret greeting" not in text and "Stefan" not in text
    assert "acme topic" not in text
    after = admin.execute(FIRST_TENANT_VOICE, (tenant.id, tenant.id)).fetchone()
    assert after == first


@pytest.fixture
def consolidation_target(tenant: Tenant, as_agent: AsAgent, memory_target: dict[str, str]) -> dict[str, str]:
    """The first tenant's memories merged by a consolidation item (done: it can be undone)."""
    with as_agent(tenant, "system") as conn:
        item = call(conn, "create_consolidation_item", agent="cluster", action="merge",
                    memory_ids=[memory_target["memory"], memory_target["other"]])["item"]  # fmt: skip
        conn.execute(
            "update cortex.consolidation_items set labels = labels || '{consolidation:merge}' where id = %s",
            (item["id"],),
        )
        call(conn, "claim_consolidation_item", item_id=item["id"])
        call(conn, "cortex.consolidation_merge_apply", p_item_id=item["id"], p_title="Acme pallets, merged",
             p_body="Acme ships on pallets. Secret: 40 per truck.", p_entities=[], p_content_diff="-\n+",
             p_model="deterministic")  # fmt: skip
    return {**memory_target, "item": str(item["id"])}


def _consolidation_state(admin: Any, target: dict[str, str]) -> Any:
    return admin.execute(
        "select i.status, i.notes, (select count(*) from cortex.consolidation_items) as items,"
        " (select string_agg(status, ',' order by id) from cortex.memory_nodes where id = any(i.memory_ids)) as nodes"
        " from cortex.consolidation_items i where i.id = %s",
        (target["item"],),
    ).fetchone()


@pytest.mark.parametrize("name", sorted(CONSOLIDATION_ATTACKS))
def test_other_tenants_admin_cannot_reach_a_consolidation_item_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, consolidation_target: dict[str, str]
) -> None:
    before = _consolidation_state(admin, consolidation_target)
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "system") as conn:
        CONSOLIDATION_ATTACKS[name](conn, consolidation_target)
    assert err.value.status == 404
    assert _consolidation_state(admin, consolidation_target) == before


@pytest.mark.parametrize("name", sorted(CONSOLIDATION_LISTINGS))
def test_other_tenants_admin_sees_none_of_the_first_tenants_consolidation_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, consolidation_target: dict[str, str]
) -> None:
    before = _consolidation_state(admin, consolidation_target)
    with as_agent(other_tenant, "system") as conn:
        text = json.dumps(CONSOLIDATION_LISTINGS[name](conn), default=str)
    for value in consolidation_target.values():
        assert value not in text
    assert '"pending": 0' in text or text == "[]"
    assert _consolidation_state(admin, consolidation_target) == before


# --- the dashboard (issue 12) --------------------------------------------------------------------

# Called by the other tenant's monitor: the first tenant's agents, usage and tenant never show.
DASHBOARD_LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "dashboard_session": lambda c: call(c, "dashboard_session"),
    "dashboard_usage": lambda c: call(c, "dashboard_usage", days=2),
}


@pytest.mark.parametrize("name", sorted(DASHBOARD_LISTINGS))
def test_other_tenants_monitor_sees_none_of_the_first_tenants_dashboard_through(
    name: str, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, target: dict[str, str]
) -> None:
    with as_agent(other_tenant, "helios") as conn:
        text = json.dumps(DASHBOARD_LISTINGS[name](conn), default=str)
    assert tenant.id not in text and tenant.slug not in text and '"total_tokens": 1000' not in text
    with as_agent(tenant, "helios") as conn:
        mine = json.dumps(DASHBOARD_LISTINGS[name](conn), default=str)
    assert tenant.id in mine or '"total_tokens": 1000' in mine


# --- customers (issue 11) ------------------------------------------------------------------------------

# Called by the other tenant's customer_mgmt against the first tenant's customer, project or artifact:
# each is a 404, and nothing changes.
CUSTOMER_ATTACKS: dict[str, Attack] = {
    "build_customer_context": lambda c, t: call(c, "build_customer_context", customer_id=t["customer"]),
    "merge_customer_info": lambda c, t: call(c, "merge_customer_info", cid=t["customer"], new_info={"pwned": True}),
    "update_customer_status": lambda c, t: call(
        c, "update_customer_status", customer_id=t["customer"], new_status="churned", reason="pwned"
    ),
    "log_customer_event": lambda c, t: call(
        c, "log_customer_event", customer_id=t["customer"], event_type="note", description="pwned"
    ),
    "create_customer_project": lambda c, t: call(c, "create_customer_project", customer_id=t["customer"], name="pwned"),
    "create_customer_artifact": lambda c, t: call(
        c, "create_customer_artifact", project_id=t["project"], title="pwned", type="other", content="pwned"
    ),
    "update_customer_artifact": lambda c, t: call(
        c, "update_customer_artifact", artifact_id=t["artifact"], title="pwned"
    ),
    "list_customer_projects": lambda c, t: call(c, "list_customer_projects", customer_id=t["customer"]),
    "list_customer_artifacts": lambda c, t: call(c, "list_customer_artifacts", project_id=t["project"]),
    "add_customer_agreement": lambda c, t: call(c, "add_customer_agreement", customer_id=t["customer"], title="pwned"),
    "add_customer_receivable": lambda c, t: call(
        c, "add_customer_receivable", customer_id=t["customer"], amount=1, due_date="2026-01-01"
    ),
    "start_customer_chat": lambda c, t: call(c, "start_customer_chat", customer_id=t["customer"]),
    "record_customer_handoff": lambda c, t: call(
        c, "record_customer_handoff", customer_id=t["customer"], to_agent="product_mgmt", reason="x", summary="pwned"
    ),
}


@pytest.fixture
def customer_target(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> dict[str, str]:
    """The first tenant's customer with a project and an artifact; both tenants have the customer agents."""
    for t in (tenant, other_tenant):
        for name in ("customer_mgmt", "product_mgmt"):
            admin.execute("select cortex.create_agent(%s, %s)", (t.id, name))
    with as_agent(tenant, "product_mgmt") as conn:
        project = call(conn, "create_customer_project", customer_id=contact["id"], name="Acme secret project")
        artifact = call(conn, "create_customer_artifact", project_id=project["id"], title="Acme secret doc",
                        type="spec", content="secret")  # fmt: skip
    return {"customer": contact["id"], "project": project["id"], "artifact": artifact["id"]}


def _customer_state(admin: Any) -> Any:
    return admin.execute(
        "select (select string_agg(custom_fields::text || stage, ',') from cortex.contacts) as contacts,"
        " (select count(*) from cortex.interactions) as events,"
        " (select count(*) from cortex.handoff_events) as handoffs,"
        " (select string_agg(name, ',') from cortex.customer_projects) as projects,"
        " (select string_agg(title || content, ',') from cortex.customer_artifacts) as artifacts,"
        " (select count(*) from cortex.customer_agreements)"
        " + (select count(*) from cortex.customer_receivables) as money"
    ).fetchone()


@pytest.mark.parametrize("name", sorted(CUSTOMER_ATTACKS))
def test_other_tenant_cannot_reach_a_customer_through(
    name: str, other_tenant: Tenant, as_agent: AsAgent, admin: Any, customer_target: dict[str, str]
) -> None:
    before = _customer_state(admin)
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "customer_mgmt") as conn:
        CUSTOMER_ATTACKS[name](conn, customer_target)
    assert err.value.status == 404
    assert _customer_state(admin) == before


# --- who am I (issue 12) ---------------------------------------------------------------------------


def test_whoami_names_only_the_callers_own_tenant_and_agent(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "helios") as conn:
        helios = call(conn, "whoami")
    with as_agent(other_tenant, "luna") as conn:
        stranger = call(conn, "whoami")
    assert helios == {
        "tenant_id": tenant.id, "tenant": tenant.slug, "tenant_name": helios["tenant_name"], "time_zone": "UTC",
        "agent": "helios", "display_name": "Helios", "role": "monitor", "read_only": True, "can_write": False,
        "is_admin": False,
    }  # fmt: skip
    assert stranger["tenant_id"] == other_tenant.id and stranger["agent"] == "luna"
    assert stranger["can_write"] is True and stranger["role"] == "agent"
    assert tenant.id not in json.dumps(stranger) and tenant.slug not in json.dumps(stranger)


def test_call_once_acts_as_the_claims_for_its_one_statement_and_no_longer(dsn: str, tenant: Tenant) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = conn.execute("select current_user").fetchone()
        me = call_once(conn, agent_claims(tenant.id, "helios"), "whoami")
        assert me["tenant_id"] == tenant.id and me["agent"] == "helios" and me["read_only"] is True
        # The claims and the role were local to the call's implicit transaction.
        claims_now = "coalesce(current_setting('request.jwt.claims', true), '')"
        after = conn.execute(f"select current_user, {claims_now}").fetchone()
        assert after == (before[0], "")
        with pytest.raises(CortexError) as unknown:
            call_once(conn, agent_claims(tenant.id, "nobody"), "whoami")
        assert unknown.value.status in (401, 403)
    with psycopg.connect(dsn) as conn, pytest.raises(ValueError, match="autocommit"):
        call_once(conn, agent_claims(tenant.id, "helios"), "whoami")


def test_whoami_refuses_a_caller_without_claims_or_with_an_unknown_agent(dsn: str, tenant: Tenant) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("set local role authenticated")
        with pytest.raises(CortexError) as claimless:
            call(conn, "whoami")
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        become(conn, agent_claims(tenant.id, "nobody"))
        with pytest.raises(psycopg.errors.InvalidAuthorizationSpecification) as unknown:
            conn.execute("select public.whoami()")
    assert claimless.value.status == 401
    assert unknown.value.diag.sqlstate == "28000" and unknown.value.diag.column_name == "agent"


def test_get_me_over_http_names_the_keys_agent_and_refuses_a_wrong_key(client: TestClient, tenant: Tenant) -> None:
    me = client.get("/api/v1/me", headers=bearer(tenant.keys["luna"]))
    wrong = client.get("/api/v1/me", headers=bearer("ctx_wrong"))
    none = client.get("/api/v1/me")
    assert me.status_code == 200
    assert me.json()["agent"] == "luna" and me.json()["tenant_id"] == tenant.id and me.json()["can_write"] is True
    assert wrong.status_code == 401 and wrong.json()["error"]["field"] == "Authorization"
    assert none.status_code == 401


def test_the_guard_reads_supabase_custom_claims_under_app_metadata(dsn: str, tenant: Tenant) -> None:
    """PostgREST with Supabase custom claims: tenant and agent under app_metadata, not top level."""
    claims = {"role": "authenticated", "sub": "user-1", "app_metadata": {"tenant_id": tenant.id, "agent": "mia"}}
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        become(conn, claims)
        me = call(conn, "whoami")
    assert me["tenant_id"] == tenant.id and me["agent"] == "mia"
