"""The memory graph's foundation: seed 000 mirrored by the database, the graph version without a
hot row, decay as one rule, reinforcement folded in bulk, private nodes, nothing deleted."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from cortex.db import call
from tests.conftest import AsAgent, Tenant


def _version(admin: Any, tenant: Tenant) -> int:
    return int(admin.execute("select cortex.graph_version(%s) as v", (tenant.id,)).fetchone()["v"])


def _node(admin: Any, ref_kind: str, ref_id: str) -> dict[str, Any]:
    row = admin.execute(
        "select * from cortex.memory_nodes where ref_kind = %s and ref_id = %s", (ref_kind, ref_id)
    ).fetchone()
    assert row is not None, (ref_kind, ref_id)
    return dict(row)


_EDGE = "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id) values (%s, %s, %s, %s)"


def _insert_memory(conn: Any, tenant: Tenant, agent: str, title: str, **fields: Any) -> str:
    cols = {"tenant_id": tenant.id, "kind": "fact", "title": title, "source_agent": agent, **fields}
    names = ", ".join(cols)
    marks = ", ".join(f"%({k})s" for k in cols)
    row = conn.execute(f"insert into cortex.memory_nodes ({names}) values ({marks}) returning id", cols).fetchone()
    return str(row[0] if not isinstance(row, dict) else row["id"])


# --- seed 000 in the graph ---------------------------------------------------------------------


def test_agents_and_contacts_are_entity_nodes(admin: Any, tenant: Tenant, contact: dict[str, Any]) -> None:
    agents = admin.execute(
        "select ref_id, permanent from cortex.memory_nodes where tenant_id = %s and kind = 'agent' order by ref_id",
        (tenant.id,),
    ).fetchall()
    assert [r["ref_id"] for r in agents] == ["anna", "helios", "jasper", "luna", "mia", "system"]
    assert all(r["permanent"] for r in agents)
    node = _node(admin, "contact", contact["id"])
    assert node["kind"] == "contact" and node["contact_id"] is not None
    assert node["title"] == contact["name"] and contact["email"] in node["body"]


def test_a_logged_interaction_becomes_an_event_of_its_agent_linked_to_its_contact(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        i = call(conn, "log_interaction", contact_id=contact["id"], type="note", subject="Shipping delay",
                 raw_content="Order #1234 is two weeks late.")  # fmt: skip
    event = _node(admin, "interaction", i["id"])
    assert (event["kind"], event["title"], event["source_agent"]) == ("event", "Note: Shipping delay", "luna")
    edges = admin.execute(
        """select e.relation, t.kind, t.ref_id from cortex.memory_edges e
           join cortex.memory_nodes t on t.tenant_id = e.tenant_id and t.id = e.target_id
           where e.source_id = %s order by e.relation""",
        (event["id"],),
    ).fetchall()
    assert [(r["relation"], r["kind"], r["ref_id"]) for r in edges] == [("applies_to", "contact", contact["id"])]


def test_a_written_summary_and_a_contact_change_reach_their_nodes(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        i = call(conn, "log_interaction", contact_id=contact["id"], type="note", subject="s", raw_content="raw words")
        call(conn, "update_contact", contact_id=contact["id"], patch={"stage": "customer", "name": "Johnny Smith"})
    admin.execute(
        """update cortex.interactions set summary = 'Customer wants a refund.', sentiment = 'negative',
           intent = 'complaint', analysis_status = 'done' where id = %s""",
        (i["id"],),
    )
    event = _node(admin, "interaction", i["id"])
    assert event["body"] == "Customer wants a refund." and event["metadata"]["intent"] == "complaint"
    node = _node(admin, "contact", contact["id"])
    assert node["title"] == "Johnny Smith" and "stage customer" in node["body"]


def test_a_handoff_becomes_an_event_mentioning_both_agents_and_follows_its_status(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        h = call(conn, "create_handoff", contact_id=contact["id"], to_agent="jasper", reason="warm_reply",
                 context_summary="Wants a quote for 5,000 cups.")  # fmt: skip
    with as_agent(tenant, "jasper") as conn:
        call(conn, "update_handoff_status", handoff_id=h["id"], status="accepted")
    node = _node(admin, "handoff", h["id"])
    assert node["body"] == "Wants a quote for 5,000 cups." and node["metadata"]["status"] == "accepted"
    assert "accepted" in node["title"]
    mentioned = admin.execute(
        """select t.ref_id from cortex.memory_edges e join cortex.memory_nodes t
             on t.tenant_id = e.tenant_id and t.id = e.target_id
           where e.source_id = %s and e.relation = 'mentions' order by 1""",
        (node["id"],),
    ).fetchall()
    assert [r["ref_id"] for r in mentioned] == ["jasper", "luna"]


def test_backfill_mirrors_rows_that_predate_the_triggers_and_is_idempotent(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=contact["id"], type="note", subject="old")
    before = admin.execute("select count(*) as n from cortex.memory_nodes").fetchone()["n"]
    with admin.transaction():
        admin.execute("select cortex.begin_erasure('test: simulate rows from before the graph')")
        admin.execute("delete from cortex.memory_nodes where tenant_id = %s and ref_kind <> 'agent'", (tenant.id,))
    first = admin.execute("select cortex.backfill_graph(%s) as r", (tenant.id,)).fetchone()["r"]
    assert first["nodes_added"] == 2 and first["edges_added"] == 1  # the contact, the event and its edge
    assert admin.execute("select count(*) as n from cortex.memory_nodes").fetchone()["n"] == before
    again = admin.execute("select cortex.backfill_graph(%s) as r", (tenant.id,)).fetchone()["r"]
    assert again == {"nodes_added": 0, "edges_added": 0}


# --- the graph version -------------------------------------------------------------------------


def test_the_graph_version_advances_once_per_committed_write_and_survives_the_fold(
    admin: Any, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent
) -> None:
    v0, other0 = _version(admin, tenant), _version(admin, other_tenant)
    with as_agent(tenant, "luna") as conn:
        _insert_memory(conn, tenant, "luna", "Refunds need a manager above 500 EUR")
        _insert_memory(conn, tenant, "luna", "Acme prefers email")  # same transaction: one step
    assert _version(admin, tenant) == v0 + 1
    admin.execute("select cortex.fold_graph_changes()")
    assert _version(admin, tenant) == v0 + 1
    assert _version(admin, other_tenant) == other0


def test_a_transaction_records_each_tenant_once_and_again_after_a_rolled_back_savepoint(
    admin: Any, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent
) -> None:
    v0, other0 = _version(admin, tenant), _version(admin, other_tenant)
    with as_agent(tenant, "luna") as conn:
        with conn.transaction(force_rollback=True):  # a savepoint, rolled back with what it recorded
            _insert_memory(conn, tenant, "luna", "written, then rolled back")
        _insert_memory(conn, tenant, "luna", "kept after the savepoint")
        txid = conn.execute("select pg_current_xact_id()::text").fetchone()[0]
    rows = admin.execute("select count(*) as n from cortex.graph_changes where txid::text = %s", (txid,)).fetchone()
    assert rows["n"] == 1
    assert _version(admin, tenant) == v0 + 1
    with admin.transaction():  # the owner writing two tenants, then the first again: one step each
        _insert_memory(admin, tenant, "luna", "owner write one")
        _insert_memory(admin, other_tenant, "luna", "owner write two")
        _insert_memory(admin, tenant, "luna", "owner write three")
    assert (_version(admin, tenant), _version(admin, other_tenant)) == (v0 + 2, other0 + 1)


def test_the_version_moves_only_at_commit_and_a_second_writer_does_not_wait(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    v0 = _version(admin, tenant)
    done = threading.Event()
    with as_agent(tenant, "luna") as first:
        _insert_memory(first, tenant, "luna", "first writer, still open")
        assert _version(admin, tenant) == v0  # not committed yet

        def second() -> None:
            with as_agent(tenant, "mia") as conn:
                conn.execute("set local lock_timeout = '2s'")
                _insert_memory(conn, tenant, "mia", "second writer")
            done.set()

        t = threading.Thread(target=second)
        t.start()
        t.join(10)
        assert done.is_set(), "the second writer waited for the first"
        assert _version(admin, tenant) == v0 + 1
    assert _version(admin, tenant) == v0 + 2


def test_reinforcement_does_not_advance_the_version(admin: Any, tenant: Tenant, contact: dict[str, Any]) -> None:
    node = _node(admin, "contact", contact["id"])
    v0 = _version(admin, tenant)
    admin.execute(
        "insert into cortex.memory_access (tenant_id, node_id, agent) values (%s, %s, 'luna')", (tenant.id, node["id"])
    )
    assert admin.execute("select cortex.fold_memory_access() as r").fetchone()["r"]["nodes"] == 1
    assert _version(admin, tenant) == v0
    assert _node(admin, "contact", contact["id"])["access_count"] == 1


# --- decay and reinforcement ---------------------------------------------------------------------


def test_decay_halves_a_weight_every_half_life_and_spares_permanent_nodes(admin: Any) -> None:
    row = admin.execute(
        """select cortex.decayed_weight(0.8, now() - interval '30 days', 30, false, now()) as one,
                  cortex.decayed_weight(0.8, now() - interval '60 days', 30, false, now()) as two,
                  cortex.decayed_weight(0.8, now() - interval '60 days', 30, true, now()) as permanent,
                  cortex.decayed_weight(0.8, now() + interval '1 day', 30, false, now()) as future"""
    ).fetchone()
    assert row["one"] == pytest.approx(0.4, abs=1e-4)
    assert row["two"] == pytest.approx(0.2, abs=1e-4)
    assert row["permanent"] == pytest.approx(0.8) and row["future"] == pytest.approx(0.8)


def test_a_served_node_reinforces_its_edges_from_their_decayed_weight(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        a = _insert_memory(conn, tenant, "luna", "Acme orders cups monthly")
        b = _insert_memory(conn, tenant, "luna", "Acme's buyer is John")
        conn.execute(
            "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight) "
            "values (%s, %s, 'relates_to', %s, 0.8)",
            (tenant.id, a, b),
        )
    admin.execute(
        "update cortex.memory_edges set last_reinforced_at = now() - interval '30 days' where source_id = %s", (a,)
    )
    with as_agent(tenant, "luna") as conn:
        conn.execute("select cortex.record_access(%s, array[%s, %s]::uuid[])", (tenant.id, a, a))
    admin.execute("select cortex.fold_memory_access()")
    edge = admin.execute("select weight, last_reinforced_at from cortex.memory_edges where source_id = %s", (a,))
    row = edge.fetchone()
    assert row["weight"] == pytest.approx(0.4 + 0.05, abs=1e-3)  # decayed to 0.4, one access (deduplicated)
    accessed = admin.execute("select access_count from cortex.memory_nodes where id = %s", (a,)).fetchone()
    assert accessed["access_count"] == 1


def test_a_read_only_transaction_serves_without_recording_access(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    node = _node(admin, "contact", contact["id"])
    with as_agent(tenant, "luna") as conn:
        conn.execute("set transaction read only")
        assert (
            conn.execute("select cortex.record_access(%s, array[%s]::uuid[])", (tenant.id, node["id"])).fetchone()[0]
            == 0
        )
    assert admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"] == 0


# --- visibility and safety -------------------------------------------------------------------------


def test_a_private_memory_is_visible_only_to_its_agent_and_its_edges_too(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    shared_contact = _node(admin, "contact", contact["id"])
    with as_agent(tenant, "luna") as conn:
        secret = _insert_memory(conn, tenant, "luna", "I suspect John is job hunting", visibility="private")
        conn.execute(_EDGE, (tenant.id, secret, "mentions", shared_contact["id"]))
        assert conn.execute("select count(*) from cortex.memory_nodes where id = %s", (secret,)).fetchone()[0] == 1
    with as_agent(tenant, "mia") as conn:
        assert conn.execute("select count(*) from cortex.memory_nodes where id = %s", (secret,)).fetchone()[0] == 0
        edges = conn.execute("select count(*) from cortex.memory_edges where source_id = %s", (secret,))
        assert edges.fetchone()[0] == 0
    assert (
        admin.execute("select private_agent from cortex.memory_edges where source_id = %s", (secret,)).fetchone()[
            "private_agent"
        ]
        == "luna"
    )


def test_an_agent_cannot_write_a_private_memory_for_another_or_join_two_agents_private_memories(
    tenant: Tenant, as_agent: AsAgent
) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        _insert_memory(conn, tenant, "mia", "mia's secret", visibility="private")
    with as_agent(tenant, "luna") as conn:
        mine = _insert_memory(conn, tenant, "luna", "luna's secret", visibility="private")
    with as_agent(tenant, "mia") as conn:
        hers = _insert_memory(conn, tenant, "mia", "mia's secret", visibility="private")
    with as_agent(tenant, "system") as conn, pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute(_EDGE, (tenant.id, mine, "relates_to", hers))


def test_an_agent_cannot_forge_entity_or_event_nodes(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        _insert_memory(conn, tenant, "luna", "fake", kind="event", ref_kind="interaction", ref_id="x")
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "helios") as conn:
        _insert_memory(conn, tenant, "helios", "a read-only agent writes nothing")


def test_self_loops_and_unknown_relations_are_refused(admin: Any, tenant: Tenant, as_agent: AsAgent) -> None:
    with as_agent(tenant, "luna") as conn:
        a = _insert_memory(conn, tenant, "luna", "a fact")
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute(_EDGE, (tenant.id, a, "relates_to", a))
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute(
            "insert into cortex.memory_nodes (tenant_id, kind, title) values (%s, 'rumour', 'x')", (tenant.id,)
        )


def test_nodes_are_never_deleted_but_go_with_their_contact(
    admin: Any, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        a = _insert_memory(conn, tenant, "luna", "John likes calls", contact_id=contact["id"])
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("delete from cortex.memory_nodes where id = %s", (a,))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("truncate cortex.memory_edges")
    admin.execute("delete from cortex.contacts where id = %s", (contact["id"],))  # a person's erasure
    left = admin.execute("select count(*) as n from cortex.memory_nodes where contact_id = %s", (contact["id"],))
    assert left.fetchone()["n"] == 0


def test_a_tenants_erasure_takes_its_graph(admin: Any, make_tenant: Any) -> None:
    gone = make_tenant("gone")
    admin.execute("select cortex.fold_graph_changes()")
    admin.execute("delete from cortex.tenants where id = %s", (gone.id,))
    admin.execute("select cortex.fold_graph_changes()")
    for table in ("memory_nodes", "memory_edges", "graph_versions", "memory_settings"):
        n = admin.execute(f"select count(*) as n from cortex.{table} where tenant_id = %s", (gone.id,)).fetchone()
        assert n["n"] == 0, table
