"""Isolation and owner-rights rules, driven by the catalog so that a new table or a new SECURITY
DEFINER function without an entry here fails the suite.

- Every table an API role can SELECT shows a caller only its own tenant's rows.
- Every SECURITY DEFINER function an API role can EXECUTE refuses a claimless caller (28000) and a
  caller of another tenant (42501), and applies the public functions' rules: read-only agents
  write nothing, an agent records usage only for itself (admins for anyone).
- The log and the handoffs are append-only for every role; the audit trail survives.
- Only the addressee, an admin or the monitor moves a handoff.
- LISTEN payloads carry no tenant ids, keys or names.
- The API roles have timeouts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import psycopg
import pytest

from cortex.db import agent_claims, as_caller, call
from cortex.errors import CortexError
from tests.conftest import AsAgent, Tenant

API_ROLES = ("anon", "authenticated", "service_role")

# --- the world every test here looks at -----------------------------------------------------------


@pytest.fixture
def world(tenant: Tenant, as_agent: AsAgent, admin: Any, contact: dict[str, Any]) -> dict[str, str]:
    """The first tenant with a row in every table an API role can read."""
    with as_agent(tenant, "luna") as conn:
        handoff = call(
            conn,
            "create_handoff",
            contact_id=contact["id"],
            to_agent="jasper",
            reason="warm_reply",
            context_summary="x",
        )
        call(conn, "record_usage", model="haiku", operation="write_email", input_tokens=70, output_tokens=30)
        call(conn, "refresh_context", contact_id=contact["id"], context={"summary": "Buys lids."})
        pending = call(conn, "log_interaction", contact_id=contact["id"], type="note", subject="queued")
        call(
            conn, "cortex.reserve_tokens", p_tenant_id=tenant.id, p_agent="luna", p_operation="probe", p_input_tokens=9
        )
        call(conn, "ingest_chunks", file_name="world.md", format="md",
             chunks=psycopg.types.json.Jsonb([{"title": "The world holds an ingested file"}]))  # fmt: skip
    admin.execute(
        "insert into cortex.alerts (tenant_id, kind, message) values (%s, 'probe', 'probe alert')", (tenant.id,)
    )
    admin.execute("select cortex.job_handoff_reminders(now())")  # a schedule_runs row per tenant
    admin.execute("select cortex.fold_graph_changes()")  # a graph_versions row; the write below adds a change
    admin.execute(  # term statistics, as the hourly count leaves them
        "insert into cortex.memory_lexemes (tenant_id, lexeme, ndoc) values (%s, 'world', 50)", (tenant.id,)
    )
    with as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=contact["id"], type="note", subject="after the fold")
        call(conn, "get_briefing")  # a cortex.briefings row
        memory = call(conn, "remember", kind="fact", title="The world keeps a promoted fact")["memory"]["id"]
    with as_agent(tenant, "system") as conn:  # consolidation: an item, a change and a promotion, a run, the rate
        call(conn, "cortex.consolidation_record_promotion", p_memory_id=memory, p_vault_path="fact/world.md",
             p_criteria=["importance >= 0.7"])  # fmt: skip
        run = call(conn, "cortex.consolidation_start_run", p_agents=["decay"])
        call(conn, "cortex.consolidation_take_ops", p_limit=100)
        call(conn, "cortex.consolidation_finish_run", p_run_id=run["id"], p_status="done", p_report={})
    # Voice: a voice agent, a caller (tier 1) and luna's state with it (tier 2), as the worker stores them.
    with as_agent(tenant, "system") as conn:
        call(conn, "add_voice_agent", platform_agent_id="agent_world", agent="luna", name="Luna")
        call(conn, "set_voice_secrets", rotate_webhook_secret=True)
    admin.execute(
        "select cortex.voice_accept_call(%s, 'conv_world', 'agent_world', 'luna', '+16125551234', '{}')", (tenant.id,)
    )
    admin.execute(
        """select cortex.voice_store_call(%s, 'conv_world', 'World', '{"next_greeting": "Hi World!",
           "key_topics": ["a", "b", "c"], "sentiment": "neutral", "conversation_summary": "Talked."}',
           'User: hi', null)""",
        (tenant.id,),
    )
    # Customers (issue 11): an agreement, a receivable, a project and an artifact of the contact.
    with as_agent(tenant, "luna") as conn:
        call(conn, "add_customer_agreement", customer_id=contact["id"], title="World retainer")
        call(conn, "add_customer_receivable", customer_id=contact["id"], amount=10, due_date=date(2026, 1, 1))
        project = call(conn, "create_customer_project", customer_id=contact["id"], name="World project")
        call(conn, "create_customer_artifact", project_id=project["id"], title="World doc", type="other", content="x")
    return {
        "tenant": tenant.id,
        "contact": contact["id"],
        "handoff": handoff["id"],
        "interaction": pending["id"],
    }


@contextmanager
def claimless(dsn: str, role: str = "authenticated") -> Iterator[psycopg.Connection[Any]]:
    """A request as an API role that carries no claims at all."""
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(f"set local role {role}")
        yield conn


def _readable_tables(admin: Any) -> set[str]:
    rows = admin.execute(
        """select distinct n.nspname || '.' || c.relname as t
           from pg_class c join pg_namespace n on n.oid = c.relnamespace, unnest(%s::text[]) r(role)
           where c.relkind in ('r', 'p', 'v', 'm') and n.nspname in ('cortex', 'public')
             and has_schema_privilege(r.role, n.oid, 'usage') and has_table_privilege(r.role, c.oid, 'select')""",
        (list(API_ROLES),),
    ).fetchall()
    return {r["t"] for r in rows}


def _executable_definers(admin: Any) -> set[str]:
    rows = admin.execute(
        """select distinct p.oid::regprocedure::text as f, p.proname
           from pg_proc p join pg_namespace n on n.oid = p.pronamespace, unnest(%s::text[]) r(role)
           where n.nspname in ('cortex', 'public') and p.prosecdef
             and has_function_privilege(r.role, p.oid, 'execute')""",
        (list(API_ROLES),),
    ).fetchall()
    return {r["proname"] for r in rows}


# --- tables ---------------------------------------------------------------------------------------


def test_every_table_an_api_role_can_read_has_a_row_of_the_first_tenant(admin: Any, world: dict[str, str]) -> None:
    """The isolation check below is only as good as its data: each readable table must hold a row
    of the first tenant (add one to the `world` fixture for a new table)."""
    empty = []
    for table in sorted(_readable_tables(admin)):
        key = "id" if table == "cortex.tenants" else "tenant_id"
        n = admin.execute(f"select count(*) as n from {table} where {key} = %s", (world["tenant"],)).fetchone()
        if n["n"] == 0:
            empty.append(table)
    assert empty == []


def test_tables_read_directly_show_only_the_callers_tenant(
    admin: Any, world: dict[str, str], other_tenant: Tenant, as_agent: AsAgent
) -> None:
    tables = _readable_tables(admin)
    assert len(tables) >= 15
    with as_agent(other_tenant, "luna") as conn:
        for table in sorted(tables):
            key = "id" if table == "cortex.tenants" else "tenant_id"
            seen = {r[0] for r in conn.execute(f"select {key}::text from {table}").fetchall()}
            assert seen <= {other_tenant.id}, table


def test_a_claimless_api_caller_reads_no_rows_of_any_table(admin: Any, world: dict[str, str], dsn: str) -> None:
    for table in sorted(_readable_tables(admin)):
        with claimless(dsn) as conn:
            assert conn.execute(f"select count(*) from {table}").fetchone()[0] == 0, table


# --- SECURITY DEFINER functions -------------------------------------------------------------------

# Each definer function an API role can execute: how to call it against the first tenant (`t`,
# `c`, `h`, `i` are its tenant, contact, handoff and pending interaction), and what a claimless
# caller gets ("28000", or a harmless value for the functions that take no tenant).
DEFINERS: dict[str, tuple[str, str]] = {
    "agent_can_write": ("select cortex.agent_can_write()", "false"),
    "require_writer": ("select cortex.require_writer()", "28000"),
    "search_contact_page": ("select cortex.search_contact_page(null, null, null, null, 'john', 10, 0)", "28000"),
    "record_token_usage": ("select cortex.record_token_usage(%(t)s, 'luna', 'haiku', 'probe', 1, 1)", "28000"),
    "record_interaction_analysis": (
        "select cortex.record_interaction_analysis(%(t)s, %(i)s, "
        """'{"summary": "forged", "sentiment": "neutral", "intent": "other"}', null)""",
        "28000",
    ),
    "queue_interaction_summary": ("select cortex.queue_interaction_summary(%(t)s, %(i)s)", "28000"),
    "enqueue_import_summaries": ("select cortex.enqueue_import_summaries(array[%(i)s]::uuid[], 'probe')", "28000"),
    "defer_context_render": ("select cortex.defer_context_render(array[%(c)s]::uuid[], 'probe')", "28000"),
    "request_context_refresh": ("select cortex.request_context_refresh(%(t)s, %(c)s, 'probe')", "28000"),
    "store_context": ("""select cortex.store_context(%(t)s, %(c)s, '{"summary": "forged"}', null, 0)""", "28000"),
    "record_context_failure": ("select cortex.record_context_failure(%(t)s, %(c)s, 'probe')", "28000"),
    "notify": ("select cortex.notify(%(t)s, 'probe.event', 'monitor', '{}')", "28000"),
    "record_handoff_on_context": (
        "select cortex.record_handoff_on_context(%(t)s, %(c)s, %(h)s, 'forged', '{}')",
        "28000",
    ),
    "require_tenant": ("select cortex.require_tenant()", "28000"),
    "reserve_tokens": ("select cortex.reserve_tokens(%(t)s, 'luna', 'probe', 1)", "28000"),
    "settle_reservation": (
        """select cortex.settle_reservation(%(t)s, gen_random_uuid(), '{"model": "haiku", "input_tokens": 1}')""",
        "28000",
    ),
    "postpone_interaction_summary": ("select cortex.postpone_interaction_summary(%(t)s, %(i)s, now())", "28000"),
    "memory_near_duplicate": ("select cortex.memory_near_duplicate('fact', false, 'probe', '')", "28000"),
    "memory_text_ranking": (
        "select cortex.memory_text_ranking('probe', 'probe', '{active}', null, null, null, null, null, null, null, 10)",
        "28000",
    ),
}
# Those that take a tenant id: a caller of another tenant is refused with 42501.
TAKES_TENANT = sorted(k for k, (q, _) in DEFINERS.items() if "%(t)s" in q)


def _args(world: dict[str, str]) -> dict[str, str]:
    return {"t": world["tenant"], "c": world["contact"], "h": world["handoff"], "i": world["interaction"]}


def test_every_definer_function_an_api_role_can_execute_has_an_entry(admin: Any) -> None:
    assert _executable_definers(admin) == set(DEFINERS)


def _counts(admin: Any) -> dict[str, int]:
    row = admin.execute(
        """select (select count(*) from cortex.token_usage) as usage, (select count(*) from cortex.outbox) as outbox,
                  (select count(*) from cortex.jobs) as jobs,
                  (select count(*) from cortex.context_levels) as rendered,
                  (select count(*) from cortex.interactions where analysis_status = 'done') as analysed,
                  (select coalesce(sum(failure_count), 0) from cortex.contact_context) as failures,
                  (select string_agg(summary || coalesce(last_handoff_summary, ''), ',') from cortex.contact_context)
                    as contexts"""
    ).fetchone()
    return dict(row)


@pytest.mark.parametrize("role", ["authenticated", "service_role"])
@pytest.mark.parametrize("name", sorted(DEFINERS))
def test_a_claimless_api_caller_is_refused_by(
    name: str, role: str, admin: Any, world: dict[str, str], dsn: str
) -> None:
    query, expected = DEFINERS[name]
    can = admin.execute(
        "select has_function_privilege(%s, p.oid, 'execute') as ok from pg_proc p "
        "join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'cortex' and p.proname = %s",
        (role, name),
    ).fetchone()["ok"]
    before = _counts(admin)
    if not can:  # no EXECUTE for this role: refused by the grant itself
        with pytest.raises(psycopg.errors.InsufficientPrivilege), claimless(dsn, role) as conn:
            conn.execute(query, _args(world))
    elif expected == "28000":
        with pytest.raises(psycopg.errors.InvalidAuthorizationSpecification), claimless(dsn, role) as conn:
            conn.execute(query, _args(world))
    else:
        with claimless(dsn, role) as conn:
            assert str(conn.execute(query, _args(world)).fetchone()[0]).lower() == expected
    assert _counts(admin) == before


@pytest.mark.parametrize("name", TAKES_TENANT)
def test_a_caller_of_another_tenant_is_refused_by(
    name: str, admin: Any, world: dict[str, str], other_tenant: Tenant, as_agent: AsAgent
) -> None:
    before = _counts(admin)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(other_tenant, "luna") as conn:
        conn.execute(DEFINERS[name][0], _args(world))
    assert _counts(admin) == before


# Writes a read-only agent (helios) must not make through a definer function.
HELIOS_WRITES = [
    "defer_context_render",
    "record_token_usage",
    "record_interaction_analysis",
    "queue_interaction_summary",
    "store_context",
    "record_context_failure",
    "notify",
    "record_handoff_on_context",
    "reserve_tokens",
    "settle_reservation",
    "postpone_interaction_summary",
]


@pytest.mark.parametrize("name", HELIOS_WRITES)
def test_a_read_only_agent_cannot_write_through(
    name: str, admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    query = DEFINERS[name][0].replace("'luna'", "'helios'")
    before = _counts(admin)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "helios") as conn:
        conn.execute(query, _args(world))
    assert _counts(admin) == before


def test_a_read_only_agent_cannot_record_usage_through_the_api(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    before = _counts(admin)
    with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
        call(conn, "record_usage", model="haiku", operation="probe", input_tokens=1, output_tokens=1)
    assert err.value.status == 403
    assert _counts(admin) == before


def test_a_read_only_agent_may_still_queue_the_refresh_of_a_stale_context_only(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    # A fresh context: helios may not force a regeneration...
    admin.execute("delete from cortex.jobs where kind = 'generate_context'")
    admin.execute(
        "update cortex.contact_context x set stale_since = null, generated_at = now(), "
        "interaction_count_at_generation = c.interaction_count from cortex.contacts c "
        "where c.id = x.contact_id and c.tenant_id = x.tenant_id"
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "helios") as conn:
        conn.execute("select cortex.request_context_refresh(%s, %s, 'probe')", (world["tenant"], world["contact"]))
    # ...but its read of a stale context queues one, as get_context always did.
    admin.execute("update cortex.contact_context set stale_since = now() where contact_id = %s", (world["contact"],))
    with as_agent(tenant, "helios") as conn:
        assert call(conn, "get_context", contact_id=world["contact"], level=1)["refresh_queued"] is True


def test_an_agent_records_usage_only_for_itself_unless_admin(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    before = _counts(admin)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select cortex.record_token_usage(%s, 'jasper', 'haiku', 'probe', 10, 10)", (world["tenant"],))
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "record_usage", model="haiku", operation="probe", input_tokens=1, output_tokens=1, agent="jasper")
    assert err.value.status == 403
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select cortex.enforce_budget(%s, 'jasper', 10)", (world["tenant"],))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute(
            """select cortex.store_context(%s, %s, '{"summary": "s"}', '{"model": "haiku", "agent": "jasper",
               "input_tokens": 1, "output_tokens": 1}', 0)""",
            (world["tenant"], world["contact"]),
        )
    assert _counts(admin) == before
    # The system agent (an admin; what the service key acts as) may record for anyone.
    with as_agent(tenant, "system") as conn:
        conn.execute("select cortex.record_token_usage(%s, 'jasper', 'haiku', 'probe', 10, 10)", (world["tenant"],))
    assert _counts(admin)["usage"] == before["usage"] + 1


