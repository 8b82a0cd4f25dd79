"""Consolidation (issue 10, seed 003): the audit trail, the five agents, runs, dry runs, rate limits,
the command line, HTTP and the nightly job, against the real database (embeddings are set by the
owner as crafted unit vectors, so similarity is exact and the tests need no model)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import numpy as np
import psycopg
import pytest
from click.testing import CliRunner
from psycopg.types.json import Jsonb

from cortex import db
from cortex.cli import main
from cortex.consolidation import jobs, merge, service, vault
from cortex.consolidation.agents import (
    ClusterDetector,
    DecayAnalyzer,
    LTMPromoter,
    RateLimiter,
    RelationshipDiscovery,
    SemanticMerge,
    Session,
)
from cortex.consolidation.models import (
    ClusterResult,
    ConfidenceConfig,
    DecayResult,
    MergeResult,
    PromotionResult,
    RelationResult,
)
from cortex.errors import CortexError
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import FakeAnthropic, prompt_text

Admin = psycopg.Connection[dict[str, Any]]

# Seed 003's result schemas, verbatim.
SCHEMAS: dict[type, dict[str, Any]] = {
    DecayResult: {
        "type": "object",
        "properties": {
            "memory_id": {"type": "string", "format": "uuid"},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "urgency": {"enum": ["high", "medium", "low"]},
            "action": {"enum": ["reinforce", "consolidate", "promote", "gc"]},
            "beads_issue_id": {"type": ["string", "null"]},
        },
        "required": ["memory_id", "score", "urgency", "action"],
    },
    ClusterResult: {
        "type": "object",
        "properties": {
            "cluster_id": {"type": "string", "format": "uuid"},
            "memory_ids": {"type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 2},
            "cohesion": {"type": "number", "minimum": 0, "maximum": 1},
            "action": {"enum": ["merge", "link", "ignore"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "beads_issue_id": {"type": ["string", "null"]},
        },
        "required": ["cluster_id", "memory_ids", "cohesion", "action", "confidence"],
    },
    MergeResult: {
        "type": "object",
        "properties": {
            "new_memory_id": {"type": "string", "format": "uuid"},
            "source_ids": {"type": "array", "items": {"type": "string", "format": "uuid"}, "minItems": 2},
            "relation_ids": {"type": "array", "items": {"type": "string", "format": "uuid"}},
            "content_diff": {"type": "string"},
            "entities_preserved": {"type": "integer", "minimum": 0},
            "success": {"type": "boolean"},
            "beads_issue_id": {"type": ["string", "null"]},
        },
        "required": ["new_memory_id", "source_ids", "relation_ids", "content_diff", "entities_preserved", "success"],
    },
    PromotionResult: {
        "type": "object",
        "properties": {
            "memory_id": {"type": "string", "format": "uuid"},
            "vault_path": {"type": "string"},
            "criteria_met": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "success": {"type": "boolean"},
            "beads_issue_id": {"type": ["string", "null"]},
        },
        "required": ["memory_id", "criteria_met", "success"],
    },
    RelationResult: {
        "type": "object",
        "properties": {
            "from_memory_id": {"type": "string", "format": "uuid"},
            "to_memory_id": {"type": "string", "format": "uuid"},
            "relation_id": {"type": "string", "format": "uuid"},
            "strength": {"type": "number", "minimum": 0, "maximum": 1},
            "reasoning": {"type": "string"},
            "shared_entities": {"type": "array", "items": {"type": "string"}},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "beads_issue_id": {"type": ["string", "null"]},
        },
        "required": ["from_memory_id", "to_memory_id", "relation_id", "strength", "reasoning", "confidence"],
    },
}


def assert_seed_schema(result: Any) -> None:
    """The result, dumped as JSON, validates against the seed's schema of its model."""
    validator = jsonschema_rs.validator_for(SCHEMAS[type(result)], validate_formats=True)
    validator.validate(result.model_dump(mode="json"))


# --- helpers -----------------------------------------------------------------------------------------

_RNG = np.random.default_rng(7)


def unit(base: np.ndarray | None = None, noise: float = 0.0) -> np.ndarray:
    """A random unit vector, or `base` plus `noise` of random direction, normalised."""
    v = _RNG.normal(size=384)
    v = v / np.linalg.norm(v)
    if base is not None:
        v = base + noise * v
    return v / np.linalg.norm(v)


def literal(v: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.6f}" for x in v) + "]"


def remember(as_agent: AsAgent, tenant: Tenant, title: str, body: str = "", **extra: Any) -> str:
    args = {k: db.typed(v, "real") if isinstance(v, float) else v for k, v in extra.items()}
    with as_agent(tenant, "luna") as conn:
        return str(
            db.call(conn, "remember", kind=args.pop("kind", "fact"), title=title, body=body, **args)["memory"]["id"]
        )


def embed(admin: Admin, memory_id: str, v: np.ndarray) -> None:
    admin.execute(
        "update cortex.memory_nodes set embedding = %s::extensions.vector, embed_status = 'done', link_status = 'done'"
        " where id = %s",
        (literal(v), memory_id),
    )


