"""The graph benchmark's generator (sql/bench/generate_graph.sql) keeps its promises at scale 0.001:
node and edge counts, tenant shares, the mix of kinds, unit-length clustered embeddings, and a
full top-10 from search_memories in the smallest tenant. The eval (scripts/eval_memory.py) gets a
smoke run at a tiny size (slow: it loads the embedding model)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from cortex import db as cortex_db
from tests.conftest import _janitor, dsn_for

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "sql" / "bench" / "generate_graph.sql"


@pytest.fixture(scope="module")
def graph_db(template_db: str) -> Iterator[str]:
    """A copy of the migrated template named like the benchmark database, loaded at scale 0.001."""
    name = f"cortex_bench_graph_t{uuid.uuid4().hex[:8]}"
    janitor = _janitor(name, template=template_db)
    janitor.init()
    url = dsn_for(name)
    try:
        subprocess.run(
            [
                "psql",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-v",
                "scale=0.001",
                "-v",
                "batch=200",
                "-f",
                str(GENERATOR),
                url,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        yield url
    finally:
        janitor.drop()


def one(conn: psycopg.Connection[dict[str, Any]], query: str, *args: Any) -> dict[str, Any]:
    row = conn.execute(query, args).fetchone()
    assert row is not None
    return row


def test_each_tenant_gets_its_planned_nodes_and_five_edges_per_node(graph_db: str) -> None:
    with psycopg.connect(graph_db, autocommit=True, row_factory=dict_row) as conn:
        plan = conn.execute("select slug, share, nodes, id from bench.tenant_plan order by n").fetchall()
        # The specified shares: one tenant 60 %, the smallest 1 %, all together 100 %.
        assert plan[0]["share"] == pytest.approx(0.60)
        assert min(p["share"] for p in plan) == pytest.approx(0.01)
        assert sum(p["share"] for p in plan) == pytest.approx(1.0)
        counts = {
            r["tenant_id"]: r
            for r in conn.execute(
                "select tenant_id, count(*) as nodes, count(*) filter (where kind = 'agent') as agents, "
                "count(*) filter (where kind = 'contact') as contacts from cortex.memory_nodes group by 1"
            ).fetchall()
        }
        for p in plan:
            assert counts[p["id"]]["nodes"] == p["nodes"], p["slug"]
            assert counts[p["id"]]["agents"] == 5
            assert counts[p["id"]]["contacts"] >= 2
        total = sum(p["nodes"] for p in plan)
        edges = one(conn, "select count(*) as n from cortex.memory_edges")["n"]
        assert 0.98 * 5 * total <= edges <= 5 * total
        # At this scale the floor of 40 nodes per tenant lifts the small ones; the largest keeps most.
        largest = max(counts.values(), key=lambda r: r["nodes"])["nodes"]
        assert largest / total > 0.55
        assert one(conn, "select value from bench.meta where key = 'complete'")["value"] == "true"


def test_nodes_are_mostly_events_with_unit_embeddings_around_clusters(graph_db: str) -> None:
    with psycopg.connect(graph_db, autocommit=True, row_factory=dict_row) as conn:
        kinds = {
            r["kind"]: r["n"] for r in conn.execute("select kind, count(*) as n from cortex.memory_nodes group by 1")
        }
        assert max(kinds, key=lambda k: kinds[k]) == "event"
        assert {"fact", "preference", "decision", "observation"} <= kinds.keys()
        norms = one(
            conn,
            "select min(extensions.vector_norm(embedding)) as lo, max(extensions.vector_norm(embedding)) as hi, "
            "count(*) filter (where embedding is null and embed_status = 'done' and kind <> 'agent') as missing "
            "from cortex.memory_nodes",
        )
        assert norms["lo"] == pytest.approx(1.0, abs=1e-3) and norms["hi"] == pytest.approx(1.0, abs=1e-3)
        assert norms["missing"] == 0
        # Same cluster (seq mod 300) means near: similarity well above that of other clusters.
        sims = one(
            conn,
            """select avg(1 - (a.embedding operator(extensions.<=>) b.embedding)) filter (where a.cl = b.cl) as same,
                      avg(1 - (a.embedding operator(extensions.<=>) b.embedding)) filter (where a.cl <> b.cl) as other
               from (select n.embedding, p.seq %% 300 as cl from cortex.memory_nodes n
                     join bench.plan p on n.id = bench.nid(p.tenant_n, p.seq) where n.embedding is not null limit 300) a
               cross join (select n.embedding, p.seq %% 300 as cl from cortex.memory_nodes n
                     join bench.plan p on n.id = bench.nid(p.tenant_n, p.seq) where n.embedding is not null
                     offset 300 limit 300) b""",
        )
        assert sims["same"] > 0.5 > 0.2 > sims["other"]
        # Texts: full-text search finds a cluster's topic word, and not everywhere.
        word = one(conn, "select words[1] as w from bench.centres where c = 0")["w"]
        hits = one(
            conn,
            "select count(*) as n from cortex.memory_nodes where fts @@ plainto_tsquery('english', %s)",
            word,
        )["n"]
        assert 0 < hits < kinds["event"]


def test_edges_follow_a_power_law_and_stay_inside_their_tenant(graph_db: str) -> None:
    with psycopg.connect(graph_db, autocommit=True, row_factory=dict_row) as conn:
        degrees = one(
            conn,
            """select max(d) as top, percentile_cont(0.5) within group (order by d) as median
               from (select target_id, count(*) as d from cortex.memory_edges group by 1) s""",
        )
        assert degrees["top"] > 10 * degrees["median"]
        crossing = one(
            conn,
            "select count(*) as n from cortex.memory_edges e left join cortex.memory_nodes n "
            "on n.tenant_id = e.tenant_id and n.id = e.target_id where n.id is null",
        )
        assert crossing["n"] == 0
        spread = one(
            conn,
            "select min(last_reinforced_at) as lo, max(last_reinforced_at) as hi, min(weight) as wlo, "
            "max(weight) as whi from cortex.memory_edges",
        )
        assert (spread["hi"] - spread["lo"]).days > 200
        assert spread["wlo"] < 0.4 and spread["whi"] > 0.9


def test_the_smallest_tenant_gets_a_full_top_ten_from_search_memories(graph_db: str) -> None:
    with psycopg.connect(graph_db, autocommit=True) as conn:
        row = conn.execute("select id::text from bench.tenant_plan order by nodes, n desc limit 1").fetchone()
        assert row is not None
        vectors = [r[0] for r in conn.execute("select v::text from bench.queries order by i limit 20")]
        for v in vectors:
            with cortex_db.as_caller(cortex_db.agent_claims(row[0], "luna"), conn) as c:
                out = cortex_db.call(c, "search_memories", query_vector=cortex_db.typed(v, "extensions.vector"))
            assert len(out["results"]) == 10
            assert all(r["rankings"]["vector"] is not None for r in out["results"])


@pytest.mark.slow
def test_the_eval_runs_end_to_end_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval_memory.py"), "--seed", "3", "--size", "tiny", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    report = json.loads(out.read_text())
    for mode in ("text", "vector", "hybrid"):
        overall = report["scores"][mode]["overall"]
        assert overall["n"] > 0 and 0 <= overall["mrr"] <= 1
        assert overall["superseded_in_top5"] == 0
    assert report["indexing"]["still_pending"] == 0
