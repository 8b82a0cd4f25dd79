#!/usr/bin/env python3
"""Consolidation benchmark (issue 10): the wall time of `cortex consolidate run --all` on the memory
graph benchmark's data set, each agent's scan time, and a no-memory-lost check.

usage: bench_consolidation.py generate [--scale S]   build cortex_bench_graph_consolidation with
                                                     sql/bench/generate_graph.sql (bench_graph.generate)
       bench_consolidation.py status [--scale S]     exit 0 when it holds a complete data set of scale S
       bench_consolidation.py run [--limit N] [--rate-limit N] [--json PATH]

Scale 0.1 is the issue's size: 100,000 nodes (10 tenants, the largest 60,000) and 500,000 edges.
Every run works on a fresh file copy of the generated database (cortex_bench_graph_consolidation_run),
so the generated one stays as built and runs compare. Measured per tenant, largest first, as the
CLI does it (cortex.consolidation.service.run_agents, the tenant's system agent):
- before anything, `--duplicates` (2 %) of the active written memories are restated in the copy (same text
  with "(restated)" in the title, same embedding, a relates_to edge, the same entity links), so cluster and
  merge have work;
- each agent's scan() alone (seed 003: at most 5 s), in a read-only session;
- the wall time of run --all (decay, cluster, merge, promote, relations) with the given rate limit
  (default 1,000,000 a minute: the work, not the waiting) and candidate limit;
- no memory lost: every node that existed before still exists, with the same title and body; nodes
  are only added (merged ones); statuses moved only to superseded (merged originals, each with a
  consolidated_from edge from an active merged node) or archived (gc, each with its item).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_graph import generate as generate_graph
from bench_graph import is_ready
from benchlib import ROOT, base_dsn, machine_info, recreate_database, table, with_database

from cortex import db
from cortex.consolidation import service
from cortex.consolidation.agents import Session

BENCH_DB = "cortex_bench_graph_consolidation"
RUN_DB = BENCH_DB + "_run"
RESULTS = ROOT / "bench-results" / "consolidation.json"
AGENTS = ("decay", "cluster", "merge", "promote", "relations")
SCAN_TARGET_S = 5.0

SNAPSHOT = """
select count(*) as nodes,
       count(*) filter (where status = 'active') as active,
       count(*) filter (where status = 'superseded') as superseded,
       count(*) filter (where status = 'archived') as archived,
       md5(string_agg(id::text || E'\\x1f' || title || E'\\x1f' || body, E'\\x1e' order by id)) as content