def link(admin: Admin, tenant: Tenant, a: str, b: str, relation: str = "relates_to", weight: float = 0.8) -> None:
    admin.execute(
        "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight)"
        " values (%s, %s, %s, %s, %s) on conflict do nothing",
        (tenant.id, a, relation, b, weight),
    )


def system(tenant: Tenant) -> dict[str, str]:
    return db.agent_claims(tenant.id, "system")


@pytest.fixture
def session(tenant: Tenant, dsn: str) -> Iterator[Session]:
    with Session(system(tenant), dsn=dsn) as s:
        yield s


@pytest.fixture
def dry_session(tenant: Tenant, dsn: str) -> Iterator[Session]:
    with Session(system(tenant), dry_run=True, dsn=dsn) as s:
        yield s


def counts(admin: Admin) -> dict[str, Any]:
    row = admin.execute(
        """select (select count(*) from cortex.memory_nodes) as nodes,
                  (select count(*) from cortex.memory_edges) as edges,
                  (select count(*) from cortex.memory_nodes where status = 'active') as active,
                  (select count(*) from cortex.consolidation_items) as items,
                  (select count(*) from cortex.consolidation_changes) as changes,
                  (select count(*) from cortex.consolidation_runs) as runs,
                  (select count(*) from cortex.consolidation_rate) as rate,
                  (select count(*) from cortex.consolidation_promotions) as promotions,
                  (select md5(string_agg(id::text || status || title || body, ',' order by id))
                   from cortex.memory_nodes) as content"""
    ).fetchone()
    assert row is not None
    return dict(row)


@pytest.fixture
def duplicates(tenant: Tenant, as_agent: AsAgent, admin: Admin) -> dict[str, Any]:
    """Three near-duplicate facts (linked as the auto-linker would), a look-alike with another number,
    and an unrelated fact."""
    base = unit()
    texts = [
        ("Acme pays invoices within 30 days", "Their finance team approves every invoice by email."),
        ("Acme pays its invoices within 30 days", "Payments go out on Fridays."),
        ("Acme settles invoices within 30 days", "Their finance team approves every invoice by email."),
    ]
    ids = [remember(as_agent, tenant, t, b, importance=0.6 + i / 10) for i, (t, b) in enumerate(texts)]
    for i, m in enumerate(ids):
        embed(admin, m, unit(base, 0.15 + i * 0.02))
    link(admin, tenant, ids[1], ids[0])
    link(admin, tenant, ids[2], ids[0])
    lookalike = remember(as_agent, tenant, "Acme pays invoices within 60 days", "For the Lyon branch.")
    embed(admin, lookalike, unit(base, 0.15))
    link(admin, tenant, lookalike, ids[0])
    other = remember(as_agent, tenant, "The warehouse closes at 6 pm", "")
    embed(admin, other, unit())
    return {"ids": ids, "lookalike": lookalike, "other": other}


# --- models and thresholds -----------------------------------------------------------------------------


def test_result_models_validate_against_the_seeds_json_schemas() -> None:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    samples = [
        DecayResult(memory_id=a, score=0.05, urgency="high", action="gc", beads_issue_id=b),
        ClusterResult(cluster_id=a, memory_ids=[a, b], cohesion=0.9, action="merge", confidence=0.9),
        MergeResult(
            new_memory_id=a,
            source_ids=[a, b],
            relation_ids=[b],
            content_diff="-x\n+y",
            entities_preserved=2,
            success=True,
        ),
        PromotionResult(memory_id=a, vault_path="fact/x.md", criteria_met=["importance >= 0.7"], success=True),
        RelationResult(
            from_memory_id=a, to_memory_id=b, relation_id=a, strength=0.7, reasoning="same topic", confidence=0.7
        ),
    ]
    for result in samples:
        assert_seed_schema(result)
    with pytest.raises(ValueError):
        ClusterResult(cluster_id=a, memory_ids=[a], cohesion=0.9, action="merge", confidence=0.9)


def test_confidence_config_decides_auto_log_or_wait() -> None:
    config = ConfidenceConfig()
    assert [config.decide(c) for c in (0.95, 0.9, 0.8, 0.7, 0.5)] == ["auto", "auto", "log", "log", "wait"]
    with pytest.raises(ValueError):
        ConfidenceConfig(auto_threshold=0.5, log_threshold=0.8)


# --- the audit trail ---------------------------------------------------------------------------------


