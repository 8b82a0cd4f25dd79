"""Traversal and the graph API (issue 13): breadth-first and weighted walks over decayed weights,
filters, cycles, thresholds, reinforcement through the access log, privacy, links, statistics, the
graph version, bad input on both call paths, and the `cortex graph` commands."""

from __future__ import annotations

import json
import uuid
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from starlette.testclient import TestClient

from cortex.cli import main
from cortex.db import call, typed
from cortex.errors import CortexError
from cortex.graph.models import EdgeLinked, GraphStats, GraphVersion, NeighborList, TraverseResult
from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import AsAgent, Tenant

V1 = "/api/v1"
Admin = psycopg.Connection[dict[str, Any]]


def _insert_node(conn: Any, tenant: Tenant, agent: str, title: str, **fields: Any) -> str:
    cols = {"tenant_id": tenant.id, "kind": "fact", "title": title, "source_agent": agent, **fields}
    names = ", ".join(cols)
    marks = ", ".join(f"%({k})s" for k in cols)
    row = conn.execute(f"insert into cortex.memory_nodes ({names}) values ({marks}) returning id", cols).fetchone()
    return str(row[0])


def _insert_edge(conn: Any, tenant: Tenant, source: str, relation: str, target: str, weight: float) -> None:
    conn.execute(
        "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight) "
        "values (%s, %s, %s, %s, %s)",
        (tenant.id, source, relation, target, weight),
    )


@pytest.fixture
def world(tenant: Tenant, as_agent: AsAgent) -> dict[str, str]:
    """A small graph of luna's tenant:

    A -relates_to 0.9-> B -relates_to 0.9-> C -relates_to 0.9-> A   (a cycle)
    A -part_of 0.3-> D -relates_to 1.0-> E (a decision)
    A -relates_to 0.9-> F (importance 0.1: below min_importance)
    A -mentions 0.8-> P (luna's private memory)
    """
    with as_agent(tenant, "luna") as conn:
        ids = {k: _insert_node(conn, tenant, "luna", f"memory {k}") for k in "ABCD"}
        ids["E"] = _insert_node(conn, tenant, "luna", "memory E", kind="decision")
        ids["F"] = _insert_node(conn, tenant, "luna", "memory F", importance=0.1)
        ids["P"] = _insert_node(conn, tenant, "luna", "luna's secret", visibility="private")
        for s, rel, t, w in [
            ("A", "relates_to", "B", 0.9),
            ("B", "relates_to", "C", 0.9),
            ("C", "relates_to", "A", 0.9),
            ("A", "part_of", "D", 0.3),
            ("D", "relates_to", "E", 1.0),
            ("A", "relates_to", "F", 0.9),
            ("A", "mentions", "P", 0.8),
        ]:
            _insert_edge(conn, tenant, ids[s], rel, ids[t], w)
    return ids


def _traverse(conn: Any, start: list[str], **options: Any) -> dict[str, Any]:
    if "relations" in options:
        options["relations"] = typed(options["relations"], "text[]")
    if "kinds" in options:
        options["kinds"] = typed(options["kinds"], "text[]")
    if "min_weight" in options:
        options["min_weight"] = typed(options["min_weight"], "real")
    result: dict[str, Any] = call(conn, "traverse_graph", start_ids=typed(start, "uuid[]"), **options)
    return result


def _walked(result: dict[str, Any], ids: dict[str, str]) -> list[tuple[str, int]]:
    """(name, depth) of each returned node, in order."""
    names = {v: k for k, v in ids.items()}
    return [(names.get(n["memory"]["id"], n["memory"]["title"]), n["depth"]) for n in result["nodes"]]


# --- strategies, depth, direction, filters ---------------------------------------------------------


