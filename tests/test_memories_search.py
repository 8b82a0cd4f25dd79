"""Hybrid memory search: three rankings fused by reciprocal rank, every filter on every ranking,
"as of", anchors, the HNSW iterative scan for a small tenant, isolation, bad input on both paths."""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from cortex import db, embeddings
from cortex.config import get_settings
from cortex.db import call, typed
from cortex.errors import CortexError
from cortex.memories.jobs import index_memories
from tests.conftest import AsAgent, Tenant, TenantFactory
from tests.stats_helpers import rows_read


def _insert(conn: Any, tenant: Tenant, title: str, body: str = "", **fields: Any) -> str:
    cols = {"tenant_id": tenant.id, "kind": "fact", "title": title, "body": body, "source_agent": "luna", **fields}
    names = ", ".join(cols)
    marks = ", ".join(f"%({k})s" for k in cols)
    row = conn.execute(f"insert into cortex.memory_nodes ({names}) values ({marks}) returning id", cols).fetchone()
    return str(row["id"] if isinstance(row, dict) else row[0])


def _index(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as queue:
        while index_memories(queue, "w1"):
            pass


def _vec(text: str) -> str:
    return embeddings.vector_literal(embeddings.embed_texts([text])[0])


def _ids(result: dict[str, Any]) -> list[str]:
    return [r["memory"]["id"] for r in result["results"]]


@pytest.fixture
def world(admin: Any, tenant: Tenant, contact: dict[str, Any], dsn: str) -> Iterator[dict[str, str]]:
    """A few memories of the first tenant, embedded and linked by the worker."""
    ids = {
        "email": _insert(
            admin,
            tenant,
            "John Smith prefers email over phone calls",
            tags=["channel", "john"],
            contact_id=contact["id"],
            kind="preference",
        ),
        "invoice": _insert(
            admin,
            tenant,
            "Invoices go out on the first Monday of the month",
            tags=["billing"],
            kind="decision",
            source_agent="mia",
        ),
        "shipping": _insert(admin, tenant, "Orders ship from the Rotterdam warehouse", tags=["logistics"]),
        "lids": _insert(
            admin,
            tenant,
            "Acme buys compostable lids in bulk",
            body="John Smith orders 5,000 a quarter.",
            tags=["john"],
            contact_id=contact["id"],
        ),
        "private": _insert(admin, tenant, "My private note about email etiquette", visibility="private"),
    }
    _index(dsn)
    ids["contact"] = admin.execute(
        "select id::text from cortex.memory_nodes where ref_kind = 'contact' and ref_id = %s", (contact["id"],)
    ).fetchone()["id"]
    yield ids


# --- fusion --------------------------------------------------------------------------------------


def test_results_fuse_the_rankings_by_reciprocal_rank_and_say_which_found_them(
    world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "luna") as conn:
        out = call(conn, "search_memories", query="email", query_vector=_vec("how does John like to be contacted"),
                   anchors=[world["contact"]], **{"limit": 10})  # fmt: skip
    assert out["k"] == 5 and out["weights"] == {"text": 0.5, "vector": 1, "graph": 0.25}
    assert out["used"] == {"text": True, "text_mode": "candidates", "vector": True, "graph": True}
    results = out["results"]
    assert results[0]["memory"]["id"] == world["email"]
    assert results[0]["rankings"]["text"] is not None and results[0]["rankings"]["vector"] is not None
    assert results[0]["rankings"]["graph"] is not None  # it mentions the anchor contact
    for r in results:
        expected = sum(
            w / (out["k"] + rank) for w, rank in ((0.5, r["rankings"]["text"]), (1, r["rankings"]["vector"]),
                                                  (0.25, r["rankings"]["graph"])) if rank is not None
        )  # fmt: skip
        assert r["score"] == pytest.approx(expected, abs=1e-6)
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert world["private"] in _ids(out)  # luna's own private memory


def test_weights_given_override_the_settings_and_a_zero_weight_silences_a_ranking(
    world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "luna") as conn:
        out = call(conn, "search_memories", query="warehouse", query_vector=_vec("billing schedule for invoices"),
                   weight_text=0, weight_vector=2)  # fmt: skip
    assert out["weights"] == {"text": 0, "vector": 2, "graph": 0.25}
    assert out["results"][0]["memory"]["id"] == world["invoice"]
    shipping = next(r for r in out["results"] if r["memory"]["id"] == world["shipping"])
    assert shipping["rankings"]["text"] == 1 and shipping["score"] == pytest.approx(
        2 / (5 + shipping["rankings"]["vector"]), abs=1e-6
    )


def test_graph_proximity_alone_ranks_the_anchors_neighbourhood(
    world: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "mia") as conn:
        out = call(conn, "search_memories", anchors=[world["contact"]], anchor_depth=1)
    assert set(_ids(out)) == {world["email"], world["lids"]}  # both mention John Smith
    assert all(r["rankings"]["text"] is None and r["rankings"]["vector"] is None for r in out["results"])
    assert world["contact"] not in _ids(out)  # anchors themselves are not graph results


# --- filters ---------------------------------------------------------------------------------------


def test_every_filter_applies_to_every_ranking(
    world: dict[str, str], tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    vector = _vec("John email invoices lids warehouse")
    common = {"query": "john OR invoices OR lids OR warehouse OR email", "query_vector": vector,
              "anchors": [world["contact"]]}  # fmt: skip
    with as_agent(tenant, "mia") as conn:

        def search(**f: Any) -> set[str]:
            return set(_ids(call(conn, "search_memories", **common, **f)))

        assert search(kinds=["decision"]) == {world["invoice"]}
        mia = admin.execute("select id::text from cortex.memory_nodes where ref_kind = 'agent' and ref_id = 'mia' "
                            "and tenant_id = %s", (tenant.id,)).fetchone()["id"]  # fmt: skip
        assert search(agent="mia") == {world["invoice"], mia}  # its entity node names it as source too
        # The contact's own entity node is about the contact too (the anchor itself is not a graph result).
        assert search(contact_id=contact["id"]) == {world["email"], world["lids"], world["contact"]}
        assert search(tags=["john", "CHANNEL "]) == {world["email"]}
        admin.execute("update cortex.memory_nodes set created_at = now() - interval '10 days' where id = %s",
                      (world["shipping"],))  # fmt: skip
        assert world["shipping"] not in search(since=datetime.now(UTC) - timedelta(days=1))
        assert search(until=datetime.now(UTC) - timedelta(days=1)) == {world["shipping"]}
        assert world["private"] not in search()


def test_superseded_nodes_only_when_asked_and_as_of_finds_what_was_valid_then(
    admin: Any, tenant: Tenant, as_agent: AsAgent, dsn: str
) -> None:
    t0 = datetime.now(UTC) - timedelta(days=30)
    t1 = datetime.now(UTC) - timedelta(days=10)
    old = _insert(admin, tenant, "The support line opens at 8", valid_from=t0)
    _index(dsn)
    admin.execute("update cortex.memory_nodes set status = 'superseded', valid_to = %s where id = %s", (t1, old))
    new = _insert(admin, tenant, "The support line opens at 9", valid_from=t1)
    archived = _insert(admin, tenant, "The support line opens at 7", status="archived", valid_from=t0)
    _index(dsn)
    vector = _vec("when does the support line open")
    with as_agent(tenant, "luna") as conn:
        assert _ids(call(conn, "search_memories", query="support line", query_vector=vector, kinds=["fact"])) == [new]
        both = set(_ids(call(conn, "search_memories", query="support line", include_superseded=True)))
        assert both == {old, new}
        then = call(conn, "search_memories", query="support line", query_vector=vector, kinds=["fact"],
                    as_of=t1 - timedelta(days=1))  # fmt: skip
        assert _ids(then) == [old]
        assert archived not in both


def test_nodes_below_min_importance_rank_after_all_others(admin: Any, tenant: Tenant, as_agent: AsAgent) -> None:
    low = _insert(admin, tenant, "Parking permit renewal parking permit parking", importance=0.1)
    high = _insert(admin, tenant, "Parking is behind the building", importance=0.5)
    with as_agent(tenant, "luna") as conn:
        out = call(conn, "search_memories", query="parking")
    assert _ids(out) == [high, low]
    assert out["results"][1]["rankings"]["text"] == 1  # the better match, ranked last for its importance


def test_a_search_by_vector_alone_takes_its_top_limit_and_fills_it_below_min_importance_last(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    query = _vec("parking permit renewal")
    ids = {}
    nodes = [("nearest_low", 0.1, "parking permit renewal"), ("near_high", 0.6, "parking permit"),
             ("far_high", 0.6, "quarterly invoice run"), ("far_low", 0.1, "lunch menu")]  # fmt: skip
    for name, importance, text in nodes:
        ids[name] = _insert(admin, tenant, text, importance=importance)
        admin.execute("update cortex.memory_nodes set embedding = %s::extensions.vector where id = %s",
                      (_vec(text), ids[name]))  # fmt: skip
    with as_agent(tenant, "luna") as conn:
        one = call(conn, "search_memories", query_vector=query, limit=1)
        three = call(conn, "search_memories", query_vector=query, limit=3)
        four = call(conn, "search_memories", query_vector=query, limit=4)
    # The nearest node is below min_importance: with one place, a node above it takes it.
    assert _ids(one) == [ids["near_high"]]
    # Only two are above: the third place goes to the nearest of the others.
    assert _ids(three) == [ids["near_high"], ids["far_high"], ids["nearest_low"]]
    assert _ids(four) == [ids["near_high"], ids["far_high"], ids["nearest_low"], ids["far_low"]]
    assert [r["rankings"]["vector"] for r in four["results"]] == [1, 2, 3, 4]


# --- isolation and access ----------------------------------------------------------------------------


def test_private_memories_stay_with_their_agent_and_other_tenants_see_nothing(
    world: dict[str, str], tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent
) -> None:
    vector = _vec("email etiquette note")
    with as_agent(tenant, "mia") as conn:
        assert world["private"] not in _ids(call(conn, "search_memories", query="private note", query_vector=vector))
    with as_agent(other_tenant, "luna") as conn:
        out = call(conn, "search_memories", query="email", query_vector=vector, anchors=[world["contact"]])
    assert out["results"] == []


def test_returned_nodes_are_recorded_as_accessed_once(world: dict[str, str], tenant: Tenant, as_agent: AsAgent,
                                                      admin: Any) -> None:  # fmt: skip
    with as_agent(tenant, "luna") as conn:
        out = call(conn, "search_memories", query="email", query_vector=_vec("email"))
    logged = admin.execute("select node_id::text, agent from cortex.memory_access").fetchall()
    assert sorted(r["node_id"] for r in logged) == sorted(_ids(out)) and {r["agent"] for r in logged} == {"luna"}


def test_text_search_matches_any_of_the_words_ranking_more_matches_first_with_phrases_and_negations_kept(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    both = _insert(admin, tenant, "Maria Lopez prefers email", "Reach her by email before noon.")
    one = _insert(admin, tenant, "Maria Lopez works in Madrid")
    other = _insert(admin, tenant, "The warehouse closes at six")

    def text(query: str) -> list[str]:
        with as_agent(tenant, "luna") as conn:
            return _ids(call(conn, "search_memories", query=query, record_access=False))

    # A natural question: no node holds every word, yet both Maria nodes match, the better one first.
    assert text("How should I reach Maria Lopez by email?") == [both, one]
    assert set(text("Maria warehouse")) == {both, one, other}
    assert set(text('"works in Madrid" warehouse')) == {one, other}  # a quoted phrase is one operand
    assert text('"email Maria" warehouse') == [other]  # and still a phrase: those words, in that order
    assert text("maria -email") == [one]  # a negation still excludes
    assert text('warehouse -"prefers email"') == [other]


def _candidates(conn: Any, tenant: Tenant, query: str, budget: int) -> str:
    row = conn.execute(
        "select cortex.memory_candidate_tsquery(%s, 'english', %s, %s)::text as q", (tenant.id, query, budget)
    ).fetchone()
    return str(row["q"] if isinstance(row, dict) else row[0])


def test_term_statistics_count_shared_active_memories_only_and_keep_common_words(
    admin: Any, tenant: Tenant, other_tenant: Tenant
) -> None:
    for i in range(60):
        _insert(admin, tenant, f"Invoice note {i}", "the invoice was paid")
        _insert(admin, tenant, f"Private {i}", "okapi sighting", visibility="private")
    for i in range(55):
        _insert(admin, tenant, f"Old {i}", "zebra crossing", status="archived")
    _insert(admin, tenant, "Rare", "narwhal")
    assert admin.execute("select cortex.refresh_memory_lexicons(p_min_documents => 50) as n").fetchone()["n"] == 1
    counts = {
        r["lexeme"]: r["ndoc"]
        for r in admin.execute("select lexeme, ndoc from cortex.memory_lexemes where tenant_id = %s", (tenant.id,))
    }
    # Only words in at least 50 shared, active memories: not the private ones, the archived ones or the rare one.
    assert counts == {"invoic": 60, "note": 60, "paid": 60}
    run = admin.execute("select documents, lexemes from cortex.memory_lexicon_runs where tenant_id = %s", (tenant.id,))
    entities = admin.execute(
        "select count(*) as n from cortex.memory_nodes where tenant_id = %s and ref_kind is not null", (tenant.id,)
    ).fetchone()["n"]
    assert run.fetchone() == {"documents": 61 + entities, "lexemes": 3}
    # The other tenant had too few memories to be counted at all.
    assert (
        admin.execute(
            "select count(*) as n from cortex.memory_lexicon_runs where tenant_id = %s", (other_tenant.id,)
        ).fetchone()["n"]
        == 0
    )


def _count_three_words(admin: Any, tenant: Tenant) -> None:
    """Term statistics as the hourly count would leave them: customer 5,000, invoice 900, refund 300."""
    admin.execute(
        "insert into cortex.memory_lexemes (tenant_id, lexeme, ndoc) values (%(t)s, 'invoic', 900), "
        "(%(t)s, 'custom', 5000), (%(t)s, 'refund', 300)",
        {"t": tenant.id},
    )


def test_text_candidates_come_from_the_rarest_words_within_the_budget_and_keep_negations(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    _count_three_words(admin, tenant)
    with as_agent(tenant, "luna") as conn:
        # Everything fits a big budget: the any-word query itself.
        assert _candidates(conn, tenant, "customer invoice refund", 10000) == "'custom' | 'invoic' | 'refund'"
        # Rarest first while the expected matches stay under the budget; the rarest always.
        assert _candidates(conn, tenant, "customer invoice refund", 1500) == "'invoic' | 'refund'"
        assert _candidates(conn, tenant, "customer invoice refund", 1000) == "'refund'"
        assert _candidates(conn, tenant, "customer invoice refund", 100) == "'refund'"
        # A word never counted is rarer than any counted one; a negation is always kept.
        assert _candidates(conn, tenant, "customer narwhal -invoice", 100) == "'narwhal' & !'invoic'"
        # A phrase is as rare as its rarest word.
        assert _candidates(conn, tenant, '"customer refund" invoice', 500) == "'custom' <-> 'refund'"


def test_search_ranks_candidates_by_every_word_of_the_query(admin: Any, tenant: Tenant, as_agent: AsAgent) -> None:
    """Pruning picks candidates, never the ranking: among the documents holding the rare word, the
    one that also holds the common words comes first."""
    admin.execute(
        "insert into cortex.memory_lexemes (tenant_id, lexeme, ndoc) values (%(t)s, 'custom', 100000)",
        {"t": tenant.id},
    )
    best = _insert(admin, tenant, "Customer refund for the customer", "refund approved for the customer")
    rare_only = _insert(admin, tenant, "Refund policy", "refund within 30 days")
    _insert(admin, tenant, "Customer call", "the customer called")
    with as_agent(tenant, "luna") as conn:
        found = _ids(call(conn, "search_memories", query="customer refund", record_access=False))
    assert found[:2] == [best, rare_only]


def test_text_candidates_report_the_rows_they_are_expected_to_match(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    _count_three_words(admin, tenant)

    def plan(query: str, budget: int) -> tuple[str | None, int | None]:
        with as_agent(tenant, "luna") as conn:
            row = conn.execute(
                "select query::text, expected from cortex.memory_text_candidates(%s, 'english', %s, %s)",
                (tenant.id, query, budget),
            ).fetchone()
        return row[0], row[1]

    assert plan("customer invoice refund", 10000) == ("'custom' | 'invoic' | 'refund'", 6200)
    assert plan("customer invoice refund", 1500) == ("'invoic' | 'refund'", 1200)
    # Over the budget only when the rarest word alone is: the signal for search_memories' rerank mode.
    assert plan("customer invoice", 100) == ("'invoic'", 900)
    assert plan("narwhal customer", 100) == ("'narwhal'", 0)  # a word never counted is expected nowhere
    assert plan("-invoice", 100) == ("!'invoic'", None)  # negations only: unknown
    # The tsquery-only form is the same query.
    with as_agent(tenant, "luna") as conn:
        assert _candidates(conn, tenant, "customer invoice", 100) == "'invoic'"


@pytest.fixture
def common_words(admin: Any, tenant: Tenant, dsn: str) -> dict[str, str]:
    """A tenant whose words 'invoice' and 'customer' are common (its term statistics say so) and whose
    text budget is 100, with four embedded memories and one just written (not embedded yet)."""
    ids = {
        "paid": _insert(admin, tenant, "The customer invoice was paid late", "Invoice 17 for the customer."),
        "terms": _insert(admin, tenant, "Invoice payment terms are thirty days"),
        "reminder": _insert(admin, tenant, "Send a payment reminder after two weeks"),
        "parking": _insert(admin, tenant, "Customer parking is behind the building"),
    }
    _index(dsn)
    ids["fresh"] = _insert(admin, tenant, "Customer invoice disputed", "The customer disputes invoice 18.")
    admin.execute(
        "insert into cortex.memory_lexemes (tenant_id, lexeme, ndoc) values (%(t)s, 'invoic', 50000), "
        "(%(t)s, 'custom', 90000)",
        {"t": tenant.id},
    )
    admin.execute("select cortex.set_memory_settings(%s, '{\"text_candidate_budget\": 100}')", (tenant.id,))
    return ids


def _search(as_agent: AsAgent, tenant: Tenant, **args: Any) -> dict[str, Any]:
    with as_agent(tenant, "luna") as conn:
        out: dict[str, Any] = call(conn, "search_memories", record_access=False, **args)
    return out


def _text_ranks(out: dict[str, Any]) -> dict[str, int | None]:
    return {r["memory"]["id"]: r["rankings"]["text"] for r in out["results"]}


def test_a_hybrid_query_of_common_words_ranks_text_only_among_the_vector_candidates(
    common_words: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    vector = _vec("invoice payment terms and reminders")
    out = _search(as_agent, tenant, query="customer invoice", query_vector=vector, **{"limit": 20})
    vector_only = _search(as_agent, tenant, query_vector=vector, **{"limit": 20})
    assert out["used"]["text_mode"] == "rerank" and vector_only["used"]["text_mode"] is None
    text = _text_ranks(out)
    # The vector's nodes, re-weighted: those holding the words get a text rank, the best match first.
    assert set(text) == set(_ids(vector_only))
    assert text[common_words["paid"]] == 1
    assert text[common_words["terms"]] is not None and text[common_words["parking"]] is not None
    assert text[common_words["reminder"]] is None
    paid = next(r for r in out["results"] if r["memory"]["id"] == common_words["paid"])
    assert paid["score"] == pytest.approx(1 / (5 + paid["rankings"]["vector"]) + 0.5 / (5 + 1), abs=1e-6)


def test_a_node_matching_common_words_outside_the_vector_and_graph_candidates_gets_no_text_rank(
    common_words: dict[str, str], admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    vector = _vec("a customer disputes an invoice")
    fresh = common_words["fresh"]  # the best text match, but not embedded: no vector candidate
    hybrid = _search(as_agent, tenant, query="customer invoice", query_vector=vector)
    assert hybrid["used"]["text_mode"] == "rerank" and fresh not in _ids(hybrid)
    # Text alone still finds it among the rarest word's matches ...
    text_only = _search(as_agent, tenant, query="customer invoice")
    assert text_only["used"]["text_mode"] == "candidates" and _text_ranks(text_only)[fresh] is not None
    # ... and so does the hybrid query once the budget admits the word's matches.
    admin.execute("select cortex.set_memory_settings(%s, '{\"text_candidate_budget\": 60000}')", (tenant.id,))
    wide = _search(as_agent, tenant, query="customer invoice", query_vector=vector)
    assert wide["used"]["text_mode"] == "candidates" and _text_ranks(wide)[fresh] is not None


def test_graph_candidates_are_ranked_by_text_too(
    common_words: dict[str, str], admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    admin.execute(
        "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight) "
        "values (%s, %s, 'relates_to', %s, 0.9)",
        (tenant.id, common_words["reminder"], common_words["fresh"]),
    )
    out = _search(as_agent, tenant, query="customer invoice", query_vector=_vec("a customer disputes an invoice"),
                  anchors=[common_words["reminder"]], anchor_depth=1)  # fmt: skip
    fresh = next(r for r in out["results"] if r["memory"]["id"] == common_words["fresh"])
    assert out["used"]["text_mode"] == "rerank"
    assert fresh["rankings"]["vector"] is None and fresh["rankings"]["graph"] == 1
    assert fresh["rankings"]["text"] is not None  # found by the graph, ranked by text as well


def test_selective_words_and_text_only_queries_keep_the_candidates_path(
    common_words: dict[str, str], tenant: Tenant, as_agent: AsAgent
) -> None:
    vector = _vec("invoice payment terms and reminders")
    # 'reminder' is not common: its matches fit the budget, so text searches the whole tenant.
    rare = _search(as_agent, tenant, query="customer reminder", query_vector=vector)
    assert rare["used"]["text_mode"] == "candidates" and _text_ranks(rare)[common_words["reminder"]] == 1
    # Text only: the rarest word's matches, as before (the fresh node, not embedded, among them).
    text_only = _search(as_agent, tenant, query="customer invoice")
    assert text_only["used"]["text_mode"] == "candidates"
    assert set(_ids(text_only)) == {common_words[k] for k in ("paid", "terms", "fresh")}
    # A vector with weight 0 is no ranking to lean on: the text ranking stands alone.
    silent = _search(as_agent, tenant, query="customer invoice", query_vector=vector, weight_vector=0)
    assert silent["used"]["text_mode"] == "candidates" and common_words["fresh"] in _ids(silent)
    assert _search(as_agent, tenant, query_vector=vector)["used"]["text_mode"] is None


def test_a_rare_word_is_found_through_the_full_text_index_not_by_reading_the_tenant(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    admin.execute(
        # Rows of a realistic width, so that reading the tenant is what a planner would avoid.
        "insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "select %s, 'fact', 'routine note number ' || g, repeat('routine ', 100), 'luna' "
        "from generate_series(1, 20000) g",
        (tenant.id,),
    )
    rare = _insert(admin, tenant, "The zygomorphic orchid order ships Friday")
    hidden = _insert(admin, tenant, "My zygomorphic orchid notes", source_agent="mia", visibility="private")
    admin.execute("analyze cortex.memory_nodes")
    with as_agent(tenant, "luna") as conn:
        before = rows_read(conn, "cortex.memory_nodes")
        out = call(conn, "search_memories", query="zygomorphic orchid", record_access=False)
        read = rows_read(conn, "cortex.memory_nodes") - before
    assert out["used"]["text_mode"] == "candidates"
    # Under RLS a non-leakproof `@@` cannot drive the index: the tenant's 20,000 rows were read.
    assert _ids(out) == [rare] and hidden not in _ids(out)
    assert read < 100


@pytest.mark.parametrize("limit", [0, 401, None])
def test_the_text_ranking_called_directly_bounds_its_limit(
    tenant: Tenant, as_agent: AsAgent, limit: int | None
) -> None:
    with as_agent(tenant, "luna") as conn, pytest.raises(psycopg.errors.InvalidParameterValue) as raised:
        conn.execute(
            "select cortex.memory_text_ranking('probe', 'probe', '{active}', "
            "null, null, null, null, null, null, null, %s)",
            (limit,),
        )
    assert raised.value.diag.column_name == "p_limit"


def test_the_text_budget_is_a_setting_checked_by_range(admin: Any, tenant: Tenant) -> None:
    assert admin.execute("select text_candidate_budget as b from cortex.memory_settings where tenant_id = %s",
                         (tenant.id,)).fetchone()["b"] == 2000  # fmt: skip
    row = admin.execute("select cortex.set_memory_settings(%s, '{\"text_candidate_budget\": 50}') as s", (tenant.id,))
    assert row.fetchone()["s"]["text_candidate_budget"] == 50
    for bad in (0, 1000001):
        with pytest.raises(psycopg.Error) as err:
            admin.execute("select cortex.set_memory_settings(%s, %s)",
                          (tenant.id, f'{{"text_candidate_budget": {bad}}}'))  # fmt: skip
        assert err.value.diag.sqlstate == "22023" and err.value.diag.column_name == "text_candidate_budget"


def test_term_statistics_of_another_tenant_are_invisible(
    admin: Any, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent
) -> None:
    admin.execute(
        "insert into cortex.memory_lexemes (tenant_id, lexeme, ndoc) values (%s, 'invoic', 900)", (tenant.id,)
    )
    with as_agent(other_tenant, "luna") as conn:
        assert conn.execute("select count(*) from cortex.memory_lexemes").fetchone()[0] == 0
        # Asking with the first tenant's id learns nothing: the word counts as never seen.
        assert _candidates(conn, tenant, "invoice refund", 1) == "'invoic' | 'refund'"
    with as_agent(tenant, "luna") as conn:
        assert _candidates(conn, tenant, "invoice refund", 1) == "'refund'"


def test_a_search_with_record_access_false_records_nothing_on_either_path(
    world: dict[str, str], tenant: Tenant, as_agent: AsAgent, admin: Any, client: Any
) -> None:
    counts = "select coalesce(sum(access_count), 0) as n from cortex.memory_nodes"
    before = admin.execute(counts).fetchone()["n"]
    with as_agent(tenant, "luna") as conn:
        out = call(conn, "search_memories", query="email", query_vector=_vec("email"), record_access=False)
    assert _ids(out)  # the same results, only unrecorded
    res = _post(client, tenant, {"query": "email", "record_access": False})
    assert res.status_code == 200 and res.json()["results"], res.text
    admin.execute("select cortex.fold_memory_access()")
    assert admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"] == 0
    assert admin.execute(counts).fetchone()["n"] == before


def test_a_small_tenant_in_a_big_table_gets_its_full_top_k_through_the_hnsw_index(
    admin: Any, make_tenant: TenantFactory, as_agent: AsAgent
) -> None:
    big, small = make_tenant("big"), make_tenant("small")
    random_vector = (
        "(select array_agg(random() - 0.5)::real[]::extensions.vector from generate_series(1, 384) where g > 0)"
    )
    for t, n in ((big, 4000), (small, 40)):
        admin.execute(
            f"""insert into cortex.memory_nodes (tenant_id, kind, title, source_agent, embedding, embed_status,
                                                link_status)
                select %s, 'fact', 'fact ' || g, 'luna', {random_vector}, 'done', 'done'
                from generate_series(1, %s) g""",
            (t.id, n),
        )
    admin.execute("analyze cortex.memory_nodes")
    rng = random.Random(13)
    query = embeddings.vector_literal([rng.random() - 0.5 for _ in range(384)])
    exact = [
        str(r["id"])
        for r in admin.execute(
            "select id from cortex.memory_nodes where tenant_id = %s and embedding is not null "
            "order by embedding operator(extensions.<=>) %s::extensions.vector limit 10",
            (small.id, query),
        )
    ]

    def scans() -> int:
        admin.execute("select pg_stat_clear_snapshot()")
        row = admin.execute("select idx_scan from pg_stat_user_indexes where indexrelname = 'memory_nodes_embedding'")
        return int(row.fetchone()["idx_scan"])

    with as_agent(small, "luna") as conn:
        planned = _ids(call(conn, "search_memories", query_vector=query))  # the planner's choice
    before = scans()
    with as_agent(small, "luna") as conn:
        # Steer the planner to the HNSW index, as it chooses for a tenant too big to sort.
        conn.execute("set local enable_sort = off")
        through_index = call(conn, "search_memories", query_vector=query)
        conn.execute("select pg_stat_force_next_flush()")
    assert scans() > before
    assert _ids(through_index) == exact and planned == exact
    assert all(r["rankings"]["vector"] == i + 1 for i, r in enumerate(through_index["results"]))
    with as_agent(small, "luna") as conn:
        # The same scan without pgvector's iterative scan loses the small tenant's rows.
        conn.execute("set local enable_sort = off")
        conn.execute("set local hnsw.iterative_scan = off")
        cut = conn.execute(
            "select count(*) from (select id from cortex.memory_nodes where tenant_id = %s "
            "order by embedding operator(extensions.<=>) %s::extensions.vector limit 40) x",
            (small.id, query),
        ).fetchone()[0]
    assert cut < 10


# --- bad input -----------------------------------------------------------------------------------------

BAD_SQL: list[tuple[dict[str, Any], str]] = [
    ({"query": "   "}, "query"),
    ({"query": ""}, "query"),
    ({}, "query"),
    ({"query": "x" * 1001}, "query"),
    ({"query_vector": "[1,2,3]"}, "query_vector"),
    ({"query": "x", "limit": 0}, "limit"),
    ({"query": "x", "limit": 101}, "limit"),
    ({"query": "x", "kinds": ["fact", "rumour"]}, "kinds"),
    ({"query": "x", "as_of": datetime.now(UTC) + timedelta(days=1)}, "as_of"),
    ({"query": "x", "anchor_depth": 7}, "anchor_depth"),
    ({"query": "x", "since": datetime.now(UTC), "until": datetime.now(UTC) - timedelta(days=1)}, "until"),
    ({"query": "x", "weight_vector": -1}, "weight_vector"),
    ({"query": "x", "tags": [f"t{i}" for i in range(51)]}, "tags"),
]


@pytest.mark.parametrize(("args", "field"), BAD_SQL)
def test_bad_input_is_refused_in_sql_naming_the_field(
    args: dict[str, Any], field: str, tenant: Tenant, as_agent: AsAgent, admin: Any
) -> None:
    if isinstance(args.get("query_vector"), str):
        args = {**args, "query_vector": typed(args["query_vector"], "extensions.vector")}
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "search_memories", **args)
    assert (err.value.status, err.value.field) == (422, field)
    assert admin.execute("select count(*) as n from cortex.memory_access").fetchone()["n"] == 0


def test_a_claimless_caller_is_refused(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("set local role authenticated")
        with pytest.raises(psycopg.errors.InvalidAuthorizationSpecification):
            conn.execute("select public.search_memories('x')")


# --- HTTP ------------------------------------------------------------------------------------------------


def _post(client: Any, tenant: Tenant, body: dict[str, Any], agent: str = "luna") -> Any:
    return client.post("/api/v1/memories/search", json=body,
                       headers={"Authorization": f"Bearer {tenant.keys[agent]}"})  # fmt: skip


def test_http_search_embeds_the_query_in_the_api(world: dict[str, str], client: Any, tenant: Tenant) -> None:
    res = _post(
        client,
        tenant,
        {"query": "how should we reach John", "weights": {"graph": 0}, "kinds": ["fact", "preference", "decision"]},
    )
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["used"] == {"text": True, "text_mode": "candidates", "vector": True, "graph": False}
    assert body["weights"]["graph"] == 0
    top = body["results"][0]
    assert top["memory"]["id"] == world["email"] and top["rankings"]["vector"] == 1
    vector = embeddings.embed_texts(["Acme compostable lids"])[0]
    res = _post(client, tenant, {"query_vector": vector, "kinds": ["fact"], "limit": 1})
    assert res.status_code == 200 and [r["memory"]["id"] for r in res.json()["results"]] == [world["lids"]]


BAD_HTTP: list[tuple[dict[str, Any], str]] = [
    ({"query": "  "}, "query"),
    ({}, "query"),
    ({"query_vector": [0.1] * 383}, "query_vector"),
    ({"query": "x", "limit": 0}, "limit"),
    ({"query": "x", "kinds": ["rumour"]}, "kinds.0"),
    ({"query": "x", "as_of": (datetime.now(UTC) + timedelta(days=1)).isoformat()}, "as_of"),
    ({"query": "x", "anchor_depth": 0}, "anchor_depth"),
    ({"query": "x", "weights": {"text": -1}}, "weights.text"),
    ({"query": "x", "colour": "blue"}, "colour"),
]


@pytest.mark.parametrize(("body", "field"), BAD_HTTP)
def test_bad_input_over_http_is_a_422_naming_the_field(
    body: dict[str, Any], field: str, client: Any, tenant: Tenant
) -> None:
    res = _post(client, tenant, body)
    assert res.status_code == 422, res.text
    assert res.json()["error"]["field"] == field


def test_reads_that_only_log_access_commit_without_waiting_for_the_wal_flush(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    """search_memories (when it records access) and get_briefing write nothing but the access log
    and the briefing cache: their transaction commits asynchronously; a search that records nothing
    leaves the setting alone."""
    _insert(admin, tenant, "Maria Lopez prefers email")
    with as_agent(tenant, "luna") as conn:
        call(conn, "search_memories", query="Maria", record_access=False)
        assert conn.execute("show synchronous_commit").fetchone()[0] == "on"
        call(conn, "search_memories", query="Maria")
        assert conn.execute("show synchronous_commit").fetchone()[0] == "off"
    with as_agent(tenant, "luna") as conn:
        call(conn, "get_briefing")
        assert conn.execute("show synchronous_commit").fetchone()[0] == "off"
    with as_agent(tenant, "luna") as conn:  # the setting is the transaction's, not the session's
        assert conn.execute("show synchronous_commit").fetchone()[0] == "on"


def test_an_anchored_search_does_not_walk_through_a_hub_when_the_first_level_holds_enough(
    admin: Any, tenant: Tenant, as_agent: AsAgent
) -> None:
    # An anchor with 100 neighbours, each of which applies to a hub of 5,000 memories. The graph
    # ranking wants the nearest 2 N (N = 40 candidates): the first level holds them, so the walk
    # does not go through the hub (a walk for the nearest 10 N did, from each of the 100: 525,200
    # edge rows read).
    anchor = _insert(admin, tenant, "Quarterly review with the logistics team")
    hub = _insert(admin, tenant, "Globex Corporation", kind="system")
    admin.execute(
        "with n as (insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "  select %(t)s, 'fact', 'review note ' || g, '', 'luna' from generate_series(1, 100) g returning id) "
        "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight) "
        "select %(t)s, n.id, r.relation, r.target, 0.9 from n "
        "cross join (values ('relates_to', %(a)s::uuid), ('applies_to', %(h)s::uuid)) r (relation, target)",
        {"t": tenant.id, "a": anchor, "h": hub},
    )
    admin.execute(
        "with n as (insert into cortex.memory_nodes (tenant_id, kind, title, body, source_agent) "
        "  select %(t)s, 'fact', 'order note ' || g, '', 'luna' from generate_series(1, 5000) g returning id) "
        "insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight) "
        "select %(t)s, n.id, 'applies_to', %(h)s::uuid, 0.9 from n",
        {"t": tenant.id, "h": hub},
    )
    admin.execute("analyze cortex.memory_edges")
    with as_agent(tenant, "luna") as conn:
        before = rows_read(conn, "cortex.memory_edges")
        out = call(conn, "search_memories", anchors=[anchor], anchor_depth=2, record_access=False)
        read = rows_read(conn, "cortex.memory_edges") - before
    found = _ids(out)
    assert len(found) == 10 and hub not in found and out["results"][0]["rankings"]["graph"] is not None
    assert read < 10_000, read


def test_http_searches_run_through_a_pool_of_their_own_of_the_configured_size(
    world: dict[str, str], client: Any, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_SEARCH_CONCURRENCY", "2")
    get_settings.cache_clear()
    try:
        body = {"query": "how should we reach John", "record_access": False}
        alone = _post(client, tenant, body).json()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: _post(client, tenant, body), range(8)))
        assert [a.status_code for a in answers] == [200] * 8
        assert all(a.json() == alone for a in answers)

        async def stats() -> tuple[dict[str, int], dict[str, int]]:
            return db._apools["search"].get_stats(), db._apools["api"].get_stats()

        searches, edge = client.portal.call(stats)  # type: ignore[union-attr]
        assert searches["pool_max"] == 2 and searches["requests_num"] == 9
        # The edge's own pool served none of them (the key lookup is cached after the first).
        assert edge.get("requests_num", 0) <= 1
    finally:
        get_settings.cache_clear()