def test_an_item_has_title_notes_and_labels_and_one_set_of_memories_is_never_two_items(
    tenant: Tenant, as_agent: AsAgent
) -> None:
    a = remember(as_agent, tenant, "Fact a")
    b = remember(as_agent, tenant, "Fact b")
    with as_agent(tenant, "system") as conn:
        first = db.call(
            conn,
            "create_consolidation_item",
            agent="cluster",
            memory_ids=[b, a],
            action="link",
            urgency="low",
            extra=Jsonb({"why": "similar"}),
        )
        again = db.call(conn, "create_consolidation_item", agent="cluster", memory_ids=[a, b, a], action="merge")
        other_agent = db.call(conn, "create_consolidation_item", agent="relations", memory_ids=[a, b], action="relate")
    item = first["item"]
    assert first["created"] is True and again["created"] is False and again["item"]["id"] == item["id"]
    assert other_agent["created"] is True
    assert item["title"] and item["notes"]["memory_ids"] == sorted([a, b]) and item["notes"]["agent"] == "cluster"
    assert item["notes"]["why"] == "similar"
    assert set(item["labels"]) == {"consolidation:cluster", "urgency:low"}


def test_query_applies_every_filter_and_answers_an_empty_list_when_nothing_matches(
    tenant: Tenant, as_agent: AsAgent
) -> None:
    a = remember(as_agent, tenant, "Fact a")
    b = remember(as_agent, tenant, "Fact b")
    with as_agent(tenant, "system") as conn:
        db.call(conn, "create_consolidation_item", agent="decay", memory_ids=[a], action="gc", urgency="high")
        db.call(conn, "create_consolidation_item", agent="decay", memory_ids=[b], action="reinforce", urgency="low")
        db.call(conn, "create_consolidation_item", agent="cluster", memory_ids=[a, b], action="link", urgency="high")
        both = db.call(conn, "list_consolidation_items", agent="decay", urgency="high")["items"]
        none = db.call(conn, "list_consolidation_items", agent="promote")["items"]
        closed = db.call(conn, "list_consolidation_items", status="closed")["items"]
    assert [(i["agent"], i["urgency"], i["memory_ids"]) for i in both] == [("decay", "high", [a])]
    assert none == [] and closed == []


def test_a_claim_is_atomic_across_two_connections(tenant: Tenant, as_agent: AsAgent, admin: Admin, dsn: str) -> None:
    a = remember(as_agent, tenant, "Fact a")
    with as_agent(tenant, "system") as conn:
        item_id = db.call(conn, "create_consolidation_item", agent="decay", memory_ids=[a], action="gc")["item"]["id"]
    second: dict[str, Any] = {}

    def claim_second() -> None:
        with psycopg.connect(dsn, autocommit=True) as c2, db.as_caller(system(tenant), c2) as c:
            c.execute("set local application_name = 'second_claimer'")
            second.update(db.call(c, "claim_consolidation_item", item_id=item_id))

    with psycopg.connect(dsn, autocommit=True) as c1, db.as_caller(system(tenant), c1) as c:
        first = db.call(c, "claim_consolidation_item", item_id=item_id)
        thread = threading.Thread(target=claim_second)
        thread.start()
        # The second claimer waits on the first one's row lock (seen in pg_stat_activity) until it commits.
        while not admin.execute(
            "select exists (select from pg_stat_activity where application_name = 'second_claimer'"
            " and wait_event_type = 'Lock') as w"
        ).fetchone()["w"]:  # type: ignore[index]
            assert thread.is_alive(), second
    thread.join()
    assert first["claimed"] is True and second["claimed"] is False
    assert second["item"]["status"] == "in_progress" and second["item"]["claimed_by"] == "system"


def test_claimed_and_blocked_items_are_not_claimed_again_and_close_and_block_keep_why(
    tenant: Tenant, as_agent: AsAgent
) -> None:
    a = remember(as_agent, tenant, "Fact a")
    b = remember(as_agent, tenant, "Fact b")
    with as_agent(tenant, "system") as conn:
        one = db.call(conn, "create_consolidation_item", agent="decay", memory_ids=[a], action="gc")["item"]["id"]
        two = db.call(conn, "create_consolidation_item", agent="decay", memory_ids=[b], action="gc")["item"]["id"]
        assert db.call(conn, "claim_consolidation_item", item_id=one)["claimed"] is True
        assert db.call(conn, "claim_consolidation_item", item_id=one)["claimed"] is False
        blocked = db.call(conn, "block_consolidation_item", item_id=two, error="model timed out")
        assert db.call(conn, "claim_consolidation_item", item_id=two)["claimed"] is False
        closed = db.call(conn, "close_consolidation_item", item_id=one, reason="archived by hand")
    assert blocked["status"] == "blocked" and blocked["notes"]["error"] == "model timed out"
    assert closed["status"] == "closed" and closed["close_reason"] == "archived by hand"
    assert closed["notes"]["close_reason"] == "archived by hand"
    with pytest.raises(CortexError) as err, as_agent(tenant, "system") as conn:
        db.call(conn, "close_consolidation_item", item_id=one, reason="again")
    assert (err.value.status, err.value.sqlstate) == (409, "55000")


def test_only_admins_consolidate(tenant: Tenant, as_agent: AsAgent) -> None:
    a = remember(as_agent, tenant, "Fact a")
    for name, args in (
        ("consolidation_status", {}),
        ("list_consolidation_items", {}),
        ("create_consolidation_item", {"agent": "decay", "memory_ids": [a], "action": "gc"}),
    ):
        with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
            db.call(conn, name, **args)
        assert (err.value.status, err.value.sqlstate) == (403, "42501"), name