def test_breadth_first_answers_by_depth_then_score_and_weighted_by_best_score(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        bfs = _traverse(conn, [world["A"]], depth=2, direction="out", relations=["relates_to", "part_of"])
        weighted = _traverse(
            conn, [world["A"]], depth=2, direction="out", relations=["relates_to", "part_of"], strategy="weighted"
        )
    # F (importance 0.1) is below min_importance; P is reached by mentions, not asked for.
    assert _walked(bfs, world) == [("B", 1), ("D", 1), ("C", 2), ("E", 2)]
    assert _walked(weighted, world) == [("B", 1), ("C", 2), ("D", 1), ("E", 2)]
    scores = {n["memory"]["title"]: n["score"] for n in weighted["nodes"]}
    assert scores["memory C"] == pytest.approx(0.81, abs=1e-4) and scores["memory E"] == pytest.approx(0.3, abs=1e-4)
    c = next(n for n in bfs["nodes"] if n["memory"]["id"] == world["C"])
    assert (c["via_node"], c["via_relation"]) == (world["B"], "relates_to")
    # The edges the nodes were reached by.
    assert {(e["source_id"], e["target_id"]) for e in bfs["edges"]} == {
        (world["A"], world["B"]),
        (world["A"], world["D"]),
        (world["B"], world["C"]),
        (world["D"], world["E"]),
    }
    assert all(e["current_weight"] == pytest.approx(e["weight"], abs=1e-4) for e in bfs["edges"])


def test_weighted_keeps_the_best_path_and_stops_at_the_limit(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        # E is 2 steps away by A -> D -> E (0.3 x 1.0); add a better 3-step path A -> B -> C -> E.
        _insert_edge(conn, tenant, world["C"], "relates_to", world["E"], 0.9)
        result = _traverse(conn, [world["A"]], depth=3, direction="out", strategy="weighted", limit=3)
    assert _walked(result, world) == [("B", 1), ("C", 2), ("P", 1)]  # 0.9, 0.81, 0.8: by score, not depth
    with as_agent(tenant, "luna") as conn:
        result = _traverse(conn, [world["A"]], depth=3, direction="out", strategy="weighted")
    e = next(n for n in result["nodes"] if n["memory"]["id"] == world["E"])
    assert (e["depth"], e["via_node"]) == (3, world["C"]) and e["score"] == pytest.approx(0.729, abs=1e-4)


def test_depth_limits_the_walk_and_breadth_first_stops_at_the_limit(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        one = _traverse(conn, [world["A"]], depth=1, direction="out")
        limited = _traverse(conn, [world["A"]], depth=3, direction="out", limit=2)
    assert sorted(_walked(one, world)) == [("B", 1), ("D", 1), ("P", 1)]
    assert _walked(limited, world) == [("B", 1), ("P", 1)]  # the two best of the first level


def test_direction_in_and_out_and_both(tenant: Tenant, as_agent: AsAgent, world: dict[str, str]) -> None:
    with as_agent(tenant, "luna") as conn:
        out = _traverse(conn, [world["B"]], depth=1, direction="out")
        inward = _traverse(conn, [world["B"]], depth=2, direction="in")
        both = _traverse(conn, [world["B"]], depth=1, direction="both")
    assert _walked(out, world) == [("C", 1)]
    assert _walked(inward, world) == [("A", 1), ("C", 2)]  # B <- A <- C
    assert sorted(_walked(both, world)) == [("A", 1), ("C", 1)]
    assert [(e["source_id"], e["target_id"]) for e in inward["edges"]] == [
        (world["A"], world["B"]),
        (world["C"], world["A"]),
    ]


def test_relation_and_kind_filters(tenant: Tenant, as_agent: AsAgent, world: dict[str, str]) -> None:
    with as_agent(tenant, "luna") as conn:
        part_of = _traverse(conn, [world["A"]], depth=3, direction="out", relations=["part_of"])
        facts = _traverse(conn, [world["A"]], depth=3, direction="out", kinds=["fact"])
        decisions = _traverse(conn, [world["D"]], depth=2, kinds=["decision"])
    assert _walked(part_of, world) == [("D", 1)]
    assert "E" not in [name for name, _ in _walked(facts, world)]
    assert _walked(decisions, world) == [("E", 1)]


def test_cycles_neither_loop_nor_duplicate_and_start_nodes_are_not_returned(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        for strategy in ("breadth_first", "weighted"):
            result = _traverse(conn, [world["A"], world["A"], world["B"]], depth=6, strategy=strategy)
            names = [name for name, _ in _walked(result, world)]
            assert sorted(names) == ["C", "D", "E", "P"], strategy
            assert len(result["edges"]) == 4


def test_low_importance_nodes_are_skipped_unless_entities_or_start_nodes(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str], contact: dict[str, Any]
) -> None:
    contact_node = admin.execute(
        "select id from cortex.memory_nodes where ref_kind = 'contact' and ref_id = %s", (contact["id"],)
    ).fetchone()["id"]
    admin.execute("update cortex.memory_nodes set importance = 0.05 where id = %s", (contact_node,))
    with as_agent(tenant, "luna") as conn:
        _insert_edge(conn, tenant, world["F"], "applies_to", str(contact_node), 0.9)
        from_a = _traverse(conn, [world["A"]], depth=1, direction="out")
        from_f = _traverse(conn, [world["F"]], depth=1, direction="out")
    assert "F" not in [name for name, _ in _walked(from_a, world)]
    assert [n["memory"]["kind"] for n in from_f["nodes"]] == ["contact"]  # an entity, whatever its importance


def test_only_active_nodes_are_reached(admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str]) -> None:
    admin.execute("update cortex.memory_nodes set status = 'archived' where id = %s", (world["B"],))
    with as_agent(tenant, "luna") as conn:
        result = _traverse(conn, [world["A"]], depth=3, direction="out")
        from_archived = _traverse(conn, [world["B"]], depth=1, direction="out")
    assert "B" not in [name for name, _ in _walked(result, world)]
    assert _walked(from_archived, world) == [("C", 1)]  # a start node may be any visible node


# --- decay and reinforcement ---------------------------------------------------------------------


def test_a_decayed_edge_is_not_followed_until_reinforcement_brings_it_back(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    # A -part_of 0.3-> D, a half-life old: 0.15, below min_weight 0.2.
    admin.execute(
        "update cortex.memory_edges set last_reinforced_at = now() - interval '30 days' "
        "where source_id = %s and target_id = %s",
        (world["A"], world["D"]),
    )
    with as_agent(tenant, "luna") as conn:
        assert "D" not in [n for n, _ in _walked(_traverse(conn, [world["A"]], depth=1), world)]
        lowered = _traverse(conn, [world["A"]], depth=1, min_weight=0.1)
        assert "D" in [n for n, _ in _walked(lowered, world)]
    for _ in range(2):  # served in two more requests
        with as_agent(tenant, "luna") as conn:
            conn.execute("select cortex.record_access(%s, array[%s]::uuid[])", (tenant.id, world["D"]))
    admin.execute("select cortex.fold_memory_access()")
    with as_agent(tenant, "luna") as conn:
        result = _traverse(conn, [world["A"]], depth=1)
    d = next(n for n in result["nodes"] if n["memory"]["id"] == world["D"])
    # Served three times (the traversal with a lower min_weight, then two requests): 0.15 + 3 x 0.05.
    assert d["score"] == pytest.approx(0.3, abs=1e-3)


def test_a_permanent_end_spares_an_edge_from_decay(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    admin.execute(
        "update cortex.memory_edges set last_reinforced_at = now() - interval '300 days' where source_id = %s",
        (world["D"],),
    )
    admin.execute("update cortex.memory_nodes set permanent = true where id = %s", (world["E"],))
    with as_agent(tenant, "luna") as conn:
        result = _traverse(conn, [world["D"]], depth=1, direction="out")
    assert _walked(result, world) == [("E", 1)] and result["nodes"][0]["score"] == pytest.approx(1.0)
    assert [e["current_weight"] for e in result["edges"]] == [pytest.approx(1.0)]
    with as_agent(tenant, "luna") as conn:  # from the permanent end as a start node too
        back = _traverse(conn, [world["E"]], depth=1, direction="in")
    assert [e["current_weight"] for e in back["edges"]] == [pytest.approx(1.0)]


def test_every_index_of_edges_by_target_is_an_exact_match_for_a_whole_edge_key(admin: Admin) -> None:
    # traverse_graph and neighbors look an edge up by its whole key. A pooled connection runs them
    # on cached generic plans, and at 1M nodes the planner took the incoming-edges index for that
    # lookup: without source_id in it, each lookup of an edge into a hub filtered the hub's
    # 12,000 edges (p95 157 ms -> 21 ms, docs/benchmarks.md). Whichever index a plan takes, it must
    # find the edge by the whole key. (A partial index, such as Identity's applies_to edges by weight,
    # serves only statements that name its relation as a constant: no generic plan can take it.)
    rows = admin.execute(
        "select i.relname as index, array(select a.attname::text from unnest(x.indkey) with ordinality k (attnum, n) "
        "  join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.attnum order by k.n) as cols "
        "from pg_index x join pg_class i on i.oid = x.indexrelid "
        "where x.indrelid = 'cortex.memory_edges'::regclass and x.indpred is null"
    ).fetchall()
    by_target = [r for r in rows if r["cols"][:2] == ["tenant_id", "target_id"]]
    assert by_target, rows
    for r in by_target:
        assert {"tenant_id", "source_id", "relation", "target_id"} <= set(r["cols"]), r


def test_each_request_records_access_once_per_returned_node(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        result = _traverse(conn, [world["A"], world["A"]], depth=6)
    returned = sorted(n["memory"]["id"] for n in result["nodes"])
    rows = admin.execute("select node_id::text as id, agent from cortex.memory_access order by 1").fetchall()
    assert [r["id"] for r in rows] == returned and {r["agent"] for r in rows} == {"luna"}
    with as_agent(tenant, "luna") as conn:
        items = call(conn, "neighbors", node_id=typed(world["A"], "uuid"))["items"]
    assert admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"] == len(returned) + len(
        {i["memory"]["id"] for i in items}
    )
    folded = admin.execute("select cortex.fold_memory_access() as r").fetchone()["r"]
    assert folded["nodes"] == len(set(returned) | {i["memory"]["id"] for i in items})
    b = admin.execute("select access_count from cortex.memory_nodes where id = %s", (world["B"],)).fetchone()
    assert b["access_count"] == 2  # one traversal, one neighbors call


# --- visibility ------------------------------------------------------------------------------------


def test_private_nodes_and_their_edges_are_invisible_to_other_agents(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "mia") as conn:
        result = _traverse(conn, [world["A"]], depth=6)
        items = call(conn, "neighbors", node_id=typed(world["A"], "uuid"))["items"]
    assert "P" not in [n for n, _ in _walked(result, world)]
    assert world["P"] not in {e["target_id"] for e in result["edges"]}
    assert world["P"] not in {i["memory"]["id"] for i in items}
    with pytest.raises(CortexError) as err, as_agent(tenant, "mia") as conn:
        _traverse(conn, [world["P"]])
    assert (err.value.status, err.value.field) == (404, "start_ids")
    with pytest.raises(CortexError) as err, as_agent(tenant, "mia") as conn:
        call(conn, "neighbors", node_id=typed(world["P"], "uuid"))
    assert (err.value.status, err.value.field) == (404, "node_id")
    with as_agent(tenant, "luna") as conn:
        mine = call(conn, "neighbors", node_id=typed(world["A"], "uuid"), relations=typed(["mentions"], "text[]"))
    assert [i["memory"]["id"] for i in mine["items"]] == [world["P"]]


def test_another_tenants_start_id_is_404(
    other_tenant: Tenant, as_agent: AsAgent, world: dict[str, str], client: TestClient
) -> None:
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "luna") as conn:
        _traverse(conn, [world["A"]])
    assert (err.value.status, err.value.field) == (404, "start_ids")
    response = client.post(
        f"{V1}/graph/traverse", json={"start_ids": [world["A"]]}, headers=bearer(other_tenant.keys["luna"])
    )
    assert response.status_code == 404 and error_of(response)["field"] == "start_ids"
    response = client.get(f"{V1}/graph/nodes/{world['A']}/neighbors", headers=bearer(other_tenant.keys["luna"]))
    assert response.status_code == 404 and error_of(response)["field"] == "node_id"


# --- neighbors ---------------------------------------------------------------------------------------


def test_neighbors_lists_each_edge_strongest_first_with_its_direction(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        items = call(conn, "neighbors", node_id=typed(world["A"], "uuid"))["items"]
        out = call(conn, "neighbors", node_id=typed(world["A"], "uuid"), direction="out", limit=2)["items"]
        decisions = call(conn, "neighbors", node_id=typed(world["D"], "uuid"), kinds=typed(["decision"], "text[]"))
    names = {v: k for k, v in world.items()}
    got = [(names[i["memory"]["id"]], i["relation"], i["direction"], round(i["weight"], 3)) for i in items]
    # F is below min_importance; the rest strongest first.
    assert got == [
        ("B", "relates_to", "out", 0.9),
        ("C", "relates_to", "in", 0.9),
        ("P", "mentions", "out", 0.8),
        ("D", "part_of", "out", 0.3),
    ]
    assert [names[i["memory"]["id"]] for i in out] == ["B", "P"]
    assert [names[i["memory"]["id"]] for i in decisions["items"]] == ["E"]


# --- link_memories -----------------------------------------------------------------------------------


def test_link_creates_then_reinforces_an_edge(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "mia") as conn:
        first = call(conn, "link_memories", source_id=typed(world["B"], "uuid"), target_id=typed(world["E"], "uuid"),
                     relation="caused_by", metadata={"why": "test"})  # fmt: skip
    assert first["created"] is True and first["weight"] == pytest.approx(0.5) and first["created_by"] == "mia"
    assert first["metadata"] == {"why": "test"}
    admin.execute(
        "update cortex.memory_edges set last_reinforced_at = now() - interval '30 days' "
        "where source_id = %s and relation = 'caused_by'",
        (world["B"],),
    )
    with as_agent(tenant, "mia") as conn:
        again = call(conn, "link_memories", source_id=typed(world["B"], "uuid"), target_id=typed(world["E"], "uuid"),
                     relation="caused_by", weight=typed(0.3, "real"), metadata={"seen": 2})  # fmt: skip
        weaker = call(conn, "link_memories", source_id=typed(world["B"], "uuid"), target_id=typed(world["E"], "uuid"),
                      relation="caused_by", weight=typed(0.1, "real"))  # fmt: skip
    assert again["created"] is False and again["weight"] == pytest.approx(0.3, abs=1e-4)  # max(0.25 decayed, 0.3)
    assert again["metadata"] == {"why": "test", "seen": 2}
    assert weaker["weight"] == pytest.approx(0.3, abs=1e-4) and weaker["current_weight"] == pytest.approx(0.3, abs=1e-3)
    n = admin.execute("select count(*) as n from cortex.memory_edges where relation = 'caused_by'").fetchone()["n"]
    assert n == 1


def _version(conn: Any) -> int:
    return int(call(conn, "graph_version")["version"])


def test_graph_version_moves_after_a_link_and_not_after_a_read(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(tenant, "luna") as conn:
        v0 = _version(conn)
    with as_agent(tenant, "luna") as conn:
        _traverse(conn, [world["A"]])
    with as_agent(tenant, "luna") as conn:
        assert _version(conn) == v0
        call(conn, "link_memories", source_id=typed(world["C"], "uuid"), target_id=typed(world["D"], "uuid"),
             relation="relates_to")  # fmt: skip
    with as_agent(tenant, "luna") as conn:
        assert _version(conn) == v0 + 1


def test_a_link_to_another_agents_private_node_or_another_tenants_node_is_404_and_writes_nothing(
    admin: Admin, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    with as_agent(other_tenant, "luna") as conn:
        foreign = _insert_node(conn, other_tenant, "luna", "globex memory")
    before = admin.execute("select count(*) as n from cortex.memory_edges").fetchone()["n"]
    cases = [
        ("mia", world["B"], world["P"], "target_id"),
        ("mia", world["P"], world["B"], "source_id"),
        ("luna", world["B"], foreign, "target_id"),
        ("luna", foreign, world["B"], "source_id"),
    ]
    for agent, source, target, field in cases:
        with pytest.raises(CortexError) as err, as_agent(tenant, agent) as conn:
            call(conn, "link_memories", source_id=typed(source, "uuid"), target_id=typed(target, "uuid"),
                 relation="relates_to")  # fmt: skip
        assert (err.value.status, err.value.field) == (404, field)
    assert admin.execute("select count(*) as n from cortex.memory_edges").fetchone()["n"] == before


# --- graph_stats ---------------------------------------------------------------------------------------


def test_graph_stats_counts_what_the_caller_sees(
    admin: Admin, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    admin.execute(
        "update cortex.memory_nodes set needs_review = true, embed_status = 'failed' where id = %s", (world["C"],)
    )
    admin.execute("update cortex.memory_nodes set status = 'archived' where id = %s", (world["F"],))
    with as_agent(tenant, "luna") as conn:
        luna = call(conn, "graph_stats")
        version = _version(conn)
    with as_agent(tenant, "mia") as conn:
        mia = call(conn, "graph_stats")
    with as_agent(other_tenant, "luna") as conn:
        other = call(conn, "graph_stats")
    GraphStats.model_validate(luna)
    assert luna["nodes"]["by_kind"]["fact"] == 6 and luna["nodes"]["by_kind"]["decision"] == 1
    assert luna["nodes"]["by_kind"]["agent"] == 6 and luna["nodes"]["by_kind"]["contact"] == 0
    assert luna["nodes"]["total"] == 13 and mia["nodes"]["total"] == 12  # P is luna's
    assert luna["nodes"]["by_status"] == {"active": 12, "superseded": 0, "archived": 1}
    assert luna["nodes"]["needs_review"] == 1 and luna["nodes"]["failed_embedding"] == 1
    assert luna["nodes"]["pending_embedding"] == 12
    assert luna["edges"]["by_relation"]["relates_to"] == 5 and luna["edges"]["by_relation"]["part_of"] == 1
    assert luna["edges"]["total"] == 7 and mia["edges"]["total"] == 6
    assert luna["version"] == version
    assert luna["settings"] == {"half_life_days": 30, "min_weight": 0.2, "min_importance": 0.3, "reinforce_step": 0.05}
    assert other["nodes"]["by_kind"]["fact"] == 0 and other["edges"]["total"] == 0


# --- settings (operators) --------------------------------------------------------------------------------


def test_set_memory_settings_checks_keys_and_values_and_is_owner_only(
    admin: Admin, tenant: Tenant, as_agent: AsAgent
) -> None:
    row = admin.execute(
        "select cortex.set_memory_settings(%s, %s) as s", (tenant.id, json.dumps({"half_life_days": "14"}))
    ).fetchone()
    assert row["s"]["half_life_days"] == 14 and row["s"]["min_weight"] == pytest.approx(0.2)
    for settings, field in [
        ({"half_lives": 3}, "half_lives"),
        ({"min_weight": 2}, "min_weight"),
        ({"half_life_days": "soon"}, "half_life_days"),
        ({"text_config": "klingon"}, "text_config"),
        ({"min_importance": None}, "min_importance"),
    ]:
        with pytest.raises(psycopg.errors.InvalidParameterValue) as err:
            admin.execute("select cortex.set_memory_settings(%s, %s)", (tenant.id, json.dumps(settings)))
        assert err.value.diag.column_name == field
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select cortex.set_memory_settings(%s, '{}'::jsonb)", (tenant.id,))


# --- bad input: SQL and HTTP paths --------------------------------------------------------------------

BAD_TRAVERSALS: list[tuple[dict[str, Any], str]] = [
    ({"depth": 0}, "depth"),
    ({"depth": 7}, "depth"),
    ({"direction": "sideways"}, "direction"),
    ({"strategy": "depth_first"}, "strategy"),
    ({"relations": ["likes"]}, "relations"),
    ({"kinds": ["rumour"]}, "kinds"),
    ({"min_weight": 1.5}, "min_weight"),
    ({"limit": 0}, "limit"),
    ({"limit": 501}, "limit"),
]


@pytest.mark.parametrize(("options", "field"), BAD_TRAVERSALS, ids=[f for _, f in BAD_TRAVERSALS])
def test_bad_traversal_input_is_422_naming_the_field_on_both_paths(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str], client: TestClient, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        _traverse(conn, [world["A"]], **dict(options))
    assert (err.value.status, err.value.field) == (422, field)
    response = client.post(
        f"{V1}/graph/traverse", json={"start_ids": [world["A"]], **options}, headers=bearer(tenant.keys["luna"])
    )
    assert response.status_code == 422 and error_of(response)["field"].split(".")[0] == field


@pytest.mark.parametrize("count", [0, 101])
def test_an_empty_or_too_long_start_list_is_422(
    tenant: Tenant, as_agent: AsAgent, client: TestClient, count: int
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(count)]
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        _traverse(conn, ids)
    assert (err.value.status, err.value.field) == (422, "start_ids")
    response = client.post(f"{V1}/graph/traverse", json={"start_ids": ids}, headers=bearer(tenant.keys["luna"]))
    assert response.status_code == 422 and error_of(response)["field"] == "start_ids"


BAD_LINKS: list[tuple[dict[str, Any], str]] = [
    ({"target_id": "A"}, "target_id"),  # a self-loop
    ({"relation": "likes"}, "relation"),
    ({"weight": 1.5}, "weight"),
    ({"weight": -0.1}, "weight"),
]


@pytest.mark.parametrize(("change", "field"), BAD_LINKS, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD_LINKS)])
def test_bad_link_input_is_422_naming_the_field_on_both_paths_and_writes_nothing(
    admin: Admin,
    tenant: Tenant,
    as_agent: AsAgent,
    world: dict[str, str],
    client: TestClient,
    change: dict[str, Any],
    field: str,
) -> None:
    args: dict[str, Any] = {"source_id": world["A"], "target_id": world["E"], "relation": "relates_to", **change}
    if args["target_id"] == "A":
        args["target_id"] = world["A"]
    before = admin.execute("select count(*) as n from cortex.memory_edges").fetchone()["n"]
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "link_memories", source_id=typed(args["source_id"], "uuid"),
             target_id=typed(args["target_id"], "uuid"), relation=args["relation"],
             weight=typed(args.get("weight", 0.5), "real"))  # fmt: skip
    assert (err.value.status, err.value.field) == (422, field)
    response = client.post(f"{V1}/graph/edges", json=args, headers=bearer(tenant.keys["luna"]))
    assert response.status_code == 422 and error_of(response)["field"] == field
    assert admin.execute("select count(*) as n from cortex.memory_edges").fetchone()["n"] == before


def test_a_read_only_agent_reads_the_graph_but_cannot_link(
    tenant: Tenant, world: dict[str, str], client: TestClient
) -> None:
    key = tenant.keys["helios"]
    assert client.post(f"{V1}/graph/traverse", json={"start_ids": [world["A"]]}, headers=bearer(key)).status_code == 200
    response = client.post(
        f"{V1}/graph/edges",
        json={"source_id": world["B"], "target_id": world["D"], "relation": "relates_to"},
        headers=bearer(key),
    )
    assert response.status_code == 403


def test_bad_neighbors_input_is_4xx_on_both_paths(
    tenant: Tenant, as_agent: AsAgent, world: dict[str, str], client: TestClient
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "neighbors", node_id=typed(world["A"], "uuid"), relations=typed(["likes"], "text[]"))
    assert (err.value.status, err.value.field) == (422, "relations")
    key = bearer(tenant.keys["luna"])
    response = client.get(f"{V1}/graph/nodes/{world['A']}/neighbors?relations=relates_to,likes", headers=key)
    assert response.status_code == 422 and error_of(response)["field"].startswith("relations")
    response = client.get(f"{V1}/graph/nodes/{uuid.uuid4()}/neighbors", headers=key)
    assert response.status_code == 404 and error_of(response)["field"] == "node_id"
    response = client.get(f"{V1}/graph/nodes/not-a-uuid/neighbors", headers=key)
    assert response.status_code == 422 and error_of(response)["field"] == "id"


# --- HTTP ---------------------------------------------------------------------------------------------


def test_the_graph_routes_over_http(admin: Admin, tenant: Tenant, world: dict[str, str], client: TestClient) -> None:
    key = bearer(tenant.keys["luna"])
    response = client.post(
        f"{V1}/graph/traverse",
        json={
            "start_ids": [world["A"]],
            "depth": 2,
            "direction": "out",
            "strategy": "weighted",
            "relations": ["relates_to", "part_of"],
        },
        headers=key,
    )
    assert response.status_code == 200
    result = TraverseResult.model_validate(body_of(response))
    assert [str(n.memory.id) for n in result.nodes] == [world["B"], world["C"], world["D"], world["E"]]

    response = client.get(
        f"{V1}/graph/nodes/{world['A']}/neighbors?direction=out&relations=relates_to,part_of", headers=key
    )
    assert response.status_code == 200
    listed = NeighborList.model_validate(body_of(response))
    assert [str(i.memory.id) for i in listed.items] == [world["B"], world["D"]]

    version = GraphVersion.model_validate(body_of(client.get(f"{V1}/graph/version", headers=key))).version
    link = {"source_id": world["E"], "target_id": world["B"], "relation": "contradicts", "weight": 0.7}
    created = client.post(f"{V1}/graph/edges", json=link, headers=key)
    assert created.status_code == 201 and EdgeLinked.model_validate(body_of(created)).created
    again = client.post(f"{V1}/graph/edges", json=link, headers=key)
    assert again.status_code == 200 and again.json()["created"] is False
    assert client.get(f"{V1}/graph/version", headers=key).json()["version"] == version + 2

    stats = GraphStats.model_validate(body_of(client.get(f"{V1}/graph/stats", headers=key)))
    assert stats.edges.by_relation["contradicts"] == 1 and stats.version == version + 2
    accessed = admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"]
    assert accessed == 4 + 2  # the traversal's nodes, then the neighbours'


# --- the CLI --------------------------------------------------------------------------------------------


def cortex(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.output}"
    return result


def as_json(*args: str, code: int = 0) -> Any:
    return json.loads(cortex("--json", *args, code=code).stdout)


def test_graph_commands_traverse_neighbors_link_stats_and_version(
    dsn: str, tenant: Tenant, world: dict[str, str]
) -> None:
    t = ("--tenant", tenant.slug, "--agent", "luna")
    walked = as_json(*t, "graph", "traverse", world["A"], "--direction", "out", "--relation", "relates_to",
                     "--relation", "part_of", "--strategy", "weighted")  # fmt: skip
    assert [n["memory"]["id"] for n in walked["nodes"]] == [world["B"], world["C"], world["D"], world["E"]]
    text = cortex(*t, "graph", "traverse", world["A"], "--depth", "1", "--kind", "fact").stdout
    assert "memory B" in text and "memory E" not in text
    items = as_json(*t, "graph", "neighbors", world["D"], "--direction", "out")["items"]
    assert [i["memory"]["id"] for i in items] == [world["E"]]
    assert "-> relates_to" in cortex(*t, "graph", "neighbors", world["D"]).stdout
    v0 = int(cortex(*t, "graph", "version").stdout)
    linked = as_json(*t, "graph", "link", world["E"], world["A"], "caused_by", "--weight", "0.6", "--meta", "by=cli")
    assert linked["created"] and linked["metadata"] == {"by": "cli"}
    assert "reinforced" in cortex(*t, "graph", "link", world["E"], world["A"], "caused_by").stdout
    assert int(cortex(*t, "graph", "version").stdout) == v0 + 2
    stats = as_json(*t, "graph", "stats")
    assert stats["edges"]["by_relation"]["caused_by"] == 1
    assert "nodes by kind" in cortex(*t, "graph", "stats").stdout
    # Bad input reaches SQL and exits 1 naming the field; a bad choice exits 2 before any call.
    assert "depth" in cortex(*t, "graph", "traverse", world["A"], "--depth", "9", code=1).output
    assert "relation" in cortex(*t, "graph", "link", world["A"], world["A"], "likes", code=1).output
    cortex(*t, "graph", "traverse", world["A"], "--strategy", "random", code=2)


def test_graph_operator_commands_backfill_fold_and_settings(
    dsn: str, admin: Admin, tenant: Tenant, as_agent: AsAgent, world: dict[str, str]
) -> None:
    t = ("--tenant", tenant.slug)
    assert as_json(*t, "graph", "backfill") == {"nodes_added": 0, "edges_added": 0}
    assert as_json("graph", "backfill", "--all-tenants") == {"nodes_added": 0, "edges_added": 0}
    with as_agent(tenant, "luna") as conn:
        _traverse(conn, [world["D"]], depth=1, direction="out")  # serves E
    folded = as_json(*t, "graph", "fold")
    assert folded["access"] == {"nodes": 1, "edges": 1} and folded["versions_folded"] >= 1
    assert "reinforced" in cortex(*t, "graph", "fold").stdout
    shown = as_json(*t, "graph", "settings", "show")
    assert shown["half_life_days"] == 30 and "tenant_id" not in shown
    changed = as_json(*t, "graph", "settings", "set", "half_life_days=7", "min_weight:=0.25")
    assert changed["half_life_days"] == 7 and changed["min_weight"] == pytest.approx(0.25)
    assert "half_life_days  7" in cortex(*t, "graph", "settings", "show").stdout
    assert "min_weight" in cortex(*t, "graph", "settings", "set", "min_weight=3", code=1).output
    assert "unknown setting" in cortex(*t, "graph", "settings", "set", "colour=blue", code=1).output