from cortex.memory_nodes
"""


def bench_dsn() -> str:
    """The generated database (BENCH_CONSOLIDATION_DATABASE_URL, else DATABASE_URL's server)."""
    return os.environ.get("BENCH_CONSOLIDATION_DATABASE_URL") or with_database(base_dsn(), BENCH_DB)


def snapshot(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Counts and a checksum of every node's id, title and body."""
    row = conn.execute(SNAPSHOT).fetchone()
    assert row is not None
    return dict(zip(("nodes", "active", "superseded", "archived", "content"), row, strict=True))


def lost_check(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """What the run did to the nodes that existed before (their ids and content in bench_before)."""
    row = conn.execute(
        """select (select count(*) from bench_before b
                   where not exists (select from cortex.memory_nodes n where n.id = b.id)) as missing,
                  (select count(*) from bench_before b join cortex.memory_nodes n on n.id = b.id
                   where md5(n.title || E'\\x1f' || n.body) <> b.h) as content_changed,
                  (select count(*) from bench_before b join cortex.memory_nodes n on n.id = b.id
                   where n.status = 'superseded' and b.status = 'active'
                     and not exists (select from cortex.memory_edges e join cortex.memory_nodes m
                                     on m.tenant_id = e.tenant_id and m.id = e.source_id and m.status = 'active'
                                     where e.tenant_id = n.tenant_id and e.target_id = n.id
                                       and e.relation = 'consolidated_from')) as superseded_without_merge,
                  (select count(*) from bench_before b join cortex.memory_nodes n on n.id = b.id
                   where n.status = 'archived' and b.status = 'active'
                     and not exists (select from cortex.consolidation_changes c
                                     where c.tenant_id = n.tenant_id and c.node_id = n.id
                                       and c.change = 'node_archived')) as archived_without_item"""
    ).fetchone()
    assert row is not None
    return dict(
        zip(("missing", "content_changed", "superseded_without_merge", "archived_without_item"), row, strict=True)
    )


def plant_duplicates(conn: psycopg.Connection[Any], share: float) -> int:
    """Restatements of `share` of the active written memories (as the owner, in the copy only): the
    same text with " (restated)" added to the title, the same embedding, and the edges the auto-linker
    would have made (relates_to the original, mentions / applies_to its entities), so cluster and
    merge have work at benchmark size (the generator's own relates_to pairs are about 0.7 similar,
    below the cluster threshold)."""
    if share <= 0:
        return 0
    with conn.transaction():
        conn.execute(
            """with picked as (
                 select n.* from cortex.memory_nodes n
                 where n.status = 'active' and n.ref_kind is null and n.key is null and n.embedding is not null
                   and n.kind in ('fact', 'preference', 'decision', 'observation', 'pattern', 'goal')
                   and abs(hashtext(n.id::text)) %% 10000 < %s
               ), copies as (
                 insert into cortex.memory_nodes (tenant_id, kind, title, body, importance, confidence, source_agent,
                                                  visibility, tags, contact_id, embedding, embed_status, link_status,
                                                  metadata)
                 select p.tenant_id, p.kind, left(p.title || ' (restated)', 500), p.body, p.importance, p.confidence,
                        p.source_agent, p.visibility, p.tags, p.contact_id, p.embedding, 'done', 'done',
                        jsonb_build_object('restates', p.id)
                 from picked p
                 returning tenant_id, id, (metadata ->> 'restates')::uuid as original
               )
               insert into cortex.memory_edges (tenant_id, source_id, relation, target_id, weight, created_by)
               select c.tenant_id, c.id, 'relates_to', c.original, 0.99, 'system' from copies c
               union all  -- and the entities the original links to, as the auto-linker would find them
               select c.tenant_id, c.id, e.relation, e.target_id, e.weight, 'system'
               from copies c join cortex.memory_edges e on e.tenant_id = c.tenant_id and e.source_id = c.original
               where e.relation in ('mentions', 'applies_to')""",
            (round(share * 10000),),
        )
        row = conn.execute("select count(*) from cortex.memory_nodes where metadata ? 'restates'").fetchone()
        made = row[0] if row else 0
    return int(made)


def run(args: argparse.Namespace) -> int:
    """Copies the generated database, measures every tenant, checks nothing was lost."""
    source = bench_dsn()
    if not is_ready(source, args.scale):
        print(
            f"bench: {BENCH_DB} holds no complete data set of scale {args.scale}: run generate first", file=sys.stderr
        )
        return 2
    run_dsn = with_database(source, RUN_DB)
    started = time.perf_counter()
    recreate_database(run_dsn, BENCH_DB, template=source.rsplit("/", 1)[-1])
    copy_s = time.perf_counter() - started
    with psycopg.connect(run_dsn, autocommit=True) as conn:
        planted = plant_duplicates(conn, args.duplicates)
        conn.execute("vacuum analyze")
        tenants = conn.execute(
            "select t.id::text, t.slug, (select count(*) from cortex.memory_nodes n where n.tenant_id = t.id)"
            " from cortex.tenants t order by 3 desc"
        ).fetchall()
        conn.execute(
            "create unlogged table public.bench_before as select id, status, md5(title || E'\\x1f' || body) as h"
            " from cortex.memory_nodes"
        )
        conn.execute("create index on public.bench_before (id)")
        before = snapshot(conn)
        machine = machine_info(conn)
    rows: list[dict[str, Any]] = []
    total = 0.0
    for tid, slug, nodes in tenants:
        claims = db.agent_claims(tid, "system")
        scans: dict[str, float] = {}
        with Session(claims, dry_run=True, dsn=run_dsn) as session:
            for name in AGENTS:
                agent = service.make_agent(name, session, limit=args.limit)
                t0 = time.perf_counter()
                agent.scan()
                scans[name] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        with psycopg.connect(run_dsn, autocommit=True) as conn:
            report = service.run_agents(
                claims,
                AGENTS,
                rate_limit=args.rate_limit,
                limit=args.limit,
                conn=conn,
                vault_dir=Path(args.vault) / tid,
            )
        wall = time.perf_counter() - t0
        total += wall
        row = {
            "tenant": slug,
            "nodes": nodes,
            "run_all_s": round(wall, 2),
            "slowest_scan_s": max(scans.values()),
            "scans": scans,
            **{f"{n}_processed": report["agents"][n]["processed"] for n in AGENTS},
            "failed": sum(a["failed"] for a in report["agents"].values()),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    with psycopg.connect(run_dsn, autocommit=True) as conn:
        after = snapshot(conn)
        lost = lost_check(conn)
        items = dict(conn.execute("select agent || ':' || status, count(*) from cortex.consolidation_items group by 1"))
    with psycopg.connect(with_database(source, "postgres"), autocommit=True) as admin:
        admin.execute(f'drop database if exists "{RUN_DB}" with (force)')
    ok = (
        lost["missing"] == 0
        and lost["content_changed"] == 0
        and lost["superseded_without_merge"] == 0
        and lost["archived_without_item"] == 0
        and after["nodes"] >= before["nodes"]
    )
    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "scale": args.scale,
        "rate_limit": args.rate_limit,
        "limit": args.limit,
        "machine": machine,
        "copy_seconds": round(copy_s, 1),
        "planted_duplicates": planted,
        "tenants": rows,
        "run_all_total_s": round(total, 2),
        "slowest_scan_s": max(r["slowest_scan_s"] for r in rows),
        "scan_target_s": SCAN_TARGET_S,
        "before": before,
        "after": after,
        "no_memory_lost": {**lost, "nodes_added": after["nodes"] - before["nodes"], "ok": ok},
        "items": items,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2, default=str))
    columns = [
        ("tenant", "tenant"),
        ("nodes", "nodes"),
        ("run_all_s", "run --all s"),
        ("slowest_scan_s", "slowest scan s"),
        ("decay_processed", "decay"),
        ("cluster_processed", "clusters"),
        ("merge_processed", "merges"),
        ("promote_processed", "promoted"),
        ("relations_processed", "relations"),
        ("failed", "failed"),
    ]
    print(table(rows, columns))
    print(
        f"run --all, all tenants: {total:.1f} s; slowest scan {result['slowest_scan_s']} s "
        f"(target {SCAN_TARGET_S} s); no memory lost: {ok} {result['no_memory_lost']}"
    )
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """generate | status | run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="build the data set (bench_graph's generator)")
    gen.add_argument("--scale", type=float, default=0.1)
    st = sub.add_parser("status", help="exit 0 when the data set of this scale is complete")
    st.add_argument("--scale", type=float, default=0.1)
    rn = sub.add_parser("run", help="measure run --all per tenant on a copy")
    rn.add_argument("--scale", type=float, default=0.1)
    rn.add_argument("--limit", type=int, default=1000, help="candidates per agent and tenant (the CLI's --limit)")
    rn.add_argument("--rate-limit", type=int, default=1_000_000, help="operations per minute")
    rn.add_argument("--vault", default=str(ROOT / "bench-results" / "vault"), help="vault folder of promoted memories")
    rn.add_argument("--json", default=str(RESULTS))
    rn.add_argument(
        "--duplicates",
        type=float,
        default=0.02,
        help="share of active written memories restated before the run (default 0.02)",
    )
    args = parser.parse_args(argv)
    if args.command == "generate":
        seconds = generate_graph(bench_dsn(), args.scale)
        print(f"generated {BENCH_DB} at scale {args.scale} in {seconds:.0f} s")
        return 0
    if args.command == "status":
        return 0 if is_ready(bench_dsn(), args.scale) else 1
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