def test_unknown_agents_and_item_ids_get_clear_errors(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "system") as conn:
        db.call(conn, "list_consolidation_items", agent="janitor")
    assert (err.value.status, err.value.field, err.value.sqlstate) == (422, "agent", "22023")
    assert "decay, cluster, merge, promote, relations" in err.value.message
    with pytest.raises(CortexError) as err, as_agent(tenant, "system") as conn:
        db.call(conn, "get_consolidation_item", item_id=str(uuid.uuid4()))
    assert (err.value.status, err.value.field, err.value.sqlstate) == (404, "item_id", "P0002")
    with pytest.raises(CortexError) as err, as_agent(tenant, "system") as conn:
        db.call(conn, "create_consolidation_item", agent="decay", memory_ids=[str(uuid.uuid4())], action="gc")
    assert (err.value.status, err.value.field) == (404, "memory_ids")
    with pytest.raises(CortexError) as err:
        service.agent_names(["decay", "janitor"])
    assert (err.value.status, err.value.field) == (422, "agent")


# --- decay ---------------------------------------------------------------------------------------------


def test_decay_finds_urgent_memories_first_archives_gc_and_never_touches_permanent_ones(
    tenant: Tenant, as_agent: AsAgent, admin: Admin, session: Session
) -> None:
    fading = remember(as_agent, tenant, "Old note about a parking spot", importance=0.3)
    dim = remember(as_agent, tenant, "Somewhat old note on the canteen menu", importance=0.4)
    valued = remember(as_agent, tenant, "Key decision: refunds need two approvals", importance=0.9)
    permanent = remember(as_agent, tenant, "The caller's name is Ada", permanent=True, importance=0.2)
    fresh = remember(as_agent, tenant, "Fresh note", importance=0.2)
    admin.execute(
        "update cortex.memory_nodes set created_at = now() - interval '200 days' where id = any(%s)",
        ([fading, valued, permanent],),
    )
    admin.execute("update cortex.memory_nodes set created_at = now() - interval '45 days' where id = %s", (dim,))
    before = counts(admin)
    agent = DecayAnalyzer(session=session)
    scanned = agent.scan()
    assert scanned[:2] == sorted([fading, valued], key=scanned.index) and set(scanned) == {fading, valued, dim}
    assert permanent not in scanned and fresh not in scanned
    results = {str(r.memory_id): r for r in agent.run()}
    for r in results.values():
        assert_seed_schema(r)
    assert results[fading].urgency == "high" and results[fading].action == "gc" and results[fading].beads_issue_id
    assert results[valued].urgency == "high" and results[valued].action == "promote"
    assert results[dim].urgency in ("medium", "low") and results[dim].beads_issue_id is None
    node = admin.execute("select status, metadata from cortex.memory_nodes where id = %s", (fading,)).fetchone()
    assert node["status"] == "archived" and node["metadata"]["archived_by"] == "consolidation"
    item = admin.execute(
        "select * from cortex.consolidation_items where id = %s", (results[fading].beads_issue_id,)
    ).fetchone()
    assert item["status"] == "closed" and item["close_reason"].startswith("gc: archived")
    change = admin.execute("select * from cortex.consolidation_changes where item_id = %s", (item["id"],)).fetchone()
    assert change["change"] == "node_archived" and str(change["node_id"]) == fading
    after = counts(admin)
    assert after["nodes"] == before["nodes"]  # nothing deleted
    assert agent.scan() == [dim]  # analysed memories are not returned again
    with pytest.raises(CortexError) as err:
        agent.process_item(permanent)
    assert (err.value.status, err.value.field) == (422, "memory_id")


def test_run_isolates_a_failing_item_and_reports_it(
    tenant: Tenant, as_agent: AsAgent, admin: Admin, session: Session
) -> None:
    old = remember(as_agent, tenant, "An old note", importance=0.3)
    admin.execute("update cortex.memory_nodes set created_at = now() - interval '200 days' where id = %s", (old,))
    unknown = str(uuid.uuid4())

    class WithAGhost(DecayAnalyzer):
        def scan(self) -> list[str]:
            return [unknown, *super().scan()]

    agent = WithAGhost(session=session)
    results = agent.run()
    assert [str(r.memory_id) for r in results] == [old]
    assert agent.failures == [{"id": unknown, "error": f"memory {unknown} not found (SQLSTATE P0002)"}]


# --- cluster, merge and undo --------------------------------------------------------------------------


def test_cluster_scores_cohesion_opens_a_merge_item_and_never_clusters_a_set_twice(
    duplicates: dict[str, Any], session: Session, admin: Admin
) -> None:
    agent = ClusterDetector(session=session)
    results = agent.run()
    assert len(results) == 1
    result = results[0]
    assert_seed_schema(result)
    assert sorted(map(str, result.memory_ids)) == sorted(duplicates["ids"])  # the 60-day look-alike is not in it
    assert result.action == "merge" and result.cohesion >= 0.85 and result.beads_issue_id
    item = admin.execute("select * from cortex.consolidation_items where id = %s", (result.beads_issue_id,)).fetchone()
    assert "consolidation:merge" in item["labels"] and item["status"] == "open"
    assert agent.scan() == [] and ClusterDetector(session=session).run() == []