def test_check_agent_never_tells_whether_a_name_exists_in_another_tenant(
    admin: Any, world: dict[str, str], other_tenant: Tenant, as_agent: AsAgent
) -> None:
    admin.execute("select cortex.create_agent(%s, 'zed')", (world["tenant"],))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(other_tenant, "luna") as conn:
        conn.execute("select cortex.check_agent(%s, 'zed', 'agent')", (world["tenant"],))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(other_tenant, "luna") as conn:
        conn.execute("select cortex.check_agent(%s, 'nobody', 'agent')", (world["tenant"],))
    # In its own tenant, a name that exists elsewhere and one that exists nowhere get the same answer.
    answers = []
    for name in ("zed", "nobody"):
        with pytest.raises(CortexError) as err, as_agent(other_tenant, "luna") as conn:
            call(conn, "get_pending_handoffs", agent=name)
        answers.append((err.value.status, err.value.message.replace(name, "?")))
    assert answers[0] == answers[1] and answers[0][0] == 422


def test_api_roles_cannot_execute_enqueue_job(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select cortex.enqueue_job(%s, 'generate_context')", (world["tenant"],))


# --- append-only for every role -------------------------------------------------------------------


def test_the_owner_cannot_delete_or_truncate_interactions(admin: Any, world: dict[str, str]) -> None:
    n = admin.execute("select count(*) as n from cortex.interactions").fetchone()["n"]
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("delete from cortex.interactions where id = %s", (world["interaction"],))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("truncate cortex.interactions cascade")
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("truncate cortex.contacts cascade")
    assert admin.execute("select count(*) as n from cortex.interactions").fetchone()["n"] == n


def test_erasing_a_contact_takes_its_log_with_it(admin: Any, world: dict[str, str]) -> None:
    admin.execute("delete from cortex.contacts where id = %s", (world["contact"],))
    left = admin.execute("select count(*) as n from cortex.interactions where contact_id = %s", (world["contact"],))
    assert left.fetchone()["n"] == 0


def test_a_handoff_cannot_be_deleted_so_its_audit_survives(admin: Any, world: dict[str, str]) -> None:
    audit = admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"]
    assert audit >= 1
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("delete from cortex.handoff_events where id = %s", (world["handoff"],))
    with pytest.raises(psycopg.Error):
        admin.execute("truncate cortex.handoff_events cascade")
    assert admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"] == audit
    assert admin.execute("select count(*) as n from cortex.handoff_events").fetchone()["n"] == 1


def test_a_declared_erasure_is_the_owners_only_way_around_the_append_only_rule(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select cortex.begin_erasure('because')")
    with admin.transaction():
        admin.execute("select cortex.begin_erasure('test reset')")
        admin.execute("delete from cortex.handoff_events where id = %s", (world["handoff"],))
    assert admin.execute("select count(*) as n from cortex.handoff_audit").fetchone()["n"] == 0
    # The declaration ended with its transaction.
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("delete from cortex.interactions where id = %s", (world["interaction"],))


# --- who moves a handoff --------------------------------------------------------------------------


def test_an_agent_who_is_not_the_addressee_cannot_move_a_handoff(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    for status in ("accepted", "rejected"):
        with pytest.raises(CortexError) as err, as_agent(tenant, "mia") as conn:
            call(conn, "update_handoff_status", handoff_id=world["handoff"], status=status)
        assert err.value.status == 403 and err.value.field == "status"
    # Nor by writing the table directly.
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "mia") as conn:
        conn.execute("update cortex.handoff_events set status = 'accepted' where id = %s", (world["handoff"],))
    # The sender neither.
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "update_handoff_status", handoff_id=world["handoff"], status="rejected")
    assert err.value.status == 403
    assert admin.execute("select status from cortex.handoff_events").fetchone()["status"] == "pending"


def test_the_addressee_a_writing_monitor_or_an_admin_may_move_a_handoff(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    admin.execute("select cortex.create_agent(%s, 'argus', 'Argus', 'monitor')", (tenant.id,))
    with as_agent(tenant, "argus") as conn:
        assert (
            call(conn, "update_handoff_status", handoff_id=world["handoff"], status="accepted")["accepted_by"]
            == "argus"
        )
    with as_agent(tenant, "jasper") as conn:
        assert (
            call(conn, "update_handoff_status", handoff_id=world["handoff"], status="completed")["status"]
            == "completed"
        )


def test_a_handoff_to_a_human_is_moved_by_the_service_key_or_an_admin_only(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        hid = call(
            conn,
            "create_handoff",
            contact_id=contact["id"],
            to_human_id="sales-pool",
            reason="other",
            context_summary="x",
        )["id"]
    for agent in ("jasper", "luna"):
        with pytest.raises(CortexError) as err, as_agent(tenant, agent) as conn:
            call(conn, "update_handoff_status", handoff_id=hid, status="accepted")
        assert err.value.status == 403
    with as_agent(tenant, "system") as conn:
        assert call(conn, "update_handoff_status", handoff_id=hid, status="accepted")["accepted_by"] == "system"


def test_a_direct_update_cannot_name_the_acceptor_or_rewrite_metadata(
    admin: Any, world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "jasper") as conn:
        conn.execute(
            "update cortex.handoff_events set status = 'accepted', accepted_by = 'mia' where id = %s",
            (world["handoff"],),
        )
    assert admin.execute("select accepted_by from cortex.handoff_events").fetchone()["accepted_by"] == "jasper"
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState), as_agent(tenant, "jasper") as conn:
        conn.execute(
            """update cortex.handoff_events set metadata = '{"forged": true}' where id = %s""", (world["handoff"],)
        )
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState), as_agent(tenant, "jasper") as conn:
        conn.execute("update cortex.handoff_events set status_note = 'rewritten' where id = %s", (world["handoff"],))
    assert admin.execute("select metadata from cortex.handoff_events").fetchone()["metadata"] == {}


# --- LISTEN ---------------------------------------------------------------------------------------


def test_listen_payloads_carry_no_tenant_ids_keys_or_names(
    dsn: str, admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    channels = ("cortex_outbox", "cortex_changes", "cortex_jobs", "cortex_alerts")
    with psycopg.connect(dsn, autocommit=True) as listener:
        # Any role may LISTEN: an agent's own session is enough to hear every tenant.
        listener.execute("set role authenticated")
        for channel in channels:
            listener.execute(f"listen {channel}")
        with as_agent(tenant, "luna") as conn:
            interaction = call(conn, "log_interaction", contact_id=contact["id"], type="note", subject="no summary")
            handoff = call(
                conn, "create_handoff", contact_id=contact["id"], to_agent="jasper", reason="other", context_summary="x"
            )
        job = admin.execute(
            "select cortex.enqueue_job(%s, 'probe_chore', p_max_attempts => 1) as id", (tenant.id,)
        ).fetchone()["id"]
        admin.execute("select cortex.claim_jobs('w1', 100)")
        admin.execute("select cortex.fail_job(%s, %s, 'w1', 'boom')", (tenant.id, job))
        got = [(n.channel, n.payload) for n in listener.notifies(timeout=1.0)]
    assert {c for c, _ in got} == set(channels)
    secrets = [tenant.id, contact["id"], interaction["id"], handoff["id"], "luna", "jasper", "monitor", "probe_chore"]
    for channel, payload in got:
        assert not any(s in payload for s in secrets), (channel, payload)
        if payload:
            assert set(json.loads(payload)) <= {"schema", "table", "op"}, (channel, payload)


# --- timeouts -------------------------------------------------------------------------------------


def test_api_roles_have_timeouts_and_they_apply_to_a_request(dsn: str, admin: Any) -> None:
    rows = admin.execute(
        """select r.rolname, s.setconfig from pg_db_role_setting s join pg_roles r on r.oid = s.setrole
           where r.rolname in ('anon', 'authenticated', 'service_role') and s.setdatabase = 0"""
    ).fetchall()
    settings = {r["rolname"]: dict(c.split("=", 1) for c in r["setconfig"]) for r in rows}
    for role in API_ROLES:
        assert {"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"} <= set(settings[role])
    # As PostgREST does per request (the roles never log in, so ALTER ROLE alone does nothing).
    with psycopg.connect(dsn, autocommit=True) as conn, as_caller(agent_claims("x", "luna"), conn):
        conn.execute("select cortex.apply_role_settings()")
        shown = conn.execute("select current_setting('statement_timeout'), current_setting('lock_timeout')").fetchone()
        assert shown == (settings["authenticated"]["statement_timeout"], settings["authenticated"]["lock_timeout"])
    # SET LOCAL: the next transaction on the same connection is back to the session's values.
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("select current_setting('lock_timeout')").fetchone()[0] == "0"
