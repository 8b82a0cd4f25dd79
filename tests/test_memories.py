"""Memories (issue 13): remember, get, list, update, supersede and forget, on the PostgREST path
(`as_agent`: the SQL functions under RLS) and over HTTP (`client`). De-duplication on write (exact,
then trigram guarded by numbers and negation), key slots superseded in one transaction (also under
concurrent writers), "as of" reads, private memories, and every bad input naming its field with
nothing half-written."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from cortex.db import agent_claims, as_caller, call
from cortex.errors import CortexError
from cortex.memories.models import MemoryList, MemorySuperseded, MemoryWithEdges, MemoryWritten
from cortex.memories.service import sql_args
from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import AsAgent, Tenant
from tests.stats_helpers import rows_read

V1 = "/api/v1"
Admin = psycopg.Connection[dict[str, Any]]


def remember(conn: Any, title: str, kind: str = "fact", **fields: Any) -> dict[str, Any]:
    result: dict[str, Any] = call(conn, "remember", **sql_args({"kind": kind, "title": title, **fields}))
    return result


def write(as_agent: AsAgent, tenant: Tenant, title: str, agent: str = "luna", **fields: Any) -> dict[str, Any]:
    with as_agent(tenant, agent) as conn:
        return remember(conn, title, **fields)


def fail(as_agent: AsAgent, tenant: Tenant, function: str, caller: str = "luna", **args: Any) -> CortexError:
    with pytest.raises(CortexError) as err, as_agent(tenant, caller) as conn:
        call(conn, function, **sql_args(args))
    return err.value


def counts(admin: Admin) -> dict[str, Any]:
    row = admin.execute(
        """select (select count(*) from cortex.memory_nodes) as nodes,
                  (select count(*) from cortex.memory_edges) as edges,
                  (select string_agg(id::text || status || importance::text || coalesce(key, ''), ',' order by id)
                   from cortex.memory_nodes) as state"""
    ).fetchone()
    assert row is not None
    return dict(row)


def node(admin: Admin, node_id: str) -> dict[str, Any]:
    row = admin.execute("select * from cortex.memory_nodes where id = %s", (node_id,)).fetchone()
    assert row is not None
    return dict(row)


def entity(admin: Admin, ref_kind: str, ref_id: str) -> str:
    row = admin.execute(
        "select id::text from cortex.memory_nodes where ref_kind = %s and ref_id = %s", (ref_kind, ref_id)
    ).fetchone()
    assert row is not None
    return str(row["id"])


def db_now(admin: Admin) -> datetime:
    row = admin.execute("select clock_timestamp() as t").fetchone()
    assert row is not None
    value: datetime = row["t"]
    return value


# --- remember -------------------------------------------------------------------------------------


def test_remember_creates_a_memory_owned_by_the_caller(
    as_agent: AsAgent, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    result = write(
        as_agent, tenant, "  John prefers email  ", body="Never before 9 am.", importance=0.7, confidence=0.9,
        tags=["Channel", " prefs "], contact_id=contact["id"], metadata={"source": "call"}, permanent=True,
    )  # fmt: skip
    assert (result["created"], result["deduplicated"], result["superseded"], result["links"]) == (True, None, [], [])
    memory = result["memory"]
    assert memory["title"] == "John prefers email" and memory["body"] == "Never before 9 am."
    assert (memory["kind"], memory["source_agent"], memory["visibility"], memory["status"]) == (
        "fact", "luna", "shared", "active",
    )  # fmt: skip
    assert memory["tags"] == ["channel", "prefs"] and memory["contact_id"] == contact["id"]
    assert (memory["importance"], memory["confidence"], memory["permanent"]) == (0.7, 0.9, True)
    assert memory["metadata"] == {"source": "call"} and memory["embed_status"] == "pending"
    assert node(admin, memory["id"])["tenant_id"] == uuid.UUID(tenant.id)


def test_people_and_systems_may_be_written_but_agents_and_contacts_are_mirrored(
    as_agent: AsAgent, tenant: Tenant
) -> None:
    assert write(as_agent, tenant, "Dr. Jones", kind="person")["memory"]["kind"] == "person"
    assert write(as_agent, tenant, "Stripe", kind="system")["memory"]["kind"] == "system"
    for kind in ("agent", "contact", "bogus", "Fact"):
        err = fail(as_agent, tenant, "remember", kind=kind, title="x")
        assert (err.status, err.field) == (422, "kind"), kind


def test_the_content_hash_helper_equals_the_generated_column(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    write(as_agent, tenant, "Tabs\tand  spaces", body=" Mixed CASE\n body ")
    write(as_agent, tenant, "Ünïcödé title", body="")
    rows = admin.execute(
        "select count(*) filter (where content_hash <> cortex.memory_content_hash(title, body)) as bad, count(*) as n "
        "from cortex.memory_nodes where ref_kind is null"
    ).fetchone()
    assert rows is not None and rows["n"] == 2 and rows["bad"] == 0


# --- de-duplication -----------------------------------------------------------------------------


def test_an_exact_duplicate_reinforces_the_existing_memory(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    first = write(as_agent, tenant, "Refunds above 500 EUR need approval", importance=0.6, confidence=0.7, tags=["a"])
    again = write(
        as_agent, tenant, "refunds  above 500 eur NEED approval", agent="mia", importance=0.4, confidence=0.9,
        tags=["b"],
    )  # fmt: skip
    assert (again["created"], again["deduplicated"]) == (False, "exact")
    assert again["memory"]["id"] == first["memory"]["id"]
    memory = again["memory"]
    assert memory["importance"] == pytest.approx(0.65) and memory["confidence"] == pytest.approx(0.9)
    assert memory["tags"] == ["a", "b"] and memory["source_agent"] == "luna"
    assert admin.execute("select count(*) as n from cortex.memory_nodes where kind = 'fact'").fetchone()["n"] == 1
    access = admin.execute("select node_id::text, agent from cortex.memory_access").fetchall()
    assert access == [{"node_id": memory["id"], "agent": "mia"}]
    # Importance is capped at 1.
    for _ in range(3):
        write(as_agent, tenant, "Refunds above 500 EUR need approval", importance=0.99)
    assert node(admin, memory["id"])["importance"] == 1


def test_a_near_duplicate_is_found_by_trigram_similarity(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    first = write(as_agent, tenant, "Refunds above 500 EUR need manager approval", body="Policy since March.")
    near = write(as_agent, tenant, "Refunds above 500 EUR need manager approval!", body="Policy since March")
    assert (near["created"], near["deduplicated"]) == (False, "trigram")
    assert near["memory"]["id"] == first["memory"]["id"]
    assert near["memory"]["title"] == "Refunds above 500 EUR need manager approval"
    assert near["memory"]["importance"] == pytest.approx(0.55)
    far = write(as_agent, tenant, "Refunds above 500 EUR go to the finance team")
    assert far["created"] is True


def test_different_numbers_or_negation_are_never_near_duplicates(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    # A loose threshold, so that only the guards tell these apart.
    admin.execute("update cortex.memory_settings set dedup_trigram = 0.5 where tenant_id = %s", (tenant.id,))
    base = write(as_agent, tenant, "Refunds above 500 EUR need approval")["memory"]["id"]
    assert write(as_agent, tenant, "Refunds above 500 EUR need an approval")["memory"]["id"] == base  # control
    assert write(as_agent, tenant, "Refunds above 5000 EUR need approval")["created"] is True
    assert write(as_agent, tenant, "Refunds above 500 EUR do not need approval")["created"] is True
    calls = write(as_agent, tenant, "John wants phone calls in the morning")["memory"]["id"]
    assert write(as_agent, tenant, "John wants phone calls in the mornings")["memory"]["id"] == calls  # control
    for negated in (
        "John does not want phone calls in the morning",
        "John doesn't want phone calls in the morning",
        "John never wants phone calls in the morning",
        "John wants no phone calls in the morning",
    ):
        assert write(as_agent, tenant, negated)["memory"]["id"] != calls, negated
    assert write(as_agent, tenant, "John wants phone calls in the morning!")["memory"]["id"] == calls


def test_duplicates_are_per_kind_and_per_scope(as_agent: AsAgent, tenant: Tenant) -> None:
    shared = write(as_agent, tenant, "Ship on Fridays")["memory"]["id"]
    assert write(as_agent, tenant, "Ship on Fridays", kind="decision")["created"] is True
    private = write(as_agent, tenant, "Ship on Fridays", visibility="private")
    assert private["created"] is True and private["memory"]["id"] != shared
    assert write(as_agent, tenant, "Ship on Fridays", visibility="private")["memory"]["id"] == private["memory"]["id"]
    # Another agent's private memory is not in mia's scope.
    assert write(as_agent, tenant, "Ship on Fridays", agent="mia", visibility="private")["created"] is True


def test_near_duplicates_are_looked_up_by_their_rarest_words_through_the_full_text_index(
    admin: Admin, tenant: Tenant, as_agent: AsAgent
) -> None:
    # A tenant with many nodes sharing the common words (for a few hundred, scanning them is
    # cheaper, and the planner does that). Triggers off for speed.
    admin.execute("set session_replication_role = replica")
    admin.execute(
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, fts) "
        "select %s, 'fact', 'customer note ' || g, 'the customer called about the invoice', "
        "to_tsvector('english', 'customer note ' || g || ' the customer called about the invoice') "
        "from generate_series(1, 20000) g",
        (tenant.id,),
    )
    admin.execute("reset session_replication_role")
    admin.execute("vacuum analyze cortex.memory_nodes")  # flushes the GIN pending list too
    admin.execute("select cortex.refresh_memory_lexicon(%s)", (tenant.id,))
    with as_agent(tenant, "luna") as conn:
        rare = conn.execute(
            "select string_agg(cortex.tsquery_quote(l), ' | ') "
            "from unnest(cortex.memory_rare_lexemes(%s, 'english', %s, 8, 500)) l",
            (tenant.id, "The customer called about the invoice for the Zanzibar warehouse"),
        ).fetchone()[0]
    # The common words (in 20,000 memories each) are left out: only what is rare picks candidates.
    assert rare == "'warehous' | 'zanzibar'"
    plan = admin.execute(
        "explain select n.id from cortex.memory_nodes n where n.tenant_id = %s "
        "and n.fts @@ %s::tsquery and n.status = 'active' and n.ref_kind is null",
        (tenant.id, rare),
    ).fetchall()
    assert "memory_nodes_fts" in " ".join(r["QUERY PLAN"] for r in plan)


def test_a_restatement_with_a_typo_is_still_a_near_duplicate(as_agent: AsAgent, tenant: Tenant) -> None:
    first = write(as_agent, tenant, "Maria Lopez prefers to be called in the morning before her team standup")
    again = write(as_agent, tenant, "Maria Lopez prefers to be caled in the morning before her team standup")
    assert again["created"] is False and again["deduplicated"] == "trigram"
    assert again["memory"]["id"] == first["memory"]["id"]


def similarity_calls_of(dsn: str, tenant: Tenant, title: str, body: str = "") -> tuple[dict[str, Any], int]:
    """luna's remember(title, body), and how many times it ran pg_trgm's similarity (function call
    counts of its transaction)."""
    count = "select coalesce(sum(calls), 0) from pg_stat_xact_user_functions where funcname = 'similarity'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set track_functions = 'all'")
        with as_caller(agent_claims(tenant.id, "luna"), conn) as c:
            written = remember(c, title, body=body)
            row = c.execute(count).fetchone()
    assert row is not None
    return written, int(row[0])


def test_a_near_duplicate_probe_compares_at_most_50_memories_however_many_share_its_words(
    as_agent: AsAgent, tenant: Tenant, admin: Admin, dsn: str
) -> None:
    # 300 memories holding every word of the new one but one, of about its length: before the bound,
    # each was compared (a burst of similar texts made every write compare thousands).
    words = [f"q{chr(97 + i // 26)}{chr(97 + i % 26)}z" for i in range(300)]
    admin.execute(
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "select %s, 'fact', 'Maria Lopez is moving to a new warehouse in Rotterdam', 'Said on the call: ' || w, 'luna' "
        "from unnest(%s::text[]) w",
        (tenant.id, words),
    )
    original = write(as_agent, tenant, "Maria Lopez is moving to a new warehouse in Rotterdam",
                     body="Said on the call: soon")["memory"]["id"]  # fmt: skip
    again, compared = similarity_calls_of(
        dsn, tenant, "Maria Lopez is moving to a new warehouse in Rotterdam", "Said on the call: soon!"
    )
    assert again["deduplicated"] == "trigram" and again["memory"]["id"] == original
    # Each compared memory costs two calls (the test, then the order of those that pass it).
    assert 0 < compared <= 2 * 50, compared


def test_memories_sharing_only_one_word_with_a_new_one_are_never_read_by_its_near_duplicate_probe(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    # A word not yet counted and in a thousand recent memories (a new customer's name): the probe
    # asks the index for two shared words, so none of the thousand is read.
    words = [f"q{chr(97 + i // 26 % 26)}{chr(97 + i % 26)}{chr(97 + i // 676)}z" for i in range(1000)]
    admin.execute(
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "select %s, 'fact', 'Zanzibar ' || w, '', 'luna' from unnest(%s::text[]) w",
        (tenant.id, words),
    )
    # And a tenant big enough that a planner reads a few rows through the index rather than all.
    admin.execute(
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "select %s, 'fact', 'routine note number ' || g, repeat('routine ', 100), 'luna' "
        "from generate_series(1, 20000) g",
        (tenant.id,),
    )
    admin.execute("analyze cortex.memory_nodes")
    first = write(as_agent, tenant, "Zanzibar warehouse opens in spring")["memory"]["id"]
    with as_agent(tenant, "luna") as conn:
        before = rows_read(conn, "cortex.memory_nodes")
        again = remember(conn, "Zanzibar warehouse opens in spring!")
        read = rows_read(conn, "cortex.memory_nodes") - before
    assert again["deduplicated"] == "trigram" and again["memory"]["id"] == first
    assert read < 20, read


def test_memories_with_other_numbers_are_never_compared_by_the_near_duplicate_probe(
    tenant: Tenant, admin: Admin, dsn: str
) -> None:
    # A thousand siblings of a templated event, each with its own order number: the index tells them
    # apart, so similarity never runs.
    admin.execute(
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "select %s, 'fact', 'Order ' || g || ' shipped to Rotterdam', 'Carrier DHL, two parcels', 'luna' "
        "from generate_series(1000, 1999) g",
        (tenant.id,),
    )
    written, compared = similarity_calls_of(dsn, tenant, "Order 2001 shipped to Rotterdam", "Carrier DHL, two parcels")
    assert written["created"] is True and compared == 0
    again, compared = similarity_calls_of(dsn, tenant, "Order 1500 shipped to Rotterdam!", "Carrier DHL, two parcels")
    assert again["deduplicated"] == "trigram" and compared >= 1
    assert again["memory"]["title"] == "Order 1500 shipped to Rotterdam"


def test_concurrent_writers_of_one_memory_make_one_node(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    barrier = threading.Barrier(2)
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def writer(agent: str) -> None:
        try:
            for i in range(5):
                barrier.wait(timeout=10)
                results.append(write(as_agent, tenant, f"Warehouse {i} closes at noon", agent=agent))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(a,)) for a in ("luna", "mia")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(r["created"] for r in results) == [False] * 5 + [True] * 5
    n = admin.execute("select count(*) as n from cortex.memory_nodes where title like 'Warehouse%%'").fetchone()["n"]
    assert n == 5


# --- key slots and supersession -------------------------------------------------------------


def test_a_key_slot_write_supersedes_the_holder_in_one_transaction(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    old = write(as_agent, tenant, "John's phone is +1 555 0100", key="contact:john:phone")["memory"]
    new = write(as_agent, tenant, "John's phone is +1 555 0199", key="contact:john:phone", agent="mia")
    assert new["created"] is True and new["superseded"] == [old["id"]]
    was = node(admin, old["id"])
    now = node(admin, new["memory"]["id"])
    assert (was["status"], was["valid_to"]) == ("superseded", now["valid_from"])
    assert (now["status"], now["key"]) == ("active", "contact:john:phone")
    edge = admin.execute(
        "select relation, weight, created_by from cortex.memory_edges where source_id = %s and target_id = %s",
        (now["id"], was["id"]),
    ).fetchone()
    assert edge == {"relation": "supersedes", "weight": 1, "created_by": "mia"}
    # The same content again is a duplicate of the holder, not a new version.
    again = write(as_agent, tenant, "John's phone is +1 555 0199", key="contact:john:phone")
    assert (again["deduplicated"], again["superseded"]) == ("exact", [])
    # Slots are per scope: a private slot of the same key leaves the shared one alone.
    mine = write(as_agent, tenant, "My note on John's phone", key="contact:john:phone", visibility="private")
    assert mine["superseded"] == [] and node(admin, now["id"])["status"] == "active"


def test_a_duplicate_without_a_key_takes_the_slot_from_its_holder(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    holder = write(as_agent, tenant, "Office is in Berlin", key="office")["memory"]["id"]
    loose = write(as_agent, tenant, "Office is in Munich")["memory"]["id"]
    result = write(as_agent, tenant, "Office is in Munich", key="office")
    assert (result["memory"]["id"], result["deduplicated"], result["superseded"]) == (loose, "exact", [holder])
    assert node(admin, loose)["key"] == "office" and node(admin, holder)["status"] == "superseded"
    # A memory already in another slot is refused rather than moved.
    err = fail(as_agent, tenant, "remember", kind="fact", title="Office is in Munich", key="hq")
    assert (err.status, err.field) == (409, "key")


def test_concurrent_key_slot_writers_leave_exactly_one_active_node(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(agent: str) -> None:
        try:
            for i in range(6):
                barrier.wait(timeout=10)
                write(as_agent, tenant, f"Shipping cutoff set by {agent} round {i}", key="policy:cutoff", agent=agent)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(a,)) for a in ("luna", "mia")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = admin.execute("select id, status from cortex.memory_nodes where key = 'policy:cutoff'").fetchall()
    assert len(rows) == 12
    assert [r["status"] for r in rows].count("active") == 1
    # Every superseded version has exactly one successor, and the chain has no gaps.
    edges = admin.execute(
        "select target_id, count(*) as n from cortex.memory_edges where relation = 'supersedes' group by 1"
    ).fetchall()
    assert len(edges) == 11 and all(e["n"] == 1 for e in edges)


def test_as_of_returns_the_old_value_before_the_supersession_and_the_new_one_after(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    old = write(as_agent, tenant, "Plan is Basic", key="acme:plan")["memory"]["id"]
    between = db_now(admin)
    new = write(as_agent, tenant, "Plan is Premium", key="acme:plan")["memory"]["id"]
    after = db_now(admin)
    with as_agent(tenant, "luna") as conn:
        before_ids = [m["id"] for m in call(conn, "list_memories", as_of=between, kinds=["fact"])["items"]]
        after_ids = [m["id"] for m in call(conn, "list_memories", as_of=after, kinds=["fact"])["items"]]
        now_ids = [m["id"] for m in call(conn, "list_memories", kinds=["fact"])["items"]]
        assert call(conn, "get_memory", memory_id=old, as_of=between)["title"] == "Plan is Basic"
        assert call(conn, "get_memory", memory_id=new, as_of=after)["title"] == "Plan is Premium"
    assert (before_ids, after_ids, now_ids) == ([old], [new], [new])
    err = fail(as_agent, tenant, "get_memory", memory_id=old, as_of=after)
    assert (err.status, err.field) == (404, "memory_id")
    err = fail(as_agent, tenant, "get_memory", memory_id=new, as_of=between)
    assert err.status == 404
    # Both remain readable without as_of, and listable with include_superseded.
    with as_agent(tenant, "luna") as conn:
        assert call(conn, "get_memory", memory_id=old)["status"] == "superseded"
        listed = call(conn, "list_memories", kinds=["fact"], include_superseded=True)["items"]
    assert [m["id"] for m in listed] == [new, old]


def test_supersede_memory_keeps_the_old_ones_fields_unless_given(
    as_agent: AsAgent, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    old = write(
        as_agent, tenant, "Lid supplier is Acme", kind="decision", body="Chosen for price.", key="supplier:lids",
        contact_id=contact["id"], tags=["supply"], visibility="private",
    )["memory"]  # fmt: skip
    with as_agent(tenant, "luna") as conn:
        result = call(conn, "supersede_memory", memory_id=old["id"], title="Lid supplier is Globex")
    new, was = result["memory"], result["superseded"]
    assert (new["kind"], new["body"], new["key"], new["contact_id"], new["visibility"], new["tags"]) == (
        "decision", "Chosen for price.", "supplier:lids", contact["id"], "private", ["supply"],
    )  # fmt: skip
    assert (was["id"], was["status"], was["valid_to"]) == (old["id"], "superseded", new["valid_from"])
    assert (
        admin.execute(
            "select count(*) as n from cortex.memory_edges "
            "where source_id = %s and target_id = %s and relation = 'supersedes'",
            (new["id"], old["id"]),
        ).fetchone()["n"]
        == 1
    )
    # Given fields win.
    with as_agent(tenant, "luna") as conn:
        newer = call(conn, "supersede_memory", memory_id=new["id"], title="Lid supplier is Initech", body="",
                     tags=["x"], kind="fact")["memory"]  # fmt: skip
    assert (newer["kind"], newer["body"], newer["tags"], newer["key"]) == ("fact", "", ["x"], "supplier:lids")
    # A memory that is no longer active cannot be superseded again: 409.
    err = fail(as_agent, tenant, "supersede_memory", memory_id=old["id"], title="again")
    assert (err.status, err.sqlstate, err.field) == (409, "55000", "memory_id")
    err = fail(as_agent, tenant, "supersede_memory", memory_id=str(uuid.uuid4()), title="again")
    assert (err.status, err.field) == (404, "memory_id")
    err = fail(as_agent, tenant, "supersede_memory", memory_id=entity(admin, "contact", contact["id"]), title="x")
    assert (err.status, err.field) == (422, "memory_id")
    err = fail(as_agent, tenant, "supersede_memory", memory_id=newer["id"], title="x", valid_from="2001-01-01T00:00Z")
    assert (err.status, err.field) == (422, "valid_from")


# --- update and forget ------------------------------------------------------------------------


def test_update_memory_patches_fields_and_new_content_is_indexed_again(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    mid = write(as_agent, tenant, "Trial ends in May", tags=["trial"])["memory"]["id"]
    admin.execute(
        "update cortex.memory_nodes set embed_status = 'done', link_status = 'done', needs_review = true, "
        "review_reason = 'contradicts x' where id = %s",
        (mid,),
    )
    with as_agent(tenant, "mia") as conn:
        same = call(conn, "update_memory", memory_id=mid, patch={"importance": 0.9, "needs_review": False})
        assert (same["importance"], same["needs_review"], same["review_reason"]) == (0.9, False, None)
        assert same["embed_status"] == "done"  # no new content, no new embedding
        changed = call(conn, "update_memory", memory_id=mid, patch={
            "title": "Trial ends in June", "tags": ["Trial", "sales"], "metadata": {"k": 1}, "permanent": True,
            "confidence": 0.3, "valid_to": "2030-01-01T00:00:00Z"})  # fmt: skip
    assert (changed["title"], changed["tags"], changed["metadata"], changed["permanent"]) == (
        "Trial ends in June", ["sales", "trial"], {"k": 1}, True,
    )  # fmt: skip
    assert (changed["embed_status"], changed["link_status"], changed["confidence"]) == ("pending", "pending", 0.3)
    assert changed["valid_to"].startswith("2030-01-01")
    with as_agent(tenant, "luna") as conn:
        assert call(conn, "update_memory", memory_id=mid, patch={"valid_to": None})["valid_to"] is None
    # Content equal to another active memory: 409 naming title.
    write(as_agent, tenant, "Trial ends in July")
    before = counts(admin)
    err = fail(as_agent, tenant, "update_memory", memory_id=mid, patch={"title": "trial ends in july"})
    assert (err.status, err.field) == (409, "title")
    for patch, field in (
        ({"colour": "red"}, "colour"), ({"title": ""}, "title"), ({"title": None}, "title"),
        ({"importance": 1.5}, "importance"), ({"importance": "high"}, "importance"), ({"tags": "a"}, "tags"),
        ({"metadata": []}, "metadata"), ({"permanent": "yes"}, "permanent"), ({"valid_to": "soon"}, "valid_to"),
        ({"valid_to": "1999-01-01T00:00:00Z"}, "valid_to"),
    ):  # fmt: skip
        err = fail(as_agent, tenant, "update_memory", memory_id=mid, patch=patch)
        assert (err.status, err.field) == (422, field), patch
    assert counts(admin) == before


def test_forget_archives_and_never_deletes(
    as_agent: AsAgent, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    mid = write(as_agent, tenant, "Prefers invoices by post", key="billing:channel")["memory"]["id"]
    with as_agent(tenant, "mia") as conn:
        gone = call(conn, "forget_memory", memory_id=mid, reason="customer said this was wrong")
        assert call(conn, "forget_memory", memory_id=mid)["status"] == "archived"  # idempotent
        assert call(conn, "list_memories", kinds=["fact"])["items"] == []
        assert call(conn, "list_memories", status="archived")["items"][0]["id"] == mid
        assert call(conn, "get_memory", memory_id=mid)["status"] == "archived"
    assert gone["status"] == "archived" and gone["valid_to"] is not None
    assert gone["metadata"]["forgotten_reason"] == "customer said this was wrong"
    assert gone["metadata"]["forgotten_by"] == "mia"
    # Its key slot is free again.
    assert write(as_agent, tenant, "Prefers invoices by email", key="billing:channel")["superseded"] == []
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
        admin.execute("delete from cortex.memory_nodes where id = %s", (mid,))
    for ref_kind, ref_id in (("contact", contact["id"]), ("agent", "luna")):
        err = fail(as_agent, tenant, "forget_memory", memory_id=entity(admin, ref_kind, ref_id))
        assert (err.status, err.field) == (422, "memory_id")
    err = fail(as_agent, tenant, "forget_memory", memory_id=str(uuid.uuid4()))
    assert (err.status, err.field) == (404, "memory_id")
    err = fail(as_agent, tenant, "forget_memory", memory_id=mid, reason="x" * 1001)
    assert (err.status, err.field) == (422, "reason")


# --- links and edges ------------------------------------------------------------------------


def test_links_are_written_with_the_new_memory_and_keep_the_greater_weight(
    as_agent: AsAgent, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    target = entity(admin, "contact", contact["id"])
    other = write(as_agent, tenant, "Acme is a reseller")["memory"]["id"]
    result = write(as_agent, tenant, "John is the buyer at Acme", links=[
        {"target_id": target, "relation": "applies_to", "weight": 0.9},
        {"target_id": other, "relation": "relates_to"},
        {"target_id": other, "relation": "relates_to", "weight": 0.7},
    ])  # fmt: skip
    edges = {(e["target_id"], e["relation"]): e for e in result["links"]}
    assert set(edges) == {(target, "applies_to"), (other, "relates_to")}
    assert edges[(other, "relates_to")]["weight"] == pytest.approx(0.7)
    assert edges[(target, "applies_to")]["created_by"] == "luna"
    # A duplicate's links join the original; an existing edge keeps the greater weight.
    again = write(as_agent, tenant, "John is the buyer at Acme", links=[
        {"target_id": other, "relation": "relates_to", "weight": 0.2}])  # fmt: skip
    assert again["deduplicated"] == "exact" and again["links"][0]["weight"] == pytest.approx(0.7)
    err = fail(as_agent, tenant, "remember", kind="fact", title="John is the buyer at Acme", links=[
        {"target_id": result["memory"]["id"], "relation": "relates_to"}])  # fmt: skip
    assert (err.status, err.field) == (422, "links[0].target_id")


def test_a_bad_link_writes_nothing(as_agent: AsAgent, tenant: Tenant, other_tenant: Tenant, admin: Admin) -> None:
    good = write(as_agent, tenant, "Anchor memory")["memory"]["id"]
    holder = write(as_agent, tenant, "Cutoff is 3 pm", key="cutoff")["memory"]["id"]
    foreign = write(as_agent, other_tenant, "Other tenant's memory")["memory"]["id"]
    private = write(as_agent, tenant, "Mia's own", agent="mia", visibility="private")["memory"]["id"]
    before = counts(admin)
    cases = [
        ([{"target_id": good, "relation": "relates_to"}, {"target_id": str(uuid.uuid4()), "relation": "relates_to"}],
         404, "links[1].target_id"),
        ([{"target_id": foreign, "relation": "relates_to"}], 404, "links[0].target_id"),
        ([{"target_id": private, "relation": "relates_to"}], 404, "links[0].target_id"),
        ([{"target_id": good, "relation": "loves"}], 422, "links[0].relation"),
        ([{"target_id": good}], 422, "links[0].relation"),
        ([{"target_id": good, "relation": "relates_to", "weight": 1.5}], 422, "links[0].weight"),
        ([{"target_id": "nope", "relation": "relates_to"}], 422, "links[0].target_id"),
        ([{"target_id": good, "relation": "relates_to", "colour": 1}], 422, "links[0].colour"),
        ({"target_id": good}, 422, "links"),
    ]  # fmt: skip
    for links, status, field in cases:
        # With a key, so a half-done write would also have superseded the holder.
        err = fail(as_agent, tenant, "remember", kind="fact", title="Cutoff is 4 pm", key="cutoff", links=links)
        assert (err.status, err.field) == (status, field), links
    assert counts(admin) == before and node(admin, holder)["status"] == "active"


def test_get_memory_returns_its_edges_both_ways_and_records_the_access(
    as_agent: AsAgent, tenant: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    target = entity(admin, "contact", contact["id"])
    mid = write(as_agent, tenant, "John asked for a discount", links=[
        {"target_id": target, "relation": "applies_to", "weight": 0.8}])["memory"]["id"]  # fmt: skip
    later = write(as_agent, tenant, "Discount granted", links=[
        {"target_id": mid, "relation": "caused_by", "weight": 0.6}])["memory"]["id"]  # fmt: skip
    admin.execute("update cortex.memory_edges set last_reinforced_at = now() - interval '30 days' where source_id = %s",
                  (mid,))  # fmt: skip
    admin.execute("delete from cortex.memory_access")
    with as_agent(tenant, "jasper") as conn:
        got = call(conn, "get_memory", memory_id=mid)
        bare = call(conn, "get_memory", memory_id=mid, include_edges=False)
    edges = {(e["source_id"], e["relation"], e["target_id"]): e for e in got["edges"]}
    assert set(edges) == {(mid, "applies_to", target), (later, "caused_by", mid)}
    decayed = edges[(mid, "applies_to", target)]
    assert decayed["weight"] == pytest.approx(0.8) and decayed["current_weight"] == pytest.approx(0.4, abs=0.01)
    assert "edges" not in bare and bare["id"] == mid
    access = admin.execute("select node_id::text, agent from cortex.memory_access").fetchall()
    assert access == [{"node_id": mid, "agent": "jasper"}] * 2


# --- list ----------------------------------------------------------------------------------------


def test_list_memories_filters(as_agent: AsAgent, tenant: Tenant, contact: dict[str, Any], admin: Admin) -> None:
    a = write(as_agent, tenant, "Alpha fact", tags=["red", "blue"], contact_id=contact["id"])["memory"]["id"]
    b = write(as_agent, tenant, "Beta decision", kind="decision", agent="mia", tags=["red"])["memory"]["id"]
    c = write(as_agent, tenant, "Gamma goal", kind="goal")["memory"]["id"]
    admin.execute("update cortex.memory_nodes set needs_review = true where id = %s", (c,))
    mark = db_now(admin)
    d = write(as_agent, tenant, "Delta fact")["memory"]["id"]

    def ids(**filters: Any) -> list[str]:
        with as_agent(tenant, "luna") as conn:
            return [m["id"] for m in call(conn, "list_memories", **filters)["items"]]

    assert ids(kinds=["fact", "decision", "goal"]) == [d, c, b, a]
    assert ids(kinds=["fact"]) == [d, a]
    assert ids(agent="mia", kinds=["fact", "decision", "goal"]) == [b]
    assert ids(contact_id=contact["id"], kinds=["fact"]) == [a]
    assert ids(tags=["RED"]) == [b, a] and ids(tags=["red", "blue"]) == [a]
    assert ids(needs_review=True) == [c]
    assert ids(since=mark) == [d] and ids(until=mark, kinds=["fact", "decision", "goal"]) == [c, b, a]
    # Entity nodes mirrored from seed 000 are nodes too.
    assert len(ids(kinds=["agent"])) == 6


def test_list_memories_pages_by_keyset(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    with as_agent(tenant, "luna") as conn:
        for i in range(7):
            remember(conn, f"Numbered memory {i}", kind="observation", body=f"item {i}")
    # Same created_at for several rows: the id breaks the tie.
    admin.execute(
        "update cortex.memory_nodes set created_at = '2026-01-01' where kind = 'observation' and body < 'item 4'"
    )
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        with as_agent(tenant, "luna") as conn:
            page = call(conn, "list_memories", kinds=["observation"], limit=3, cursor=cursor)
        seen += [m["id"] for m in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and len(seen) == len(set(seen)) == 7


def test_list_and_get_refuse_bad_input_naming_the_field(as_agent: AsAgent, tenant: Tenant) -> None:
    future = datetime.now(UTC) + timedelta(hours=1)
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("list_memories", {"limit": 0}, 422, "limit"),
        ("list_memories", {"limit": 201}, 422, "limit"),
        ("list_memories", {"as_of": future}, 422, "as_of"),
        ("list_memories", {"status": "deleted"}, 422, "status"),
        ("list_memories", {"kinds": ["fact", "memo"]}, 422, "kinds"),
        ("list_memories", {"cursor": "page-2"}, 422, "cursor"),
        ("list_memories", {"agent": "nobody"}, 422, "agent"),
        ("get_memory", {"memory_id": str(uuid.uuid4()), "as_of": future}, 422, "as_of"),
        ("get_memory", {"memory_id": str(uuid.uuid4())}, 404, "memory_id"),
    ]
    for function, args, status, field in cases:
        err = fail(as_agent, tenant, function, **args)
        assert (err.status, err.field) == (status, field), (function, args)


# --- bad input on write -------------------------------------------------------------------------


def test_remember_refuses_bad_input_naming_the_field_and_writes_nothing(
    as_agent: AsAgent, tenant: Tenant, admin: Admin
) -> None:
    before = counts(admin)
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"title": ""}, 422, "title"),
        ({"title": "   "}, 422, "title"),
        ({"title": "x" * 501}, 422, "title"),
        ({"body": "x" * 20001}, 422, "body"),
        ({"importance": 1.5}, 422, "importance"),
        ({"confidence": -0.1}, 422, "confidence"),
        ({"visibility": "public"}, 422, "visibility"),
        ({"tags": [f"t{i}" for i in range(51)]}, 422, "tags"),
        ({"key": ""}, 422, "key"),
        ({"metadata": {"x": "y" * 17000}}, 422, "metadata"),
        ({"contact_id": str(uuid.uuid4())}, 404, "contact_id"),
        ({"agent": "nobody"}, 422, "agent"),
        ({"agent": "mia"}, 403, "agent"),
    ]
    for fields, status, field in cases:
        err = fail(as_agent, tenant, "remember", **{"kind": "fact", "title": "A valid title", **fields})
        assert (err.status, err.field) == (status, field), fields
    assert counts(admin) == before


def test_an_admin_may_write_for_another_agent_but_not_privately(as_agent: AsAgent, tenant: Tenant) -> None:
    with as_agent(tenant, "system") as conn:
        assert remember(conn, "Written by the system for luna", agent="luna")["memory"]["source_agent"] == "luna"
    with pytest.raises(CortexError) as err, as_agent(tenant, "system") as conn:
        remember(conn, "Luna's private, by the system", agent="luna", visibility="private")
    assert (err.value.status, err.value.field) == (422, "visibility")


def test_a_read_only_agent_reads_but_cannot_write(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    mid = write(as_agent, tenant, "Readable by helios")["memory"]["id"]
    before = counts(admin)
    for function, args in (
        ("remember", {"kind": "fact", "title": "helios writes"}),
        ("update_memory", {"memory_id": mid, "patch": {"importance": 1}}),
        ("supersede_memory", {"memory_id": mid, "title": "helios supersedes"}),
        ("forget_memory", {"memory_id": mid}),
    ):
        err = fail(as_agent, tenant, function, caller="helios", **args)
        assert err.status == 403, function
    assert counts(admin) == before
    with as_agent(tenant, "helios") as conn:
        assert call(conn, "get_memory", memory_id=mid)["id"] == mid
        assert [m["id"] for m in call(conn, "list_memories", kinds=["fact"])["items"]] == [mid]


def test_another_tenants_memory_is_not_found(
    as_agent: AsAgent, tenant: Tenant, other_tenant: Tenant, admin: Admin
) -> None:
    mid = write(as_agent, tenant, "Acme's secret")["memory"]["id"]
    before = counts(admin)
    for function, args in (
        ("get_memory", {"memory_id": mid}),
        ("update_memory", {"memory_id": mid, "patch": {"importance": 1}}),
        ("supersede_memory", {"memory_id": mid, "title": "stolen"}),
        ("forget_memory", {"memory_id": mid}),
    ):
        err = fail(as_agent, other_tenant, function, **args)
        assert (err.status, err.field) == (404, "memory_id"), function
    with as_agent(other_tenant, "luna") as conn:
        assert call(conn, "list_memories")["items"] == [] or all(
            m["id"] != mid for m in call(conn, "list_memories")["items"]
        )
    assert counts(admin) == before


def test_private_memories_are_visible_only_to_their_agent(as_agent: AsAgent, tenant: Tenant, admin: Admin) -> None:
    mid = write(as_agent, tenant, "Luna's private hunch", visibility="private")["memory"]["id"]
    with as_agent(tenant, "luna") as conn:
        assert call(conn, "get_memory", memory_id=mid)["visibility"] == "private"
        assert mid in [m["id"] for m in call(conn, "list_memories")["items"]]
    with as_agent(tenant, "mia") as conn:
        assert mid not in [m["id"] for m in call(conn, "list_memories")["items"]]
    for function, args in (
        ("get_memory", {"memory_id": mid}),
        ("update_memory", {"memory_id": mid, "patch": {"importance": 1}}),
        ("forget_memory", {"memory_id": mid}),
    ):
        err = fail(as_agent, tenant, function, caller="mia", **args)
        assert err.status == 404, function
    # A link from luna's shared memory to her private one is hers alone.
    shared = write(as_agent, tenant, "Public note", links=[{"target_id": mid, "relation": "relates_to"}])
    with as_agent(tenant, "mia") as conn:
        assert call(conn, "get_memory", memory_id=shared["memory"]["id"])["edges"] == []
    with as_agent(tenant, "luna") as conn:
        assert len(call(conn, "get_memory", memory_id=shared["memory"]["id"])["edges"]) == 1


# --- HTTP -------------------------------------------------------------------------------------------


def post(client: TestClient, tenant: Tenant, payload: dict[str, Any], agent: str = "luna") -> Any:
    return client.post(f"{V1}/memories", json=payload, headers=bearer(tenant.keys[agent]))


def test_http_remember_is_201_and_200_for_a_duplicate(client: TestClient, tenant: Tenant) -> None:
    created = post(client, tenant, {"kind": "fact", "title": "Ships from Rotterdam", "tags": ["Logistics"]})
    assert created.status_code == 201
    first = MemoryWritten.model_validate(body_of(created))
    assert first.created and first.memory.tags == ["logistics"]
    again = post(client, tenant, {"kind": "fact", "title": "ships from  rotterdam"}, agent="mia")
    assert again.status_code == 200
    second = MemoryWritten.model_validate(body_of(again))
    assert (second.created, second.deduplicated, second.memory.id) == (False, "exact", first.memory.id)


def test_http_get_list_patch_supersede_and_forget(client: TestClient, tenant: Tenant, admin: Admin) -> None:
    key = bearer(tenant.keys["luna"])
    anchor = body_of(post(client, tenant, {"kind": "goal", "title": "Grow EU sales"}))["memory"]["id"]
    made = body_of(post(client, tenant, {
        "kind": "decision", "title": "Open a Berlin office", "key": "office", "valid_from": "2026-01-01T00:00:00Z",
        "links": [{"target_id": anchor, "relation": "part_of", "weight": 0.9}]}))  # fmt: skip
    mid = made["memory"]["id"]
    assert made["links"][0]["relation"] == "part_of"
    got = client.get(f"{V1}/memories/{mid}", headers=key)
    assert got.status_code == 200
    assert MemoryWithEdges.model_validate(body_of(got)).edges[0].target_id == uuid.UUID(anchor)  # type: ignore[index]
    assert client.get(f"{V1}/memories/{mid}?as_of=2025-06-01T00:00:00Z", headers=key).status_code == 404
    assert "edges" not in body_of(client.get(f"{V1}/memories/{mid}?include_edges=false", headers=key))
    listed = client.get(f"{V1}/memories?kinds=decision,goal&limit=1", headers=key)
    page = MemoryList.model_validate(body_of(listed))
    assert [str(m.id) for m in page.items] == [mid] and page.next_cursor
    rest = body_of(client.get(f"{V1}/memories?kinds=decision,goal&limit=1&cursor={page.next_cursor}", headers=key))
    assert [m["id"] for m in rest["items"]] == [anchor] and rest["next_cursor"] is None
    patched = client.patch(f"{V1}/memories/{mid}", json={"importance": 0.9, "valid_to": None}, headers=key)
    assert patched.status_code == 200 and body_of(patched)["importance"] == 0.9
    sup = client.post(f"{V1}/memories/{mid}/supersede", json={"title": "Open a Munich office"}, headers=key)
    assert sup.status_code == 201
    replaced = MemorySuperseded.model_validate(body_of(sup))
    assert replaced.superseded.status == "superseded" and replaced.memory.key == "office"
    assert replaced.memory.kind == "decision"
    forgot = client.delete(f"{V1}/memories/{replaced.memory.id}?reason=plans+changed", headers=key)
    assert forgot.status_code == 200
    assert (
        body_of(forgot)["status"] == "archived" and body_of(forgot)["metadata"]["forgotten_reason"] == "plans changed"
    )
    assert node(admin, str(replaced.memory.id))["status"] == "archived"


HTTP_BAD: list[tuple[str, str, str, Any, int, str]] = [
    ("kind mirrored", "POST", "", {"kind": "contact", "title": "x"}, 422, "kind"),
    ("empty title", "POST", "", {"kind": "fact", "title": ""}, 422, "title"),
    ("blank title", "POST", "", {"kind": "fact", "title": "   "}, 422, "title"),
    ("importance", "POST", "", {"kind": "fact", "title": "x", "importance": 2}, 422, "importance"),
    ("visibility", "POST", "", {"kind": "fact", "title": "x", "visibility": "public"}, 422, "visibility"),
    ("unknown field", "POST", "", {"kind": "fact", "title": "x", "colour": "red"}, 422, "colour"),
    ("relation", "POST", "", {"kind": "fact", "title": "x", "links": [{"target_id": "ANCHOR", "relation": "loves"}]},
     422, "links.0.relation"),
    ("link target", "POST", "",
     {"kind": "fact", "title": "x", "links": [{"target_id": "MISSING", "relation": "relates_to"}]},
     404, "links[0].target_id"),
    ("contact", "POST", "", {"kind": "fact", "title": "x", "contact_id": "MISSING"}, 404, "contact_id"),
    ("act for another", "POST", "", {"kind": "fact", "title": "x", "agent": "mia"}, 403, "agent"),
    ("get unknown", "GET", "/MISSING", None, 404, "memory_id"),
    ("get future as_of", "GET", "/ANCHOR?as_of=2999-01-01T00:00:00Z", None, 422, "as_of"),
    ("list limit", "GET", "?limit=0", None, 422, "limit"),
    ("list kinds", "GET", "?kinds=fact,memo", None, 422, "kinds"),
    ("list status", "GET", "?status=gone", None, 422, "status"),
    ("list future as_of", "GET", "?as_of=2999-01-01T00:00:00Z", None, 422, "as_of"),
    ("list cursor", "GET", "?cursor=abc", None, 422, "cursor"),
    ("patch unknown", "PATCH", "/ANCHOR", {"colour": "red"}, 422, "colour"),
    ("patch null title", "PATCH", "/ANCHOR", {"title": None}, 422, "title"),
    ("patch duplicate", "PATCH", "/ANCHOR", {"title": "Other memory"}, 409, "title"),
    ("patch unknown id", "PATCH", "/MISSING", {"importance": 1}, 404, "memory_id"),
    ("supersede superseded", "POST", "/OLD/supersede", {"title": "again"}, 409, "memory_id"),
    ("supersede unknown", "POST", "/MISSING/supersede", {"title": "again"}, 404, "memory_id"),
    ("forget unknown", "DELETE", "/MISSING", None, 404, "memory_id"),
    ("forget a contact", "DELETE", "/CONTACT", None, 422, "memory_id"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "method", "path", "payload", "status", "field"), HTTP_BAD, ids=[b[0] for b in HTTP_BAD]
)
def test_http_bad_input_is_a_4xx_naming_the_field_and_writes_nothing(
    client: TestClient, tenant: Tenant, admin: Admin, contact: dict[str, Any],
    name: str, method: str, path: str, payload: Any, status: int, field: str,
) -> None:  # fmt: skip
    anchor = body_of(post(client, tenant, {"kind": "fact", "title": "Anchor memory"}))["memory"]["id"]
    post(client, tenant, {"kind": "fact", "title": "Other memory"})
    old = body_of(post(client, tenant, {"kind": "fact", "title": "Old version", "key": "k"}))["memory"]["id"]
    post(client, tenant, {"kind": "fact", "title": "New version", "key": "k"})
    names = {"ANCHOR": anchor, "MISSING": str(uuid.uuid4()), "OLD": old,
             "CONTACT": entity(admin, "contact", contact["id"])}  # fmt: skip

    def fill(value: Any) -> Any:
        if isinstance(value, str):
            for k, v in names.items():
                value = value.replace(k, v)
            return value
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    before = counts(admin)
    kwargs: dict[str, Any] = {"headers": bearer(tenant.keys["luna"])}
    if payload is not None:
        kwargs["json"] = fill(payload)
    response = client.request(method, f"{V1}/memories{fill(path)}", **kwargs)
    assert response.status_code == status, response.json()
    error = error_of(response)
    assert error["field"] == field, error
    assert counts(admin) == before


def test_http_private_memories_and_other_tenants_and_read_only_agents(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, admin: Admin
) -> None:
    mine = body_of(post(client, tenant, {"kind": "fact", "title": "Luna only", "visibility": "private"}))
    mid = mine["memory"]["id"]
    assert client.get(f"{V1}/memories/{mid}", headers=bearer(tenant.keys["luna"])).status_code == 200
    assert client.get(f"{V1}/memories/{mid}", headers=bearer(tenant.keys["mia"])).status_code == 404
    listed = body_of(client.get(f"{V1}/memories?kinds=fact", headers=bearer(tenant.keys["mia"])))
    assert listed["items"] == []
    assert client.get(f"{V1}/memories/{mid}", headers=bearer(other_tenant.keys["luna"])).status_code == 404
    assert client.delete(f"{V1}/memories/{mid}", headers=bearer(other_tenant.keys["luna"])).status_code == 404
    shared = body_of(post(client, tenant, {"kind": "fact", "title": "Everyone sees this"}))["memory"]["id"]
    before = counts(admin)
    helios = bearer(tenant.keys["helios"])
    assert post(client, tenant, {"kind": "fact", "title": "helios"}, agent="helios").status_code == 403
    assert client.patch(f"{V1}/memories/{shared}", json={"importance": 1}, headers=helios).status_code == 403
    assert client.post(f"{V1}/memories/{shared}/supersede", json={"title": "h"}, headers=helios).status_code == 403
    assert client.delete(f"{V1}/memories/{shared}", headers=helios).status_code == 403
    assert client.get(f"{V1}/memories/{shared}", headers=helios).status_code == 200
    assert counts(admin) == before