def test_merge_supersedes_the_originals_in_one_transaction_and_keeps_every_sentence(
    duplicates: dict[str, Any], session: Session, admin: Admin
) -> None:
    ClusterDetector(session=session).run()
    before = counts(admin)
    results = SemanticMerge(session=session).run()
    assert len(results) == 1
    result = results[0]
    assert_seed_schema(result)
    new = admin.execute("select * from cortex.memory_nodes where id = %s", (result.new_memory_id,)).fetchone()
    originals = admin.execute("select * from cortex.memory_nodes where id = any(%s)", (duplicates["ids"],)).fetchall()
    assert new["status"] == "active" and new["metadata"]["merged_by"] == "deterministic"
    assert all(o["status"] == "superseded" and o["valid_to"] is not None for o in originals)
    members = [{"id": o["id"], "title": o["title"], "body": o["body"]} for o in originals]
    assert merge.missing_content(members, new["title"], new["body"]) == []
    assert new["body"].count("Their finance team approves every invoice by email") == 1
    edges = admin.execute(
        "select target_id from cortex.memory_edges where source_id = %s and relation = 'consolidated_from'",
        (result.new_memory_id,),
    ).fetchall()
    assert sorted(str(e["target_id"]) for e in edges) == sorted(duplicates["ids"])
    assert result.content_diff.startswith("--- originals") and "+# merged:" in result.content_diff
    after = counts(admin)
    assert after["nodes"] == before["nodes"] + 1 and after["active"] == before["active"] - 2
    item = admin.execute("select * from cortex.consolidation_items where id = %s", (result.beads_issue_id,)).fetchone()
    assert item["status"] == "closed" and item["notes"]["merged_into"] == str(result.new_memory_id)
    kinds = [
        r["change"]
        for r in admin.execute(
            "select change from cortex.consolidation_changes where item_id = %s order by created_at", (item["id"],)
        )
    ]
    assert kinds.count("node_superseded") == 3 and kinds.count("node_created") == 1 and "edge_added" in kinds


def test_undo_of_a_merge_restores_the_originals_and_retires_the_merged_memory(
    duplicates: dict[str, Any], session: Session, admin: Admin, tenant: Tenant
) -> None:
    ClusterDetector(session=session).run()
    result = SemanticMerge(session=session).run()[0]
    undone = service.undo_merge(system(tenant), str(result.beads_issue_id), "merged too eagerly")
    assert undone["retired"] == str(result.new_memory_id)
    statuses = {
        str(r["id"]): r["status"]
        for r in admin.execute(
            "select id, status from cortex.memory_nodes where id = any(%s)",
            ([*duplicates["ids"], str(result.new_memory_id)],),
        )
    }
    assert statuses.pop(str(result.new_memory_id)) == "archived"
    assert set(statuses.values()) == {"active"}
    with pytest.raises(CortexError) as err:
        service.undo_merge(system(tenant), str(result.beads_issue_id))
    assert (err.value.status, err.value.sqlstate) == (409, "55000")


def test_merge_only_processes_consolidation_merge_items(tenant: Tenant, as_agent: AsAgent, session: Session) -> None:
    a = remember(as_agent, tenant, "Fact a")
    b = remember(as_agent, tenant, "Fact b")
    with as_agent(tenant, "system") as conn:
        item = db.call(conn, "create_consolidation_item", agent="cluster", memory_ids=[a, b], action="link")["item"]
    agent = SemanticMerge(session=session)
    assert agent.scan() == []
    with pytest.raises(CortexError) as err:
        agent.process_item(item["id"])
    assert (err.value.status, err.value.field) == (422, "item_id") and "consolidation:merge" in err.value.message


def _merge_reply(answer: dict[str, Any] | str) -> Any:
    def reply(request: dict[str, Any]) -> str:
        assert prompt_text(request).startswith("You are merging near-duplicate memories")
        return answer if isinstance(answer, str) else json.dumps(answer)

    return reply


