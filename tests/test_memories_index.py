"""The memory index: embeddings (the real model), de-duplication by embedding, the auto-linker and
its model check, all off the write path in the worker's sweep."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cortex import embeddings
from cortex.config import get_settings
from cortex.db import call
from cortex.memories.jobs import index_memories
from cortex.queue import worker
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import FakeAnthropic
from tests.stats_helpers import rows_read


def _insert(admin: Any, tenant: Tenant, title: str, body: str = "", **fields: Any) -> str:
    cols = {"tenant_id": tenant.id, "kind": "fact", "title": title, "body": body, "source_agent": "luna", **fields}
    names = ", ".join(cols)
    marks = ", ".join(f"%({k})s" for k in cols)
    row = admin.execute(f"insert into cortex.memory_nodes ({names}) values ({marks}) returning id", cols).fetchone()
    return str(row["id"])


def _node(admin: Any, node_id: str) -> dict[str, Any]:
    return dict(admin.execute("select * from cortex.memory_nodes where id = %s", (node_id,)).fetchone())


def _edges(admin: Any, relation: str) -> list[tuple[str, str, dict[str, Any]]]:
    rows = admin.execute(
        "select source_id::text, target_id::text, metadata from cortex.memory_edges where relation = %s", (relation,)
    ).fetchall()
    return [(r["source_id"], r["target_id"], r["metadata"]) for r in rows]


@pytest.fixture
def queue(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """The worker's autocommit owner connection."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def _drain(queue: psycopg.Connection[Any]) -> int:
    total = 0
    while n := index_memories(queue, "w1"):
        total += n
    return total


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Lets a test change the embedding settings; the real local model is back afterwards."""
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()
    embeddings.reset()


def _use(provider: pytest.MonkeyPatch, **env: str) -> None:
    for key, value in env.items():
        provider.setenv(key, value)
    get_settings.cache_clear()
    embeddings.reset()


# --- embeddings ----------------------------------------------------------------------------------


def test_the_worker_embeds_pending_nodes_with_the_real_model_in_batches(admin: Any, tenant: Tenant, queue: Any) -> None:
    a = _insert(admin, tenant, "The customer prefers email", "Never call before noon.")
    assert _node(admin, a)["embed_status"] == "pending"  # the write returned at once
    assert _drain(queue) >= 7  # the memory and the tenant's agent nodes
    node = _node(admin, a)
    assert (node["embed_status"], node["link_status"], node["index_error"]) == ("done", "done", None)
    vector = admin.execute("select embedding::real[] as v from cortex.memory_nodes where id = %s", (a,)).fetchone()["v"]
    assert len(vector) == 384 and math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-3)
    expected = embeddings.embed_texts(["The customer prefers email\nNever call before noon."])[0]
    assert max(abs(x - y) for x, y in zip(vector, expected, strict=True)) < 1e-5
    agents = admin.execute(
        "select distinct embed_status, link_status from cortex.memory_nodes where kind = 'agent'"
    ).fetchall()
    assert [(r["embed_status"], r["link_status"]) for r in agents] == [("done", "skipped")]
    assert admin.execute("select count(*) as n from cortex.jobs").fetchone()["n"] == 0  # the nodes are the queue


def test_claiming_and_storing_do_not_advance_the_graph_version(admin: Any, tenant: Tenant, queue: Any) -> None:
    a = _insert(admin, tenant, "Lids are shipped from Rotterdam")
    before = admin.execute("select cortex.graph_version(%s) as v", (tenant.id,)).fetchone()["v"]
    rows = admin.execute("select * from cortex.claim_memory_index('w1', 100, 60)").fetchall()
    assert a in {str(r["id"]) for r in rows} and all(r["attempts"] == 1 for r in rows)
    admin.execute(
        "select cortex.store_memory_embeddings(%s)",
        (json.dumps([{"tenant_id": tenant.id, "id": a, "content_hash": _node(admin, a)["content_hash"],
                      "embedding": [0.05] * 384}]),),
    )  # fmt: skip
    assert admin.execute("select cortex.graph_version(%s) as v", (tenant.id,)).fetchone()["v"] == before
    assert _node(admin, a)["embed_status"] == "done"


def test_content_changed_during_embedding_stays_pending(admin: Any, tenant: Tenant, queue: Any) -> None:
    a = _insert(admin, tenant, "The warehouse opens at 8")
    claimed = {str(r["id"]): r for r in admin.execute("select * from cortex.claim_memory_index('w1', 100, 600)")}
    old_hash = claimed[a]["content_hash"]
    admin.execute("update cortex.memory_nodes set title = 'The warehouse opens at 9' where id = %s", (a,))
    out = admin.execute(
        "select cortex.store_memory_embeddings(%s) as r",
        (json.dumps([{"tenant_id": tenant.id, "id": a, "content_hash": old_hash, "embedding": [0.05] * 384}]),),
    ).fetchone()["r"]
    assert (out["stored"], out["stale"]) == (0, [a])
    node = _node(admin, a)
    # Not stored, and back in the queue at once (lease released) for the new content.
    assert (node["embed_status"], node["embedding"], node["index_locked_until"]) == ("pending", None, None)
    _drain(queue)
    node = _node(admin, a)
    assert node["embed_status"] == "done"
    vector = admin.execute("select embedding::real[] as v from cortex.memory_nodes where id = %s", (a,)).fetchone()["v"]
    expected = embeddings.embed_texts(["The warehouse opens at 9\n"])[0]
    assert max(abs(x - y) for x, y in zip(vector, expected, strict=True)) < 1e-5


def test_failures_are_retried_with_backoff_then_parked_with_an_alert_and_reindex_sends_them_back(
    admin: Any, tenant: Tenant, queue: Any, provider: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    a = _insert(admin, tenant, "A memory the broken model cannot embed")
    _use(provider, CORTEX_EMBEDDING_MODEL=str(tmp_path / "no-such-model"))
    assert index_memories(queue, "w1") > 0
    node = _node(admin, a)
    assert node["embed_status"] == "pending" and node["index_attempts"] == 1
    assert "no such folder" in node["index_error"]
    assert index_memories(queue, "w1") == 0  # waiting out its backoff
    for attempt in range(2, 6):
        admin.execute("update cortex.memory_nodes set index_locked_until = null where tenant_id = %s", (tenant.id,))
        index_memories(queue, "w1")
        assert _node(admin, a)["index_attempts"] == attempt
    node = _node(admin, a)
    assert (node["embed_status"], node["link_status"]) == ("failed", "failed")
    alert = admin.execute(
        "select * from cortex.alerts where tenant_id = %s and kind = 'memory_index_parked'", (tenant.id,)
    ).fetchone()
    assert a in alert["details"]["node_ids"] and "no such folder" in alert["details"]["error"]
    assert index_memories(queue, "w1") == 0  # parked nodes are never claimed

    provider.undo()  # the model is back
    get_settings.cache_clear()
    embeddings.reset()
    n = admin.execute("select cortex.reindex_memories(%s) as n", (tenant.id,)).fetchone()["n"]
    assert n >= 1
    _drain(queue)
    node = _node(admin, a)
    assert (node["embed_status"], node["link_status"], node["index_error"]) == ("done", "done", None)


def test_provider_none_skips_embeddings_links_names_and_text_search_still_works(
    admin: Any, tenant: Tenant, queue: Any, contact: dict[str, Any], as_agent: AsAgent, provider: pytest.MonkeyPatch
) -> None:
    _use(provider, CORTEX_EMBEDDINGS="none")
    a = _insert(admin, tenant, "John Smith wants invoices in euros")
    _drain(queue)
    node = _node(admin, a)
    assert (node["embed_status"], node["link_status"], node["embedding"]) == ("skipped", "done", None)
    mentioned = {t for s, t, _ in _edges(admin, "mentions") if s == a}
    contact_node = admin.execute(
        "select id::text from cortex.memory_nodes where ref_kind = 'contact' and ref_id = %s", (contact["id"],)
    ).fetchone()["id"]
    assert mentioned == {contact_node}
    with as_agent(tenant, "mia") as conn:
        found = call(conn, "search_memories", query="invoices euros")
    assert [r["memory"]["id"] for r in found["results"]] == [a]
    assert found["used"] == {"text": True, "text_mode": "candidates", "vector": False, "graph": False}


def test_inserting_nodes_wakes_the_worker_with_an_empty_signal(dsn: str, admin: Any, tenant: Tenant) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("listen cortex_jobs")
        _insert(admin, tenant, "Wake up")
        got = list(listener.notifies(timeout=5, stop_after=1))
    assert [n.payload for n in got] == [""]


def test_the_sweep_loop_beside_the_job_loop_indexes_what_is_pending(admin: Any, tenant: Tenant) -> None:
    a = _insert(admin, tenant, "Indexed by the worker's sweep loop")
    assert worker.run("solo", once=True) == 0  # the job loop does not wait for embeddings
    assert _node(admin, a)["link_status"] == "pending"
    assert "memory_index" in worker.SWEEPS
    assert worker.run_sweep_loop("solo", once=True) >= 7  # the memory and the agents' nodes
    assert _node(admin, a)["link_status"] == "done"


def test_a_stopping_sweep_loop_ends_between_batches(admin: Any, tenant: Tenant) -> None:
    _insert(admin, tenant, "Left for the next worker")
    stop = threading.Event()
    stop.set()
    thread = worker.start_sweeps_in_background(stop, "stopping")
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert admin.execute("select count(*) as n from cortex.memory_nodes where embed_status = 'pending'").fetchone()["n"]


# --- de-duplication and links ---------------------------------------------------------------------


def test_an_embedded_near_duplicate_is_archived_into_the_older_node(admin: Any, tenant: Tenant, queue: Any) -> None:
    admin.execute("update cortex.memory_settings set dedup_cosine = 0.85 where tenant_id = %s", (tenant.id,))
    older = _insert(admin, tenant, "The customer prefers to be contacted by email", tags=["contact"], importance=0.5)
    _drain(queue)
    newer = _insert(admin, tenant, "The customer prefers being contacted by email", tags=["channel"])
    other_kind = _insert(admin, tenant, "The customer prefers being contacted by email.", kind="preference")
    _drain(queue)
    o, n = _node(admin, older), _node(admin, newer)
    assert (o["status"], n["status"]) == ("active", "archived")
    assert n["metadata"]["duplicate_of"] == older and n["metadata"]["duplicate_similarity"] >= 0.85
    assert math.isclose(o["importance"], 0.55, rel_tol=1e-6) and o["tags"] == ["channel", "contact"]
    assert [(s, t) for s, t, _ in _edges(admin, "consolidated_from")] == [(older, newer)]
    assert _node(admin, other_kind)["status"] == "active"  # another kind is not a copy


def test_an_embedded_near_duplicate_about_a_contact_is_folded_only_into_that_contacts_memory(
    admin: Any, tenant: Tenant, queue: Any, contact: dict[str, Any]
) -> None:
    admin.execute("update cortex.memory_settings set dedup_cosine = 0.85 where tenant_id = %s", (tenant.id,))
    about = _insert(admin, tenant, "Prefers to be contacted by email", contact_id=contact["id"])
    unrelated = _insert(admin, tenant, "Prefers to be contacted by email.")  # no contact: not a copy source
    _drain(queue)
    newer = _insert(admin, tenant, "Prefers being contacted by email", contact_id=contact["id"])
    _drain(queue)
    assert _node(admin, newer)["metadata"]["duplicate_of"] == about
    assert _node(admin, unrelated)["status"] == "active"


@pytest.mark.slow  # 20,000 vectors into the HNSW index: about a minute
def test_the_embedding_copy_probe_reads_a_few_rows_however_many_memories_pass_its_filters(
    admin: Any, tenant: Tenant, queue: Any
) -> None:
    # 20,000 embedded facts without a contact, like the new one. The planner could not tell how many
    # had no contact, and sorted every fact of the tenant by distance (300-500 ms a node at 1M nodes).
    admin.execute(
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent, embedding, embed_status,"
        " link_status, created_at) "
        "select %s, 'fact', 'routine note ' || g, '', 'luna',"
        " (select array_agg(random() - 0.5)::extensions.vector(384) from generate_series(1, 384) d where g > 0),"
        " 'done', 'done', now() - interval '1 day' from generate_series(1, 20000) g",
        (tenant.id,),
    )
    admin.execute("analyze cortex.memory_nodes")
    newer = _insert(admin, tenant, "The customer prefers to be contacted by email")
    _drain(queue)
    with admin.transaction():
        admin.execute("select cortex.dedup_memory_embeddings(%s, %s::uuid[])", (tenant.id, [newer]))
        read = rows_read(admin, "cortex.memory_nodes")
    assert _node(admin, newer)["status"] == "active"
    assert read < 1000, read


def test_similar_memories_with_other_numbers_are_flagged_as_contradictions_not_merged(
    admin: Any, tenant: Tenant, queue: Any
) -> None:
    admin.execute("update cortex.memory_settings set dedup_cosine = 0.85 where tenant_id = %s", (tenant.id,))
    older = _insert(admin, tenant, "The refund limit is 500 dollars per order")
    _drain(queue)
    newer = _insert(admin, tenant, "The refund limit is 800 dollars per order")
    _drain(queue)
    assert _node(admin, newer)["status"] == "active"
    contradicts = _edges(admin, "contradicts")
    assert [(s, t) for s, t, _ in contradicts] == [(newer, older)]
    assert "different numbers" in contradicts[0][2]["reason"]
    n, o = _node(admin, newer), _node(admin, older)
    assert n["needs_review"] and older in n["review_reason"] and not o["needs_review"]


def test_auto_link_relates_similar_memories_mentions_entities_and_flags_negations(
    admin: Any, tenant: Tenant, queue: Any, contact: dict[str, Any]
) -> None:
    a = _insert(admin, tenant, "John Smith likes phone calls in the morning")
    _drain(queue)
    b = _insert(admin, tenant, "John Smith prefers morning phone calls", kind="preference")
    c = _insert(admin, tenant, "Luna handles the Acme renewal", body="Mia reviews it.")
    d = _insert(admin, tenant, "John Smith does not like phone calls in the morning")
    _drain(queue)
    relates = {(s, t) for s, t, _ in _edges(admin, "relates_to")}
    assert (b, a) in relates and (a, b) not in relates  # newer -> older, one direction
    assert all(meta["similarity"] >= 0.6 for _, _, meta in _edges(admin, "relates_to"))
    names = {
        r["id"]: r["ref_id"]
        for r in admin.execute("select id::text, ref_id from cortex.memory_nodes where kind in ('agent', 'contact')")
    }
    mentions: dict[str, set[str]] = {}
    for s, t, _ in _edges(admin, "mentions"):
        mentions.setdefault(s, set()).add(names.get(t, t))
    assert mentions[a] == {contact["id"]} and mentions[b] == {contact["id"]}
    assert mentions[c] == {"luna", "mia"}
    assert (d, a) in {(s, t) for s, t, _ in _edges(admin, "contradicts")}
    assert _node(admin, d)["needs_review"] and "opposite negation" in _node(admin, d)["review_reason"]


def test_a_private_memory_is_linked_only_within_its_agents_scope(admin: Any, tenant: Tenant, queue: Any) -> None:
    mine = _insert(admin, tenant, "The pricing sheet lives in the shared drive", visibility="private")
    _drain(queue)
    theirs = _insert(admin, tenant, "The pricing sheet lives in the shared drive folder", visibility="private",
                     source_agent="mia")  # fmt: skip
    _drain(queue)
    joined = {(s, t) for s, t, _ in _edges(admin, "relates_to")}
    assert (theirs, mine) not in joined and (mine, theirs) not in joined
    assert _node(admin, theirs)["link_status"] == "done"


# --- the model check --------------------------------------------------------------------------------


def _verdicts(answer: dict[str, Any]) -> Any:
    def reply(request: dict[str, Any]) -> str:
        return json.dumps(answer)

    return reply


def test_the_model_confirms_contradictions_through_the_gateway_with_usage_recorded(
    admin: Any, tenant: Tenant, queue: Any, claude: FakeAnthropic
) -> None:
    claude.reply = _verdicts({"verdicts": [{"pair": 0, "contradicts": True, "reason": "500 vs 800"},
                                           {"pair": 7, "contradicts": True, "reason": "no such pair"}]})  # fmt: skip
    older = _insert(admin, tenant, "The refund limit is 500 dollars per order")
    _drain(queue)
    assert claude.requests == []  # a lone memory has no pair to ask about
    newer = _insert(admin, tenant, "The refund limit is 800 dollars per order")
    _drain(queue)
    assert len(claude.requests) == 1
    request = claude.requests[0]
    assert request["model"] == get_settings().summary_model
    assert "Pair 0 (flagged: different numbers" in request["messages"][0]["content"]
    edges = _edges(admin, "contradicts")
    assert [(s, t) for s, t, _ in edges] == [(newer, older)]  # the out-of-range verdict was ignored
    assert edges[0][2]["model_verdict"] == "confirmed" and edges[0][2]["by"] == "auto_linker"
    usage = admin.execute(
        "select agent, model, operation, input_tokens, output_tokens from cortex.token_usage where tenant_id = %s",
        (tenant.id,),
    ).fetchall()
    assert [(u["agent"], u["operation"]) for u in usage] == [("system", "contradiction_check")]
    assert usage[0]["input_tokens"] > 0 and usage[0]["model"] == get_settings().summary_model
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0


def test_a_rejection_by_the_model_removes_nothing_and_an_off_schema_answer_changes_nothing(
    admin: Any, tenant: Tenant, queue: Any, claude: FakeAnthropic
) -> None:
    claude.reply = _verdicts({"verdicts": [{"pair": 0, "contradicts": False, "reason": "different products"}]})
    older = _insert(admin, tenant, "The refund limit is 500 dollars per order")
    _drain(queue)
    newer = _insert(admin, tenant, "The refund limit is 800 dollars per order")
    _drain(queue)
    edges = _edges(admin, "contradicts")
    assert [(s, t) for s, t, _ in edges] == [(newer, older)] and edges[0][2]["model_verdict"] == "rejected"
    assert _node(admin, newer)["needs_review"]

    claude.reply = _verdicts({"verdicts": [{"pair": "first", "contradicts": "maybe"}]})
    third = _insert(admin, tenant, "The refund limit is 900 dollars per order")
    _drain(queue)
    assert {s for s, _, _ in _edges(admin, "contradicts")} == {newer, third}  # the heuristic's, nothing more
    failed = admin.execute(
        "select metadata from cortex.token_usage where operation = 'contradiction_check' order by created_at"
    ).fetchall()
    assert len(failed) == 2 and "schema" in failed[1]["metadata"]["error"]


def test_the_model_check_respects_the_budget(admin: Any, tenant: Tenant, queue: Any, claude: FakeAnthropic) -> None:
    admin.execute(
        "update cortex.agent_config set daily_token_budget = 1 where tenant_id = %s and agent = 'system'", (tenant.id,)
    )
    older = _insert(admin, tenant, "The refund limit is 500 dollars per order")
    _drain(queue)
    newer = _insert(admin, tenant, "The refund limit is 800 dollars per order")
    _drain(queue)
    assert claude.requests == []  # over budget: no model call
    assert [(s, t) for s, t, _ in _edges(admin, "contradicts")] == [(newer, older)]  # the heuristic still ran
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone()["n"] == 0
    assert (
        admin.execute(
            "select count(*) as n from cortex.token_usage where operation = 'contradiction_check'"
        ).fetchone()["n"]
        == 0
    )


def test_a_node_superseded_before_the_linker_reaches_it_is_skipped_and_released(
    admin: Any, tenant: Tenant, queue: Any
) -> None:
    old = _insert(admin, tenant, "The office is in Berlin", key="office")
    # Superseded before the worker saw it (as remember with the same key does in one transaction).
    admin.execute("update cortex.memory_nodes set status = 'superseded', key = null where id = %s", (old,))
    new = _insert(admin, tenant, "The office is in Munich", key="office")
    archived = _insert(admin, tenant, "A note archived at once")
    admin.execute("update cortex.memory_nodes set status = 'archived' where id = %s", (archived,))
    assert _drain(queue) >= 3
    for node_id in (old, archived):
        n = _node(admin, node_id)
        # Embedded (for "as of" search), not linked, the lease released: never claimed again.
        assert (n["embed_status"], n["link_status"], n["index_locked_until"]) == ("done", "skipped", None)
    assert _node(admin, new)["link_status"] == "done"
    pending = admin.execute(
        "select count(*) as n from cortex.memory_nodes where embed_status = 'pending' or link_status = 'pending'"
    ).fetchone()["n"]
    assert pending == 0
    # Even with every lease expired, the sweep stays idle.
    admin.execute("update cortex.memory_nodes set index_locked_until = now() - interval '1 hour'")
    assert index_memories(queue, "w1") == 0
