#!/usr/bin/env python3
"""Memory graph benchmarks (issue 13): search, traversal, remember and the worker's embedding on
1M nodes and 5M edges across 10 tenants (one holds 60 %, the smallest 1 %).

usage: bench_graph.py generate [--scale S]   drop, recreate and migrate cortex_bench_graph, then load
                                             sql/bench/generate_graph.sql (S times the standard size)
       bench_graph.py status [--scale S]     exit 0 when cortex_bench_graph holds a complete data set of scale S
       bench_graph.py run [options]          measure, write bench-results/graph.json, print markdown tables

Measured (each SQL call in its own transaction as an agent, exactly like cortex.db.as_caller /
PostgREST: `set local role authenticated` + claims, then the call; 1 and 8 clients, each client
its own connection):
- search_memories with a given query vector (no text), in the largest and in the smallest tenant;
  every call of the smallest tenant must return a full top-10 (counted and asserted);
- search_memories with text and vector (the hybrid path);
- traverse_graph depth 3 from random active memories of the largest tenant, that way and also as the
  HTTP edge sends it: the claims and the call in one round trip (cortex.db.call_once);
- over HTTP (`cortex serve`, one process per core, loopback), from wrk (a C load generator, so the
  client takes next to nothing from the cores it shares with the server): POST /api/v1/memories
  on 8 connections (writes/s), and POST /api/v1/memories/search with a text query that the API
  embeds itself, 8 connections (p95);
- the worker's embedding throughput: its sweeps (cortex.queue.worker.run_sweeps) run until the
  nodes written over HTTP are embedded and linked (texts/s, CORTEX_EMBEDDING_BATCH per encode);
- the size of the graph's tables and of each index.

The query vectors are near the generator's cluster centres (bench.queries), so they have real
nearest neighbours. Rows written by a run are removed before and after it (as the owner, only in
cortex_bench_graph). Every loop is bounded by a count and a time limit; all traffic is on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_http import Line, run_wrk, wrk_latency_row
from benchlib import (
    LAT,
    ROOT,
    base_dsn,
    dbname,
    get_meta,
    http_server,
    load_sql,
    machine_info,
    recreate_database,
    run_concurrently,
    set_meta,
    summarise,
    table,
    wait_for_quiet,
    with_database,
)
from memindex import index_all

from cortex import db

GENERATOR = ROOT / "sql" / "bench" / "generate_graph.sql"
RESULTS = ROOT / "bench-results" / "graph.json"
BENCH_DB = "cortex_bench_graph"
HTTP_PORT = 8093
WRITERS = ("luna", "mia", "anna", "jasper")

# Targets from issue 13.
TARGET_SEARCH_SQL_P95_MS = 30.0
TARGET_SEARCH_HTTP_P95_MS = 50.0
TARGET_TRAVERSE_P95_MS = 20.0
TARGET_REMEMBER_PER_S = 500.0


def bench_dsn() -> str:
    """The benchmark database (BENCH_GRAPH_DATABASE_URL, else DATABASE_URL's server with cortex_bench_graph)."""
    return os.environ.get("BENCH_GRAPH_DATABASE_URL") or with_database(base_dsn(), BENCH_DB)


# --- generation -----------------------------------------------------------------------------


def generate(dsn: str, scale: float = 1.0) -> float:
    """Drops and recreates the benchmark database, migrates it and loads the generated graph
    (`scale` times 1M nodes / 5M edges); returns the seconds the load (psql) took."""
    recreate_database(dsn, BENCH_DB)
    seconds = load_sql(dsn, GENERATOR, {"scale": str(scale)})
    set_meta(dsn, {"load_seconds": f"{seconds:.1f}"})
    return seconds


def is_ready(dsn: str, scale: float) -> bool:
    """True when the database holds a complete data set generated at `scale`."""
    meta = get_meta(dsn)
    return meta.get("complete") == "true" and float(meta.get("scale", "nan")) == scale


def reset(dsn: str) -> dict[str, int]:
    """Removes what earlier runs wrote (nodes remembered over HTTP, with their edges) and the access
    log, and folds the graph's change log, so every run starts from the generated graph. Nodes are
    never deleted by the API: the owner declares an erasure for this one transaction, as a tenant's
    erasure does."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("select cortex.begin_erasure('benchmark reset')")
            # Two statements, not one with `or`: each end is an index lookup (an `or` read all 5M edges).
            for end in ("source_id", "target_id"):
                conn.execute(
                    "delete from cortex.memory_edges e using cortex.memory_nodes n where n.metadata ? 'bench_run' "
                    f"and e.tenant_id = n.tenant_id and e.{end} = n.id"
                )
            removed = conn.execute("delete from cortex.memory_nodes where metadata ? 'bench_run'").rowcount
            access = conn.execute("delete from cortex.memory_access").rowcount
        # What pg_cron does every minute in the `cortex` database (it schedules nothing here): a
        # graph version counts the writes not yet folded, and a run leaves thousands.
        conn.execute("select cortex.fold_graph_changes()")
        conn.execute("vacuum (analyze) cortex.graph_changes")
        if removed:
            conn.execute("vacuum (analyze) cortex.memory_nodes")
            conn.execute("vacuum (analyze) cortex.memory_edges")
    return {"nodes_removed": removed, "access_rows_removed": access}


# --- data for the measurements ---------------------------------------------------------------


def tenants(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """The tenants, largest first, with their node counts and a writer's API key."""
    rows = conn.execute(
        "select t.id::text, t.slug, t.nodes, k.key from bench.tenant_plan t "
        "join bench.agent_keys k on k.tenant_id = t.id and k.agent = 'luna' order by t.nodes desc"
    ).fetchall()
    return [{"id": r[0], "slug": r[1], "nodes": r[2], "key": r[3]} for r in rows]


def queries(conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
    """(vector literal, text) of every prepared query."""
    return [(str(v), str(t)) for v, t in conn.execute("select v::text, text from bench.queries order by i")]


def start_nodes(conn: psycopg.Connection[Any], tenant_id: str, count: int) -> list[str]:
    """Random active, shared memories of a tenant (traversal starts)."""
    conn.execute("select setseed(0.42)")
    return [
        str(r[0])
        for r in conn.execute(
            "select id from cortex.memory_nodes where tenant_id = %s and status = 'active' and visibility = 'shared' "
            "and ref_kind is distinct from 'agent' order by random() limit %s",
            (tenant_id, count),
        )
    ]


def dataset_info(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Counts per tenant, node kinds, edge relations, and the sizes of tables and indexes."""
    per_tenant = [
        {"tenant": slug, "nodes": n, "share_pct": round(100.0 * n / max(1, total), 2), "edges": e}
        for slug, n, total, e in conn.execute("""
            select t.slug, count(n.*)::int, sum(count(n.*)) over ()::int,
                   (select count(*) from cortex.memory_edges e where e.tenant_id = t.id)::int
            from cortex.tenants t left join cortex.memory_nodes n on n.tenant_id = t.id
            group by t.id, t.slug order by 2 desc""")
    ]
    kinds = dict(conn.execute("select kind, count(*)::int from cortex.memory_nodes group by 1 order by 2 desc"))
    relations = dict(conn.execute("select relation, count(*)::int from cortex.memory_edges group by 1 order by 2 desc"))
    return {"tenants": per_tenant, "kinds": kinds, "relations": relations, "meta": get_meta_conn(conn)}


def get_meta_conn(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """bench.meta as a dict, on an open connection."""
    return {str(k): str(v) for k, v in conn.execute("select key, value from bench.meta")}


def sizes(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """Heap (with TOAST) and index sizes of the graph's tables, in MB."""
    rows = conn.execute("""
        select c.relname, 'table' as what, pg_table_size(c.oid) as bytes
        from pg_class c join pg_namespace s on s.oid = c.relnamespace
        where s.nspname = 'cortex' and c.relname in ('memory_nodes', 'memory_edges', 'memory_access', 'graph_changes')
        union all
        select i.relname, 'index on ' || c.relname, pg_relation_size(i.oid)
        from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class c on c.oid = x.indrelid
        join pg_namespace s on s.oid = c.relnamespace
        where s.nspname = 'cortex' and c.relname in ('memory_nodes', 'memory_edges')
        order by 3 desc""").fetchall()
    return [{"relation": r[0], "kind": r[1], "mb": round(r[2] / 1024 / 1024, 1)} for r in rows]


# --- SQL measurements ---------------------------------------------------------------------------


def sql_series(
    dsn: str,
    label: str,
    clients: int,
    samples: int,
    duration: float,
    tenant_id: str,
    function: str,
    args_for: Callable[[int, random.Random], dict[str, Any]],
    check: Callable[[Any], str | None] | None = None,
    one_trip: bool = False,
) -> dict[str, Any]:
    """`samples` calls (or `duration` seconds) of `function` by `clients` threads, each call in its
    own transaction as one of the tenant's writers; `check` returns a problem with a result or None.
    `one_trip`: the claims and the call in one round trip, as the HTTP edge sends them
    (`cortex.db.call_once`), instead of BEGIN, the claims, the call and COMMIT."""
    conns = [psycopg.connect(dsn, autocommit=True) for _ in range(clients)]
    problems: list[str] = []
    sizes_seen: list[int] = []

    def make_worker(idx: int) -> Callable[[int], None]:
        rng = random.Random(idx * 7919 + 1)
        conn = conns[idx]

        def op(i: int) -> None:
            args = args_for(i * clients + idx, rng)
            claims = db.agent_claims(tenant_id, WRITERS[i % len(WRITERS)])
            if one_trip:
                out = db.call_once(conn, claims, function, **args)
            else:
                with db.as_caller(claims, conn) as c:
                    out = db.call(c, function, **args)
            if check is not None:
                problem = check(out)
                if problem:
                    problems.append(problem)
            if isinstance(out, dict):
                for key in ("results", "nodes"):
                    if isinstance(out.get(key), list):
                        sizes_seen.append(len(out[key]))

        return op

    try:
        for w in range(min(20, samples)):  # warm the caches, unmeasured
            make_worker(0)(w)
        problems.clear()
        sizes_seen.clear()
        res = run_concurrently(clients, duration, samples, make_worker)
    finally:
        for c in conns:
            c.close()
    row = {"series": label, "clients": clients, **summarise(res.latencies, res.wall), "errors": len(res.errors)}
    if res.errors:
        row["error_samples"] = res.errors[:3]
    if sizes_seen:
        row["results_min"] = min(sizes_seen)
        row["results_mean"] = round(sum(sizes_seen) / len(sizes_seen), 1)
    row["problems"] = len(problems)
    if problems:
        row["problem_samples"] = problems[:3]
    print(
        f"  {label}, {clients} client(s): p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms, "
        f"{row['throughput_per_s']}/s, errors {row['errors']}, problems {row['problems']}",
        flush=True,
    )
    return row


def full_top10(out: Any) -> str | None:
    """A search result with fewer than 10 results is a problem (the smallest tenant's guarantee)."""
    n = len(out.get("results", [])) if isinstance(out, dict) else 0
    return None if n == 10 else f"{n} results instead of 10"


def bench_sql(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    """search_memories (vector; text + vector) in the largest and smallest tenant, traverse_graph depth 3."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ts = tenants(conn)
        qs = queries(conn)
        largest, smallest = ts[0], ts[-1]
        starts = start_nodes(conn, largest["id"], 2000)

    def vector_args(i: int, rng: random.Random) -> dict[str, Any]:
        return {"query_vector": db.typed(qs[i % len(qs)][0], "extensions.vector"), "limit": 10}

    def hybrid_args(i: int, rng: random.Random) -> dict[str, Any]:
        v, text = qs[i % len(qs)]
        return {"query": text, "query_vector": db.typed(v, "extensions.vector"), "limit": 10}

    def traverse_args(i: int, rng: random.Random) -> dict[str, Any]:
        return {"start_ids": db.typed([starts[i % len(starts)]], "uuid[]"), "depth": 3}

    rows: list[dict[str, Any]] = []
    for clients in (1, args.clients):
        for tenant, which in ((largest, "largest"), (smallest, "smallest")):
            label = f"search_memories, query vector, {which} tenant ({tenant['slug']}, {tenant['nodes']:,} nodes)"
            rows.append(
                sql_series(
                    dsn,
                    label,
                    clients,
                    args.samples,
                    args.duration,
                    tenant["id"],
                    "search_memories",
                    vector_args,
                    full_top10 if which == "smallest" else None,
                )
            )
        label = f"search_memories, text + vector, largest tenant ({largest['slug']})"
        rows.append(
            sql_series(dsn, label, clients, args.samples, args.duration, largest["id"], "search_memories", hybrid_args)
        )
        label = f"traverse_graph depth 3, largest tenant ({largest['slug']})"
        rows.append(
            sql_series(dsn, label, clients, args.samples, args.duration, largest["id"], "traverse_graph", traverse_args)
        )
        rows.append(
            sql_series(
                dsn, label + ", one round trip", clients, args.samples, args.duration, largest["id"],
                "traverse_graph", traverse_args, one_trip=True,
            )
        )  # fmt: skip
    return {"rows": rows, "largest": largest["slug"], "smallest": smallest["slug"]}


# --- HTTP measurements --------------------------------------------------------------------------


def api_command(port: int) -> list[str]:
    """`cortex serve` on the loopback (one process per core, the model loaded in each at start)."""
    return [str(ROOT / ".venv" / "bin" / "cortex"), "serve", "--host", "127.0.0.1", "--port", str(port)]


@contextmanager
def api_server(dsn: str, log_path: Path) -> Iterator[str]:
    """The HTTP API on the benchmark database (this checkout's code first on the path)."""
    env = {**os.environ, "DATABASE_URL": dsn, "PYTHONPATH": str(ROOT / "functions")}
    env.pop("ANTHROPIC_API_KEY", None)
    with http_server(api_command(HTTP_PORT), env, f"http://127.0.0.1:{HTTP_PORT}", log_path, timeout=180) as base:
        yield base


TOPICS = [
    "prefers email over phone calls",
    "asked for a quote for {n} ceramic mugs",
    "renewal is due in {m}",
    "reported a damaged shipment on order #{n}",
    "wants invoices split across two cost centres",
    "is moving to a new warehouse in Rotterdam",
    "budget is frozen until the next quarter",
    "compared our prices with a competitor",
    "needs the onboarding call moved to Friday",
]
MONTHS = ["January", "March", "May", "July", "September", "November"]


def remember_body(run: str, i: int | str, rng: random.Random) -> dict[str, Any]:
    """A realistic, unique memory (a fact or a preference about a customer)."""
    topic = rng.choice(TOPICS).format(n=rng.randint(10, 9999), m=rng.choice(MONTHS))
    name = rng.choice(["Maria Lopez", "John Smith", "Priya Khan", "Tom Weber", "Anna Berg", "Luis Costa"])
    return {
        "kind": rng.choice(["fact", "fact", "preference", "observation"]),
        "title": f"{name} {topic}",
        "body": f"Noted on call {i} of run {run}: {name} {topic}.",
        "tags": ["bench"],
        "metadata": {"bench_run": run},
    }


def wrk_series(base: str, series: str, lines: list[Line], args: argparse.Namespace, run_id: str) -> dict[str, Any]:
    """One HTTP series from wrk (a C load generator: the client takes next to no CPU from the
    server's cores), `args.clients` connections, after an unmeasured warm-up."""
    wrk_args = argparse.Namespace(threads=2, connections=args.clients, duration=int(args.http_duration))
    name = "graph-" + series.split()[1].strip("/").replace("/", "-")
    r = run_wrk(base, lines, name, wrk_args, run_id, warmup=args.warmup)
    return {"series": series, "clients": args.clients, **wrk_latency_row(r)}


def bench_http(dsn: str, args: argparse.Namespace) -> dict[str, Any]:
    """remember (writes/s) and text search embedded in the API process (p95), `args.clients`
    connections each, from wrk."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        ts = tenants(conn)
        texts = [t for _, t in queries(conn)]
    largest = ts[0]
    run_id = uuid.uuid4().hex[:8]
    auth = f"Bearer {largest['key']}"
    rng = random.Random(100)
    # "__UNIQ__" becomes a value unique in the run (bench_http.lua): every remember is a new memory.
    remember_lines: list[Line] = [
        ("POST", "/api/v1/memories", auth, json.dumps(remember_body(run_id, "__UNIQ__", rng))) for _ in range(2000)
    ]
    search_lines: list[Line] = [("POST", "/api/v1/memories/search", auth, json.dumps({"query": t})) for t in texts]
    out: dict[str, Any] = {}
    with api_server(dsn, ROOT / "bench-results" / "api-graph.log") as base:
        out["remember_http"] = wrk_series(base, "POST /api/v1/memories", remember_lines, args, run_id)
        print(f"  remember over HTTP: {out['remember_http']['throughput_per_s']}/s", flush=True)
        out["search_http"] = wrk_series(
            base, "POST /api/v1/memories/search (text, embedded by the API)", search_lines, args, run_id + "s"
        )
        print(f"  text search over HTTP: p95 {out['search_http']['p95_ms']} ms", flush=True)
    return out


def bench_worker(dsn: str) -> dict[str, Any]:
    """The worker's sweeps on what the HTTP run wrote: texts embedded per second (and links made)."""
    from cortex.config import get_settings

    os.environ["DATABASE_URL"] = dsn
    get_settings.cache_clear()
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select count(*) from cortex.memory_nodes where embed_status = 'pending' or link_status = 'pending'"
        ).fetchone()
    pending_before = int(row[0]) if row else 0
    result = index_all(dsn, worker_id="bench-graph", max_seconds=300)
    result["pending_before"] = pending_before
    result["batch"] = get_settings().embedding_batch
    result["texts_per_s"] = round(result["embedded"] / result["seconds"], 1) if result["seconds"] else None
    print(f"  worker: {result['embedded']} texts embedded in {result['seconds']} s ({result['texts_per_s']}/s)")
    return result


# --- report -------------------------------------------------------------------------------------


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 13 against what was measured."""
    rows: list[dict[str, Any]] = []
    sql_rows = results.get("sql", {}).get("rows", [])
    for r in sql_rows:
        if r["series"].startswith("search_memories, query vector") and r["clients"] == 1:
            rows.append(
                {
                    "target": f"{r['series']}: p95 <= {TARGET_SEARCH_SQL_P95_MS} ms",
                    "measured": f"{r['p95_ms']} ms",
                    "met": r["p95_ms"] <= TARGET_SEARCH_SQL_P95_MS and r["errors"] == 0,
                }
            )
        if "smallest" in r["series"]:
            rows.append(
                {
                    "target": f"smallest tenant gets a full top-10 ({r['clients']} client(s))",
                    "measured": f"{r['problems']} short of {r['n']} calls (min {r.get('results_min')})",
                    "met": r["problems"] == 0 and r["n"] > 0,
                }
            )
        if r["series"].startswith("traverse_graph") and r["clients"] == 1:
            rows.append(
                {
                    "target": f"traverse_graph depth 3{', one round trip' if 'round trip' in r['series'] else ''}: "
                    f"p95 <= {TARGET_TRAVERSE_P95_MS} ms",
                    "measured": f"{r['p95_ms']} ms",
                    "met": r["p95_ms"] <= TARGET_TRAVERSE_P95_MS and r["errors"] == 0,
                }
            )
    http = results.get("http", {})
    if "search_http" in http:
        s = http["search_http"]
        rows.append(
            {
                "target": f"text search over HTTP, 8 clients: p95 <= {TARGET_SEARCH_HTTP_P95_MS} ms",
                "measured": f"{s['p95_ms']} ms",
                "met": s["p95_ms"] <= TARGET_SEARCH_HTTP_P95_MS and s["errors"] == 0,
            }
        )
    if "remember_http" in http:
        s = http["remember_http"]
        rows.append(
            {
                "target": f"remember over HTTP, 8 clients: >= {TARGET_REMEMBER_PER_S}/s",
                "measured": f"{s['throughput_per_s']}/s",
                "met": s["throughput_per_s"] >= TARGET_REMEMBER_PER_S and s["errors"] == 0,
            }
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    """The tables for docs/benchmarks.md."""
    m = results["machine"]
    d = results["dataset"]
    meta = d["meta"]
    parts = [
        f"### Memory graph, scale {meta.get('scale')} ({results['date']}, {m['cpus']} cores {m['cpu_model']}, "
        f"{m['memory_gib']} GiB, load average at start {m['load_average_at_start'][0]})",
        "",
        f"Data set: {int(meta.get('nodes', 0)):,} nodes, {int(meta.get('edges', 0)):,} edges; load "
        f"{meta.get('load_seconds', '?')} s, HNSW build {meta.get('hnsw_build_seconds', '?')} s.",
        "",
        table(d["tenants"], [("tenant", "tenant"), ("nodes", "nodes"), ("share_pct", "share %"), ("edges", "edges")]),
        "",
        "**In SQL** (each call its own transaction as an agent):",
        "",
        table(
            results.get("sql", {}).get("rows", []),
            [("series", "series"), ("clients", "clients"), *LAT, ("results_min", "min results"), ("errors", "errors")],
        ),
    ]
    http = results.get("http", {})
    if http:
        parts += ["", "**Over HTTP** (`cortex serve`, loopback, keep-alive):", ""]
        parts.append(
            table(
                [http[k] for k in ("remember_http", "search_http") if k in http],
                [("series", "series"), ("clients", "clients"), *LAT, ("errors", "errors")],
            )
        )
    if "worker" in results:
        w = results["worker"]
        parts += [
            "",
            f"**Worker**: {w['embedded']} texts embedded and linked in {w['seconds']} s = "
            f"**{w['texts_per_s']} texts/s** (batch {w['batch']}, {w['rounds']} sweep rounds, "
            f"{w['still_pending']} left pending).",
        ]
    parts += [
        "",
        "**Sizes** (MB):",
        "",
        table(results["sizes"], [("relation", "relation"), ("kind", "what"), ("mb", "MB")]),
    ]
    parts += ["", "**Targets**:", ""]
    parts.append(
        table(
            [{**t, "met": "met" if t["met"] else "**missed**"} for t in results["targets"]],
            [("target", "target"), ("measured", "measured"), ("met", "result")],
        )
    )
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    """Runs every measurement and writes the JSON results."""
    dsn = bench_dsn()
    if get_meta(dsn).get("complete") != "true":
        print(f"{dbname(dsn)} has no complete data set: run scripts/bench graph --regenerate", file=sys.stderr)
        return 2
    wait_for_quiet(args.max_load, args.max_wait)
    reset_info = reset(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        results: dict[str, Any] = {
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": machine_info(conn),
            "dataset": dataset_info(conn),
            "reset": reset_info,
        }
    if args.sql:
        print("search_memories and traverse_graph in SQL", flush=True)
        results["sql"] = bench_sql(dsn, args)
    if args.http:
        print("remember and text search over HTTP", flush=True)
        results["http"] = bench_http(dsn, args)
        if args.worker:
            print("the worker's embedding of what was remembered", flush=True)
            results["worker"] = bench_worker(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        results["sizes"] = sizes(conn)
    results["targets"] = targets(results)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["reset_after"] = reset(dsn)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print()
    print(markdown(results))
    print(f"\nresults written to {out}")
    short = [r for r in results.get("sql", {}).get("rows", []) if "smallest" in r["series"] and r["problems"]]
    if short:
        print("the smallest tenant did not always get a full top-10", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="drop, recreate, migrate and load cortex_bench_graph")
    g.add_argument("--scale", type=float, default=1.0, help="times 1M nodes / 5M edges (default 1; 0.01 smoke)")
    s = sub.add_parser("status", help="exit 0 when cortex_bench_graph is complete at this scale")
    s.add_argument("--scale", type=float, default=1.0)
    r = sub.add_parser("run", help="run the benchmarks")
    r.add_argument("--samples", type=int, default=1000, help="calls per SQL series (default 1000)")
    r.add_argument("--duration", type=float, default=30.0, help="time limit per series in seconds (default 30)")
    r.add_argument("--http-duration", type=float, default=30.0, help="seconds of wrk per HTTP series (default 30)")
    r.add_argument("--warmup", type=int, default=5, help="unmeasured seconds of wrk before each series (default 5)")
    r.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    r.add_argument("--max-load", type=float, default=1.5, help="start when the 1-min load average is below this")
    r.add_argument("--max-wait", type=float, default=900.0, help="wait at most this long for --max-load (s)")
    r.add_argument("--no-http", dest="http", action="store_false", help="skip HTTP and the worker")
    r.add_argument("--no-sql", dest="sql", action="store_false", help="skip the SQL series")
    r.add_argument("--no-worker", dest="worker", action="store_false", help="skip the worker's embedding run")
    r.add_argument("--out", default=str(RESULTS), help="where to write the JSON results")
    args = parser.parse_args(argv)
    if args.command == "generate":
        seconds = generate(bench_dsn(), args.scale)
        print(f"{dbname(bench_dsn())} generated at scale {args.scale} in {seconds:.0f} s")
        return 0
    if args.command == "status":
        return 0 if is_ready(bench_dsn(), args.scale) else 1
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