def test_a_model_merge_is_schema_checked_budgeted_and_recorded(
    duplicates: dict[str, Any], claude: FakeAnthropic, tenant: Tenant, dsn: str, admin: Admin
) -> None:
    claude.reply = _merge_reply(
        {
            "title": "Acme pays invoices within 30 days",
            "body": "Acme pays (settles) its invoices within 30 days. Their finance team approves every invoice by "
            "email. Payments go out on Fridays.",
        }
    )
    with Session(system(tenant), dsn=dsn) as s:
        ClusterDetector(session=s).run()
        result = SemanticMerge(session=s).run()[0]
    node = admin.execute("select metadata from cortex.memory_nodes where id = %s", (result.new_memory_id,)).fetchone()
    assert node["metadata"]["merged_by"] == claude.requests[0]["model"]
    usage = admin.execute("select * from cortex.token_usage where operation = 'consolidation_merge'").fetchall()
    assert len(usage) == 1 and usage[0]["input_tokens"] > 0
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            "Sure! Here is the merged memory: Acme pays invoices within 30 days.",
            "does not match the MergedMemory schema",
        ),
        ({"title": "Acme pays invoices", "body": "Acme pays within 30 days."}, "lost"),
    ],
    ids=["off-schema", "drops-sentences"],
)
def test_a_model_answer_failing_the_schema_or_the_check_changes_nothing_and_blocks_the_item(
    answer: Any, error: str, duplicates: dict[str, Any], claude: FakeAnthropic, tenant: Tenant, dsn: str, admin: Admin
) -> None:
    claude.reply = _merge_reply(answer)
    with Session(system(tenant), dsn=dsn) as s:
        ClusterDetector(session=s).run()
        before = counts(admin)
        agent = SemanticMerge(session=s)
        assert agent.run() == []
    assert len(agent.failures) == 1 and error in agent.failures[0]["error"]
    after = counts(admin)
    assert (after["nodes"], after["edges"], after["content"]) == (before["nodes"], before["edges"], before["content"])
    item = admin.execute(
        "select * from cortex.consolidation_items where id = %s", (agent.failures[0]["id"],)
    ).fetchone()
    assert item["status"] == "blocked" and error in item["error"]
    usage = admin.execute("select metadata from cortex.token_usage where operation = 'consolidation_merge'").fetchall()
    assert len(usage) == 1  # the call cost its tokens and is recorded, with its error when off-schema


def test_a_person_processes_a_blocked_merge_item_offline(
    duplicates: dict[str, Any], session: Session, tenant: Tenant, admin: Admin
) -> None:
    ClusterDetector(session=session).run()
    item_id = str(admin.execute("select id from cortex.consolidation_items where agent = 'cluster'").fetchone()["id"])
    with db.as_caller(system(tenant), session.conn) as c:
        db.call(c, "block_consolidation_item", item_id=item_id, error="model down")
    done = service.process_item(system(tenant), item_id, conn=session.conn)
    assert done["item"]["status"] == "closed" and done["result"]["success"] is True


# --- promote -----------------------------------------------------------------------------------------


def test_promote_writes_markdown_with_front_matter_once_and_records_the_vault_path(
    tenant: Tenant, as_agent: AsAgent, admin: Admin, session: Session, tmp_path: Path
) -> None:
    star = remember(
        as_agent,
        tenant,
        "Refunds above 500 EUR need two approvals",
        "Decided with finance in March.",
        kind="decision",
        importance=0.9,
        confidence=0.9,
    )
    remember(as_agent, tenant, "Minor note", importance=0.9, confidence=0.9)  # too new, never used
    admin.execute("update cortex.memory_nodes set access_count = 5 where id = %s", (star,))
    agent = LTMPromoter(session=session, vault_dir=tmp_path)
    results = agent.run()
    assert [str(r.memory_id) for r in results] == [star]
    result = results[0]
    assert_seed_schema(result)
    assert "access_count >= 3" in result.criteria_met and result.vault_path.startswith("decision/refunds-above-500")
    files = list(tmp_path.rglob("*.md"))
    assert files == [tmp_path / result.vault_path]
    text = files[0].read_text()
    front = vault.front_matter(text)
    assert front["id"] == star and front["status"] == "promoted" and "# Refunds above 500 EUR" in text
    node = admin.execute("select metadata from cortex.memory_nodes where id = %s", (star,)).fetchone()
    assert node["metadata"]["promoted"]["status"] == "promoted"
    assert node["metadata"]["promoted"]["vault_path"] == result.vault_path
    # A re-run is a no-op: not scanned again, and processing it again writes no second file.
    assert agent.scan() == []
    again = agent.process_item(star)
    assert again.vault_path == result.vault_path and list(tmp_path.rglob("*.md")) == files
    assert admin.execute("select count(*) as n from cortex.consolidation_promotions").fetchone()["n"] == 1


# --- relations ---------------------------------------------------------------------------------------


def test_relations_propose_pairs_about_a_shared_entity_with_strength_and_reasoning_never_an_existing_pair(
    tenant: Tenant, as_agent: AsAgent, admin: Admin, session: Session
) -> None:
    entity = remember(as_agent, tenant, "Zorblax Ltd", kind="system")
    base = unit()
    a = remember(
        as_agent,
        tenant,
        "Zorblax Ltd ships pallets on Mondays",
        links=Jsonb([{"target_id": entity, "relation": "mentions"}]),
    )
    b = remember(
        as_agent,
        tenant,
        "Zorblax Ltd wants pallets wrapped in film",
        links=Jsonb([{"target_id": entity, "relation": "mentions"}]),
    )
    c = remember(
        as_agent,
        tenant,
        "Zorblax Ltd pallets weigh 400 kg",
        links=Jsonb([{"target_id": entity, "relation": "mentions"}]),
    )
    far = remember(
        as_agent, tenant, "Zorblax Ltd's CEO likes golf", links=Jsonb([{"target_id": entity, "relation": "mentions"}])
    )
    for m, noise in ((a, 0.5), (b, 0.5), (c, 0.5)):
        embed(admin, m, unit(base, noise))
    embed(admin, far, unit())
    link(admin, tenant, c, a)  # already related: never proposed
    agent = RelationshipDiscovery(session=session)
    results = agent.run()
    pairs = {frozenset((str(r.from_memory_id), str(r.to_memory_id))) for r in results}
    assert frozenset((a, c)) not in pairs
    assert frozenset((a, b)) in pairs and frozenset((b, c)) in pairs
    assert all(frozenset((far, x)) not in pairs for x in (a, b, c))
    for r in results:
        assert_seed_schema(r)
        assert 0 < r.strength <= 1 and r.confidence >= 0.6 and "Zorblax Ltd" in r.reasoning
        assert r.shared_entities == ["Zorblax Ltd"] and r.beads_issue_id
    applied = [r for r in results if r.confidence >= 0.7]
    for r in applied:
        edge = admin.execute(
            "select metadata from cortex.memory_edges"
            " where source_id = %s and target_id = %s and relation = 'relates_to'",
            (r.from_memory_id, r.to_memory_id),
        ).fetchone()
        assert edge is not None and edge["metadata"]["reasoning"] == r.reasoning
    assert agent.scan() == []  # recorded pairs are never proposed again


# --- runs, dry runs and the rate limit -----------------------------------------------------------------


def test_a_dry_run_of_every_agent_writes_nothing(
    duplicates: dict[str, Any], tenant: Tenant, admin: Admin, dsn: str, tmp_path: Path
) -> None:
    admin.execute(
        "update cortex.memory_nodes set created_at = now() - interval '200 days', access_count = 5,"
        " importance = 0.9 where id = %s",
        (duplicates["other"],),
    )
    before = counts(admin)
    report = service.run_agents(
        system(tenant), ["decay", "cluster", "merge", "promote", "relations"], dry_run=True, vault_dir=tmp_path
    )
    assert counts(admin) == before and list(tmp_path.iterdir()) == []
    assert report["run_id"] is None and report["agents"]["cluster"]["processed"] == 1
    assert report["agents"]["promote"]["processed"] == 1
    assert report["agents"]["cluster"]["results"][0]["beads_issue_id"] is None


def test_a_dry_run_that_tries_to_write_is_refused_with_sqlstate_25006(
    tenant: Tenant, as_agent: AsAgent, admin: Admin, dry_session: Session
) -> None:
    a = remember(as_agent, tenant, "Fact a")
    before = counts(admin)
    for name, args in (
        ("create_consolidation_item", {"agent": "decay", "memory_ids": [a], "action": "gc"}),
        ("cortex.consolidation_decay_process", {"p_ids": db.typed([a], "uuid[]"), "p_dry_run": False}),
        ("cortex.consolidation_start_run", {"p_agents": db.typed(["decay"], "text[]")}),
    ):
        with pytest.raises(CortexError) as err:
            dry_session.call(name, **args)
        assert (err.value.status, err.value.sqlstate) == (409, "25006"), name
        assert "dry run" in err.value.message or "read-only" in err.value.message
    assert counts(admin) == before
    with pytest.raises(ValueError):
        DecayAnalyzer(dry_run=False, session=dry_session)


def test_two_runs_at_once_one_is_refused_and_a_dead_runs_lease_expires(
    tenant: Tenant, session: Session, admin: Admin
) -> None:
    first = session.call("cortex.consolidation_start_run", p_agents=db.typed(["decay"], "text[]"))
    with pytest.raises(CortexError) as err:
        service.run_agents(system(tenant), ["decay"])
    assert (err.value.status, err.value.sqlstate, err.value.field) == (409, "55000", "run")
    assert "in progress" in err.value.message
    # The first run died: once its lease has expired the next run starts (and marks it abandoned).
    admin.execute("update cortex.consolidation_runs set lease_until = now() - interval '1 second'")
    report = service.run_agents(system(tenant), ["decay"])
    runs = {str(r["id"]): r["status"] for r in admin.execute("select id, status from cortex.consolidation_runs")}
    assert runs == {str(first["id"]): "abandoned", report["run_id"]: "done"}


def test_the_rate_limit_waits_for_the_next_minute(tenant: Tenant, session: Session) -> None:
    now = [600.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    local = RateLimiter(3, None, clock=lambda: now[0], sleep=sleep)
    assert [local.acquire(2), local.acquire(2)] == [2, 1]
    assert local.acquire(5) == 3 and len(slept) == 1
    shared = RateLimiter(4, session, clock=lambda: now[0], sleep=sleep)
    assert shared.acquire(3) == 3 and shared.acquire(3) == 1
    with db.as_caller(system(tenant), session.conn) as c:
        ops = c.execute("select ops from cortex.consolidation_rate").fetchone()
    assert ops == {"ops": 4}


def test_status_has_the_seeds_shape_with_the_rate_limit_remaining(
    duplicates: dict[str, Any], tenant: Tenant, session: Session
) -> None:
    ClusterDetector(session=session).run()
    result = service.status(system(tenant), rate_limit=100)
    assert set(result["agents"]) == {"decay", "cluster", "merge", "promote", "relations"}
    assert result["agents"]["cluster"] == {"pending": 1, "in_progress": 0, "blocked": 0}
    assert result["total_pending"] == 1 and result["rate_limit_remaining"] == 99
    assert list(service.status(system(tenant), "merge")["agents"]) == ["merge"]


# --- command line, HTTP and the nightly job -----------------------------------------------------------


def cli(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def test_cli_runs_all_agents_shows_status_processes_and_exits_0_1_2(
    duplicates: dict[str, Any], tenant: Tenant, dsn: str, admin: Admin
) -> None:
    report = json.loads(cli("consolidate", "--json", "run", "--all").stdout)
    assert list(report["agents"]) == ["decay", "cluster", "merge", "promote", "relations"]  # pipeline order
    assert report["agents"]["merge"]["processed"] == 1
    status = json.loads(cli("consolidate", "status", "merge", "--json").stdout)
    assert set(status) >= {"agents", "total_pending", "rate_limit_remaining"}
    assert status["rate_limit_remaining"] < 100
    assert "rate limit remaining" in cli("consolidate", "status").stdout
    merged = admin.execute("select id from cortex.consolidation_items where agent = 'cluster'").fetchone()["id"]
    shown = cli("consolidate", "--dry-run", "process", str(merged)).stdout
    assert shown.startswith("dry run: item") and "closed" in shown
    assert "unknown" not in cli("consolidate", "items", "--status", "closed").stdout
    cli("consolidate", "run", "janitor", code=2)
    cli("consolidate", "run", code=2)
    cli("consolidate", "run", "decay", "--all", code=2)
    cli("consolidate", "process", "not-a-uuid", code=2)
    missing = cli("consolidate", "process", str(uuid.uuid4()), code=1)
    assert "not found" in missing.stderr


def test_http_is_for_admins_and_names_the_bad_field(
    client: Any, tenant: Tenant, admin: Admin, duplicates: dict[str, Any]
) -> None:
    key = admin.execute("select cortex.create_agent_key(%s, 'system') as k", (tenant.id,)).fetchone()["k"]
    headers = {"Authorization": f"Bearer {key}"}
    luna = {"Authorization": f"Bearer {tenant.keys['luna']}"}
    assert client.get("/api/v1/consolidation/status", headers=luna).status_code == 403
    bad = client.get("/api/v1/consolidation/status?agent=janitor", headers=headers)
    assert bad.status_code == 422 and "agent" in json.dumps(bad.json())
    run = client.post("/api/v1/consolidation/runs", headers=headers, json={"agents": ["cluster"]})
    assert run.status_code == 200 and run.json()["agents"]["cluster"]["processed"] == 1
    both = client.post("/api/v1/consolidation/runs", headers=headers, json={"agents": ["cluster"], "all": True})
    assert both.status_code == 422
    items = client.get("/api/v1/consolidation/items", headers=headers).json()["items"]
    assert len(items) == 1 and items[0]["agent"] == "cluster"
    item_id = items[0]["id"]
    processed = client.post(f"/api/v1/consolidation/items/{item_id}/process", headers=headers)
    assert processed.status_code == 200 and processed.json()["item"]["status"] == "closed"
    undone = client.post(f"/api/v1/consolidation/items/{item_id}/undo", headers=headers, json={"reason": "test"})
    assert undone.status_code == 200 and sorted(undone.json()["restored"]) == sorted(duplicates["ids"])
    missing = client.get(f"/api/v1/consolidation/items/{uuid.uuid4()}", headers=headers)
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "item_id"


def test_the_nightly_schedule_only_enqueues_and_the_worker_runs_the_agents(
    duplicates: dict[str, Any], tenant: Tenant, admin: Admin, dsn: str
) -> None:
    assert admin.execute("select cortex.job_consolidation('2026-11-20 03:30+00') as r").fetchone()["r"] == {"queued": 1}
    assert admin.execute("select cortex.job_consolidation('2026-11-20 04:30+00') as r").fetchone()["r"] == {"queued": 0}
    assert admin.execute("select cortex.job_consolidation('2026-11-20 12:30+00') as r").fetchone()["r"] == {"queued": 0}
    job = admin.execute("select * from cortex.jobs where kind = 'consolidate'").fetchone()
    assert str(job["tenant_id"]) == tenant.id and job["payload"]["agents"][0] == "decay"
    assert admin.execute("select count(*) as n from cortex.consolidation_items").fetchone()["n"] == 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        done = jobs.consolidate(conn, tenant.id, job["payload"])
    assert done["agents"]["merge"]["processed"] == 1
