#!/usr/bin/env python3
"""Core benchmarks (issue 3): get_context, search_contacts and log_interaction on a generated data set.

usage: bench_core.py generate            drop, recreate and migrate cortex_bench, then load sql/bench/generate_core.sql
       bench_core.py status              exit 0 when cortex_bench holds a complete data set, 1 otherwise
       bench_core.py run [options]       measure, write bench-results/core.json and print markdown tables
       bench_core.py pgbench [options]   get_context level 1 in SQL with pgbench in the edge's transaction shape
                                         (sql/bench/get_context_level1_edge.pgbench) and PostgREST's
                                         (sql/bench/get_context_level1.pgbench), each beside the same
                                         transaction without the call; write bench-results/get_context_pgbench.json

The base connection comes from DATABASE_URL (scripts/bench reads .env.local); the benchmark database
is the same server with the database name cortex_bench (or BENCH_DATABASE_URL). Every loop is
bounded by a count and a time limit, and all traffic stays on 127.0.0.1.

Besides the shipped code, two what-ifs are measured so docs/benchmarks.md can say what would meet
a missed target: a stale get_context with synchronous_commit off in the transaction, and the
HTTP API with two gunicorn processes (WORKERS=2). No server setting is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    CONTEXT_PGBENCH_SHAPES,
    LAT,
    ROOT,
    base_dsn,
    dbname,
    http_server,
    is_complete,
    load_sql,
    machine_info,
    pgbench,
    recreate_database,
    run_concurrently,
    set_meta,
    summarise,
    table,
    use_bench_settings,
    wait_for_quiet,
    with_database,
)

from cortex import db, llm
from cortex.config import get_settings
from cortex.interactions import service as interactions

GENERATOR = ROOT / "sql" / "bench" / "generate_core.sql"
PGBENCH_TARGETS = ROOT / "sql" / "bench" / "get_context_targets.sql"
PGBENCH_RESULTS = ROOT / "bench-results" / "get_context_pgbench.json"
RESULTS = ROOT / "bench-results" / "core.json"
BENCH_DB = "cortex_bench"
WRITERS = ("luna", "mia", "anna", "jasper")
HTTP_PORT = 8089

# Targets from issue 3.
TARGET_CONTEXT_SQL_P95_MS = 5.0
TARGET_CONTEXT_HTTP_P95_MS = 15.0
TARGET_LOG_OPS_PER_S = 200.0
TARGET_SEARCH_P95_MS = 20.0


# --- connections ----------------------------------------------------------------------------


def bench_dsn() -> str:
    """The benchmark database (BENCH_DATABASE_URL, else DATABASE_URL's server with cortex_bench)."""
    return os.environ.get("BENCH_DATABASE_URL") or with_database(base_dsn(), BENCH_DB)


# --- generation -----------------------------------------------------------------------------


def generate(dsn: str, scale: float = 1.0) -> float:
    """Drops and recreates the benchmark database, migrates it and loads the generated data set
    (`scale` times the standard size); returns the seconds the load (psql) took."""
    recreate_database(dsn, BENCH_DB)
    seconds = load_sql(dsn, GENERATOR, {"scale": str(scale)})
    set_meta(dsn, {"load_seconds": f"{seconds:.1f}"})
    return seconds


def reset(dsn: str) -> dict[str, int]:
    """Puts the data set back to its generated state between runs: removes what earlier
    log_interaction runs appended (with their usage rows and counters), empties the job queue,
    and makes the generated contexts fresh again (they go stale after 24 h by design)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(
                "create temp table touched on commit drop as select distinct tenant_id, contact_id "
                "from cortex.interactions where metadata ? 'bench'"
            )
            conn.execute(
                "delete from cortex.token_usage u using cortex.interactions i "
                "where i.metadata ? 'bench' and u.tenant_id = i.tenant_id and u.interaction_id = i.id"
            )
            # The log and the handoffs are append-only: erasing the run's rows is declared (owner only).
            conn.execute("select cortex.begin_erasure('benchmark reset')")
            removed = conn.execute("delete from cortex.interactions where metadata ? 'bench'").rowcount
            conn.execute("""
                update cortex.contacts c set interaction_count = a.n, first_touch_at = a.first_at,
                       last_touch_at = a.last_at, last_touch_agent = a.last_agent
                from touched t
                cross join lateral (
                  select count(*)::int as n, min(i.created_at) as first_at, max(i.created_at) as last_at,
                         (array_agg(i.agent order by i.created_at desc))[1] as last_agent
                  from cortex.interactions i where i.tenant_id = t.tenant_id and i.contact_id = t.contact_id) a
                where c.tenant_id = t.tenant_id and c.id = t.contact_id""")
            jobs = conn.execute("delete from cortex.jobs").rowcount
            conn.execute("delete from cortex.alerts")
            freshened = conn.execute("""
                update cortex.contact_context x
                set generated_at = now() - random() * interval '6 hours', stale_since = null,
                    interaction_count_at_generation = c.interaction_count
                from cortex.contacts c
                where c.tenant_id = x.tenant_id and c.id = x.contact_id
                  and (x.generated_at < now() - interval '12 hours' or x.stale_since is not null
                       or x.interaction_count_at_generation <> c.interaction_count)""").rowcount
        if removed:
            conn.execute("vacuum (analyze) cortex.interactions")
            conn.execute("vacuum (analyze) cortex.contacts")
        if freshened:
            conn.execute("vacuum (analyze) cortex.contact_context")
        conn.execute("vacuum (analyze) cortex.jobs")
    return {"interactions_removed": removed, "jobs_removed": jobs, "contexts_freshened": freshened}


# --- statistics -----------------------------------------------------------------------------


# --- samples --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A contact to read or write, with its tenant."""

    tenant_id: str
    contact_id: str


def pick_contacts(conn: psycopg.Connection[Any], fresh: bool, count: int, seed: float) -> list[Target]:
    """Random contacts whose context is fresh (generated, current) or missing (stale: the first read
    serves a stand-in built from the log and queues a refresh)."""
    conn.execute("select setseed(%s)", (seed,))
    if fresh:
        query = """
            select c.tenant_id::text, c.id::text from cortex.contacts c
            join cortex.contact_context x on x.tenant_id = c.tenant_id and x.contact_id = c.id
            where x.stale_since is null and x.interaction_count_at_generation = c.interaction_count
              and x.generated_at > now() - interval '20 hours'
            order by random() limit %s"""
    else:
        query = """
            select c.tenant_id::text, c.id::text from cortex.contacts c
            where c.interaction_count > 0 and not exists (
              select from cortex.contact_context x where x.tenant_id = c.tenant_id and x.contact_id = c.id)
            order by random() limit %s"""
    return [Target(t, c) for t, c in conn.execute(query, (count,)).fetchall()]


def claims_for(target: Target, i: int) -> dict[str, str]:
    """Claims of one of the tenant's writing agents (rotating)."""
    return db.agent_claims(target.tenant_id, WRITERS[i % len(WRITERS)])


# --- get_context in SQL -----------------------------------------------------------------------


def _context_series(
    conn: psycopg.Connection[Any], chunk: list[Target], level: int, warmup: int, fresh: bool, pre: str | None
) -> dict[str, Any]:
    """One measured series of get_context calls on `chunk` (the first `warmup` calls unmeasured);
    `pre` is a statement run in each transaction before the call (what-if settings)."""
    total: list[float] = []
    inner: list[float] = []
    mismatched = 0
    queued = 0
    started = time.perf_counter()
    for i, t in enumerate(chunk):
        if i == warmup:
            total.clear()
            inner.clear()
            mismatched = queued = 0
            started = time.perf_counter()
        t0 = time.perf_counter()
        with db.as_caller(claims_for(t, i), conn) as c:
            if pre:
                c.execute(pre)
            t1 = time.perf_counter()
            out = db.call(c, "get_context", contact_id=t.contact_id, level=level)
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        total.append(t3 - t0)
        inner.append(t2 - t1)
        if out["level"] != level or out["is_stale"] is fresh:
            mismatched += 1
        queued += bool(out.get("refresh_queued"))
    wall = time.perf_counter() - started
    fn = summarise(inner, wall)
    return {
        **summarise(total, wall),
        "select_only_p50_ms": fn["p50_ms"],
        "select_only_p95_ms": fn["p95_ms"],
        "unexpected_staleness": mismatched,
        "refresh_queued": queued,
    }


def bench_context_sql(dsn: str, samples: int, warmup: int) -> list[dict[str, Any]]:
    """get_context at levels 0-3, fresh and stale contexts, one client, each call in its own
    transaction acting as the agent (set local role authenticated + claims, as cortex.db.as_caller).
    A last series repeats stale level 1 with synchronous_commit off in the transaction (what-if)."""
    rows: list[dict[str, Any]] = []
    size = samples + warmup
    with psycopg.connect(dsn, autocommit=True) as conn:
        pools = {True: pick_contacts(conn, True, 4 * size, 0.11), False: pick_contacts(conn, False, 5 * size, 0.12)}
        series: list[tuple[bool, int, str | None, str]] = [(True, lv, None, "fresh") for lv in range(4)]
        series += [(False, lv, None, "stale (none generated)") for lv in range(4)]
        series.append((False, 1, "set local synchronous_commit = off", "stale, what-if: synchronous_commit off"))
        for n, (fresh, level, pre, label) in enumerate(series):
            pool = pools[fresh]
            k = n % 4 if fresh else n - 4
            row = {
                "level": level,
                "context": label,
                **_context_series(conn, pool[k * size : (k + 1) * size], level, warmup, fresh, pre),
            }
            rows.append(row)
            print(
                f"  get_context sql level={level} {label}: p50 {row['p50_ms']} ms, "
                f"p95 {row['p95_ms']} ms, {row['throughput_per_s']}/s",
                flush=True,
            )
    return rows


# --- search_contacts in SQL -------------------------------------------------------------------


def _misspell(word: str, rng: random.Random) -> str:
    """One typo: swap two neighbouring letters, drop one, or double one."""
    if len(word) < 4:
        return word
    i = rng.randrange(1, len(word) - 2)
    kind = rng.randrange(3)
    if kind == 0:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == 1:
        return word[:i] + word[i + 1 :]
    return word[:i] + word[i] + word[i:]


def search_cases(
    conn: psycopg.Connection[Any], tenant_id: str, per_kind: int, rng: random.Random
) -> dict[str, list[dict[str, Any]]]:
    """Search arguments drawn from the tenant's real contacts: misspelt names, company and email
    fragments, stage and tag lists, and a search within a stage."""
    conn.execute("select setseed(0.31)")
    people = conn.execute(
        "select name, coalesce(company_name, ''), email from cortex.contacts where tenant_id = %s "
        "order by random() limit %s",
        (tenant_id, per_kind),
    ).fetchall()
    tags = [
        r[0]
        for r in conn.execute(
            "select distinct unnest(tags) from cortex.contacts where tenant_id = %s", (tenant_id,)
        ).fetchall()
    ]
    stages = ["prospect", "qualified", "opportunity", "customer", "churning", "lost", "recovered"]
    cases: dict[str, list[dict[str, Any]]] = {
        k: []
        for k in ("misspelt name", "company fragment", "email fragment", "stage list", "tag list", "stage + search")
    }
    for name, company, email in people:
        first, last = name.split(" ", 1)
        cases["misspelt name"].append({"search": f"{first} {_misspell(last, rng)}", "_expect": name})
        word = (company.split(" ")[0] if company else last).lower()
        cases["company fragment"].append({"search": word[: rng.randint(4, max(4, len(word)))]})
        local, domain = email.split("@", 1)
        cases["email fragment"].append({"search": rng.choice([local.rsplit(".", 1)[0], domain.split(".")[0]])})
        cases["stage list"].append({"stage": rng.choice(stages)})
        cases["tag list"].append({"tag": rng.choice(tags)})
        cases["stage + search"].append({"stage": rng.choice(stages), "search": _misspell(last, rng)})
    return cases


def call_function(conn: psycopg.Connection[Any], schema: str, function: str, **args: Any) -> Any:
    """Like cortex.db.call, for a function in another schema (the what-if copies)."""
    query = sql.SQL("select {}.{}({})").format(
        sql.Identifier(schema),
        sql.Identifier(function),
        sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in args),
    )
    row = conn.execute(query, args).fetchone()
    return row[0] if row else None


def _search_series(
    conn: psycopg.Connection[Any],
    tenant_id: str,
    schema: str,
    kind: str,
    args_list: list[dict[str, Any]],
    warmup: int,
    max_seconds: float,
) -> dict[str, Any]:
    """One measured series of searches: every case in args_list, or as many as fit in max_seconds."""
    times: list[float] = []
    sizes: list[int] = []
    hits = 0
    started = time.perf_counter()
    for i, args in enumerate(args_list):
        if i == warmup:
            times.clear()
            sizes.clear()
            hits = 0
            started = time.perf_counter()
        elif i > warmup and time.perf_counter() - started > max_seconds:
            break
        expect = args.get("_expect")
        call_args = {k: v for k, v in args.items() if not k.startswith("_")}
        t0 = time.perf_counter()
        with db.as_caller(db.agent_claims(tenant_id, WRITERS[i % 4]), conn) as c:
            out = call_function(c, schema, "search_contacts", **call_args)
        times.append(time.perf_counter() - t0)
        sizes.append(len(out["items"]))
        if expect is not None and out["items"] and out["items"][0]["name"] == expect:
            hits += 1
    row: dict[str, Any] = {
        "kind": kind,
        **summarise(times, time.perf_counter() - started),
        "mean_results": round(sum(sizes) / len(sizes), 1),
        "_times": times,
    }
    if kind == "misspelt name":
        row["top_hit_is_intended_name"] = round(hits / len(times), 3)
    return row


def bench_search_sql(dsn: str, per_kind: int, warmup: int, max_seconds: float) -> tuple[str, list[dict[str, Any]]]:
    """search_contacts in the biggest tenant, one client; returns the tenant's slug and a row per kind."""
    rows: list[dict[str, Any]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            "select t.id::text, t.slug from cortex.tenants t join cortex.contacts c "
            "on c.tenant_id = t.id group by 1, 2 order by count(*) desc limit 1"
        ).fetchone()
        assert found is not None
        tenant_id, slug = found
        cases = search_cases(conn, tenant_id, per_kind + warmup, random.Random(3))
        variant = "as shipped"
        everything: list[float] = []
        for kind, args_list in cases.items():
            row = {
                "variant": variant,
                **_search_series(conn, tenant_id, "public", kind, args_list, warmup, max_seconds),
            }
            everything.extend(row.pop("_times"))
            rows.append(row)
            print(f"  search_contacts {kind}: p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms", flush=True)
        rows.append({"variant": variant, "kind": "all kinds", **summarise(everything, sum(everything))})
    return slug, rows


# --- log_interaction ------------------------------------------------------------------------

_GREETINGS = ("Hi {n},", "Hello {n},", "Dear {n},", "Good morning {n},")
_SENTENCES = (
    "Thanks for the quick reply yesterday, it helped a lot.",
    "We received the shipment for order #{o} but two boxes were damaged in transit.",
    "Could you send us a quote for {q} units with the volume discount we discussed?",
    "Our finance team noticed that invoice INV-{o} was charged twice this month.",
    "I am really frustrated that the delivery is late again, this is the third time.",
    "The new dashboard looks great and the team is already using it every day.",
    "We are considering moving the rest of the company to the enterprise plan next quarter.",
    "Can we schedule a call on Tuesday or Wednesday afternoon to go through the contract?",
    "Please cancel our subscription at the end of the billing period unless the pricing changes.",
    "We need single sign-on before we can roll this out to more users.",
    "I have attached the security questionnaire our IT department asked us to send.",
    "The refund for order #{o} has not arrived on our account yet.",
    "Our procurement team approved the budget, so we are ready to move forward.",
    "One of our partners asked whether you also ship to Australia and Japan.",
    "The integration with our CRM stopped syncing contacts after the last update.",
    "We would like to extend the trial by two weeks to finish the evaluation.",
    "Happy to share our usage numbers if that helps you prepare the proposal.",
    "Let me know if you need anything else from our side before Friday.",
)
_SIGNATURES = ("Best regards,\n{n}", "Thanks,\n{n}", "Kind regards,\n{n}\nHead of Operations")
_TYPES = ("email_received", "email_received", "email_sent", "ticket_opened", "call", "note", "order_placed")


def email_body(rng: random.Random) -> tuple[str, str]:
    """A realistic email (subject, body) of 300-2000 characters."""
    target = rng.randint(300, 2000)
    name = rng.choice(("John", "Maria", "Aisha", "Lukas", "Priya", "Kenji"))
    parts = [rng.choice(_GREETINGS).format(n=name), ""]
    while sum(len(p) + 1 for p in parts) < target - 40:
        parts.append(rng.choice(_SENTENCES).format(o=rng.randint(10000, 99999), q=rng.choice((200, 500, 2000))))
    body = "\n".join(parts)[: target - 30] + "\n\n" + rng.choice(_SIGNATURES).format(n="Sam")
    subject = rng.choice(
        (
            "Order question",
            "Invoice issue",
            "Renewal",
            "Delivery delay",
            "Quote request",
            "Re: contract",
            "Feedback on the dashboard",
        )
    )
    return subject, body


def bench_summariser(samples: int) -> dict[str, Any]:
    """The local summariser alone (no database), one thread: its share of log_interaction."""
    rng = random.Random(5)
    bodies = [email_body(rng) for _ in range(samples)]
    times = []
    started = time.perf_counter()
    for subject, body in bodies:
        t0 = time.perf_counter()
        llm.summarise_interaction("email_received", subject, body)
        times.append(time.perf_counter() - t0)
    return {
        "clients": 1,
        **summarise(times, time.perf_counter() - started),
        "mean_body_chars": round(sum(len(b) for _, b in bodies) / len(bodies)),
    }


def bench_log_sql(dsn: str, targets: list[Target], clients: int, duration: float) -> dict[str, Any]:
    """log_interaction through cortex.interactions (local summary, then one write transaction),
    `clients` threads, each on its own pooled connection."""
    use_bench_settings(dsn, clients)
    get_settings()  # settings read now, before the threads start
    db.get_pool().wait(timeout=30)

    def make_worker(idx: int) -> Callable[[int], None]:
        rng = random.Random(100 + idx)

        def op(i: int) -> None:
            t = targets[rng.randrange(len(targets))]
            subject, body = email_body(rng)
            interactions.log_interaction(
                claims_for(t, i + idx),
                contact_id=t.contact_id,
                type=rng.choice(_TYPES),
                direction="inbound",
                subject=subject,
                raw_content=body,
                thread_id=f"bench-{idx}-{i % 50}",
                metadata={"bench": "log_interaction_sql"},
            )

        return op

    run_concurrently(clients, 2.0, 200, make_worker)  # warm-up: connections, caches, plans
    res = run_concurrently(clients, duration, 100_000, make_worker)
    db.close_pool()
    return {
        "clients": clients,
        **summarise(res.latencies, res.wall),
        "errors": len(res.errors),
        "error_samples": res.errors[:3],
    }


# --- HTTP -----------------------------------------------------------------------------------


def api_command(port: int) -> list[str]:
    """How the API is started for benchmarks: `cortex serve` (functions-framework's ASGI app, uvicorn workers)."""
    return [str(ROOT / ".venv" / "bin" / "cortex"), "serve", "--host", "127.0.0.1", "--port", str(port)]


@contextmanager
def api_server(dsn: str, log_path: Path, workers: int = 1) -> Iterator[str]:
    """Starts the HTTP API (`cortex serve`, WORKERS=`workers`, loopback) on the benchmark database; stops it after."""
    env = {**os.environ, "DATABASE_URL": dsn, "WORKERS": str(workers)}
    env.pop("ANTHROPIC_API_KEY", None)
    with http_server(api_command(HTTP_PORT), env, f"http://127.0.0.1:{HTTP_PORT}", log_path) as base:
        yield base


def close_all(clients: list[httpx.Client]) -> None:
    """Closes the keep-alive clients of a finished run."""
    while clients:
        clients.pop().close()


def agent_keys(dsn: str) -> dict[str, str]:
    """One writing agent's API key per tenant (kept by the generator in bench.agent_keys)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return {
            t: k
            for t, k in conn.execute(
                "select tenant_id::text, key from bench.agent_keys where agent = 'luna'"
            ).fetchall()
        }


def bench_context_http(
    base: str,
    keys: dict[str, str],
    targets: list[Target],
    per_level: int,
    clients_list: Sequence[int],
    duration: float,
    levels: Sequence[int] = (0, 1, 2, 3),
    workers: int = 1,
) -> list[dict[str, Any]]:
    """GET /api/v1/context/{id}?level=N with keep-alive clients: 1 client, then `clients` concurrent."""
    rows: list[dict[str, Any]] = []
    opened: list[httpx.Client] = []
    for clients in clients_list:
        for level in levels:

            def make_worker(idx: int, level: int = level) -> Callable[[int], None]:
                client = httpx.Client(base_url=base, timeout=30)
                opened.append(client)
                rng = random.Random(1000 * level + idx)

                def op(i: int) -> None:
                    t = targets[rng.randrange(len(targets))]
                    r = client.get(
                        f"/api/v1/context/{t.contact_id}",
                        params={"level": level},
                        headers={"Authorization": f"Bearer {keys[t.tenant_id]}"},
                    )
                    if r.status_code != 200:
                        raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")

                return op

            run_concurrently(clients, 1.0, 50, make_worker)
            res = run_concurrently(clients, duration, per_level, make_worker)
            close_all(opened)
            row = {
                "level": level,
                "clients": clients,
                "workers": workers,
                **summarise(res.latencies, res.wall),
                "errors": len(res.errors),
                "error_samples": res.errors[:3],
            }
            rows.append(row)
            print(
                f"  get_context http level={level} clients={clients} workers={workers}: p50 {row['p50_ms']} ms, "
                f"p95 {row['p95_ms']} ms, {row['throughput_per_s']} req/s, errors {row['errors']}",
                flush=True,
            )
    return rows


def bench_health_http(base: str, count: int, duration: float) -> dict[str, Any]:
    """GET /health (no database): what the HTTP stack alone costs, one keep-alive client."""
    opened: list[httpx.Client] = []

    def make_worker(idx: int) -> Callable[[int], None]:
        client = httpx.Client(base_url=base, timeout=30)
        opened.append(client)

        def op(i: int) -> None:
            if client.get("/health").status_code != 200:
                raise RuntimeError("health failed")

        return op

    run_concurrently(1, 1.0, 50, make_worker)
    res = run_concurrently(1, duration, count, make_worker)
    close_all(opened)
    return {"route": "GET /health", "clients": 1, **summarise(res.latencies, res.wall), "errors": len(res.errors)}


def bench_search_http(
    base: str, keys: dict[str, str], tenant_id: str, searches: list[str], duration: float
) -> dict[str, Any]:
    """GET /api/v1/contacts?search=... in the big tenant, one keep-alive client."""
    opened: list[httpx.Client] = []

    def make_worker(idx: int) -> Callable[[int], None]:
        client = httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {keys[tenant_id]}"})
        opened.append(client)

        def op(i: int) -> None:
            r = client.get("/api/v1/contacts", params={"search": searches[i % len(searches)]})
            if r.status_code != 200:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")

        return op

    res = run_concurrently(1, duration, len(searches), make_worker)
    close_all(opened)
    return {
        "clients": 1,
        **summarise(res.latencies, res.wall),
        "errors": len(res.errors),
        "error_samples": res.errors[:3],
    }


def bench_log_http(
    base: str, keys: dict[str, str], targets: list[Target], clients: int, duration: float, workers: int = 1
) -> dict[str, Any]:
    """POST /api/v1/interactions (summarised by the API with the local summariser), concurrent clients."""
    opened: list[httpx.Client] = []

    def make_worker(idx: int) -> Callable[[int], None]:
        client = httpx.Client(base_url=base, timeout=60)
        opened.append(client)
        rng = random.Random(500 + idx)

        def op(i: int) -> None:
            t = targets[rng.randrange(len(targets))]
            subject, body = email_body(rng)
            r = client.post(
                "/api/v1/interactions",
                headers={"Authorization": f"Bearer {keys[t.tenant_id]}"},
                json={
                    "contact_id": t.contact_id,
                    "type": rng.choice(_TYPES),
                    "direction": "inbound",
                    "subject": subject,
                    "raw_content": body,
                    "thread_id": f"bench-h{idx}-{i % 50}",
                    "metadata": {"bench": "log_interaction_http"},
                },
            )
            if r.status_code not in (200, 201):
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:200]}")

        return op

    run_concurrently(clients, 2.0, 100, make_worker)
    res = run_concurrently(clients, duration, 100_000, make_worker)
    close_all(opened)
    return {
        "clients": clients,
        "workers": workers,
        **summarise(res.latencies, res.wall),
        "errors": len(res.errors),
        "error_samples": res.errors[:3],
    }


# --- machine, data set, report ----------------------------------------------------------------


def dataset_info(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Sizes of the generated data set."""
    meta = dict(conn.execute("select key, value from bench.meta").fetchall())
    counts = conn.execute("""
        select (select count(*) from cortex.tenants), (select count(*) from cortex.contacts),
               (select count(*) from cortex.interactions), (select count(*) from cortex.contact_context),
               (select max(n) from (select count(*) n from cortex.contacts group by tenant_id) s),
               (select max(interaction_count) from cortex.contacts),
               pg_size_pretty(pg_database_size(current_database()))""").fetchone()
    assert counts is not None
    keys = (
        "tenants",
        "contacts",
        "interactions",
        "contact_context",
        "largest_tenant_contacts",
        "max_interactions_per_contact",
        "database_size",
    )
    return {
        **dict(zip(keys, counts, strict=True)),
        "generated_at": meta.get("generated_at"),
        "load_seconds": meta.get("load_seconds"),
    }


def targetstable(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 3 with the measured figure and whether it was met."""
    out: list[dict[str, Any]] = []
    sql_l1 = next(r for r in results["get_context_sql"] if r["level"] == 1 and r["context"] == "fresh")
    out.append(
        {
            "target": "get_context level 1 p95 <= 5 ms (SQL, fresh context)",
            "measured": sql_l1["p95_ms"],
            "met": sql_l1["p95_ms"] <= TARGET_CONTEXT_SQL_P95_MS,
        }
    )
    sql_l1s = next(
        r for r in results["get_context_sql"] if r["level"] == 1 and r["context"] == "stale (none generated)"
    )
    out.append(
        {
            "target": "get_context level 1 p95 <= 5 ms (SQL, stale context)",
            "measured": sql_l1s["p95_ms"],
            "met": sql_l1s["p95_ms"] <= TARGET_CONTEXT_SQL_P95_MS,
        }
    )
    for r in results.get("get_context_http") or []:
        if r["level"] == 1:
            out.append(
                {
                    "target": f"get_context level 1 p95 <= 15 ms (HTTP, {r['clients']} client(s))",
                    "measured": r["p95_ms"],
                    "met": r["p95_ms"] <= TARGET_CONTEXT_HTTP_P95_MS,
                }
            )
    for key, label in (("log_interaction_sql", "in-process"), ("log_interaction_http", "HTTP")):
        r = results.get(key)
        if r:
            out.append(
                {
                    "target": f"log_interaction >= 200/s sustained ({label}, {r['clients']} clients)",
                    "measured": r["throughput_per_s"],
                    "met": r["throughput_per_s"] >= TARGET_LOG_OPS_PER_S,
                }
            )
    shipped = [r for r in results["search_contacts_sql"] if r["variant"] == "as shipped"]
    allk = next(r for r in shipped if r["kind"] == "all kinds")
    out.append(
        {
            "target": "search_contacts p95 <= 20 ms (SQL, all kinds)",
            "measured": allk["p95_ms"],
            "met": allk["p95_ms"] <= TARGET_SEARCH_P95_MS,
        }
    )
    worst = max((r for r in shipped if r["kind"] != "all kinds"), key=lambda r: r["p95_ms"])
    out.append(
        {
            "target": f"search_contacts p95 <= 20 ms (SQL, worst kind: {worst['kind']})",
            "measured": worst["p95_ms"],
            "met": worst["p95_ms"] <= TARGET_SEARCH_P95_MS,
        }
    )
    return out


def markdown(results: dict[str, Any]) -> str:
    """The results as markdown tables (what docs/benchmarks.md shows)."""
    parts = [
        "### get_context in SQL (1 client, one transaction per call)",
        table(
            results["get_context_sql"],
            [("level", "level"), ("context", "context"), *LAT, ("select_only_p95_ms", "select-only p95 ms")],
        ),
        "",
        f"### search_contacts in SQL (tenant {results['search_tenant']}, 1 client)",
        table(
            results["search_contacts_sql"], [("variant", "variant"), ("kind", "kind"), *LAT, ("mean_results", "rows")]
        ),
    ]
    if results.get("get_context_http"):
        http_rows = list(results["get_context_http"])
        if results.get("whatif_workers2"):
            http_rows += results["whatif_workers2"]["get_context_http"]
        parts += [
            "",
            "### HTTP stack alone (GET /health, 1 client)",
            table([results["health_http"]], [("route", "route"), *LAT]),
            "",
            "### get_context over HTTP (loopback, keep-alive; workers = gunicorn processes)",
            table(
                http_rows,
                [("level", "level"), ("clients", "clients"), ("workers", "workers"), *LAT, ("errors", "errors")],
            ),
        ]
    if results.get("search_contacts_http"):
        parts += [
            "",
            "### search_contacts over HTTP (1 client)",
            table([results["search_contacts_http"]], [("clients", "clients"), *LAT, ("errors", "errors")]),
        ]
    logs = [{"path": k, **results[k]} for k in ("log_interaction_sql", "log_interaction_http") if results.get(k)]
    if results.get("whatif_workers2"):
        logs.append({"path": "log_interaction_http (what-if)", **results["whatif_workers2"]["log_interaction_http"]})
    parts += [
        "",
        "### log_interaction with the local summariser",
        table(logs, [("path", "path"), ("clients", "clients"), ("workers", "workers"), *LAT, ("errors", "errors")]),
        "",
        "### Local summariser alone (no database, 1 thread)",
        table([results["summariser_only"]], [*LAT, ("mean_body_chars", "mean body chars")]),
        "",
        "### Targets",
        table(
            [{**t, "met": "met" if t["met"] else "**missed**"} for t in results["targets"]],
            [("target", "target"), ("measured", "measured"), ("met", "result")],
        ),
    ]
    return "\n".join(parts)


def run(args: argparse.Namespace) -> int:
    """Runs every measurement and writes the JSON results."""
    dsn = bench_dsn()
    if not is_complete(dsn):
        print(f"{dbname(dsn)} has no complete data set: run scripts/bench --regenerate", file=sys.stderr)
        return 2
    wait_for_quiet(args.max_load, args.max_wait)
    print("resetting the data set to its generated state", flush=True)
    reset_info = reset(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        results: dict[str, Any] = {
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "machine": machine_info(conn),
            "dataset": dataset_info(conn),
            "reset": reset_info,
        }
        conn.execute("select setseed(0.5)")
        write_targets = [
            Target(t, c)
            for t, c in conn.execute(
                "select tenant_id::text, id::text from cortex.contacts order by random() limit 20000"
            ).fetchall()
        ]
    print("get_context in SQL", flush=True)
    results["get_context_sql"] = bench_context_sql(dsn, args.samples, args.warmup)
    print("search_contacts in SQL", flush=True)
    slug, results["search_contacts_sql"] = bench_search_sql(
        dsn, args.search_samples, min(args.warmup, 10), args.search_duration
    )
    results["search_tenant"] = slug
    print("local summariser alone", flush=True)
    results["summariser_only"] = bench_summariser(500)

    api_ready = (ROOT / "functions" / "main.py").exists() and (ROOT / "functions" / "cortex" / "app.py").exists()
    if args.http and api_ready:
        keys = agent_keys(dsn)
        with psycopg.connect(dsn, autocommit=True) as conn:
            fresh = pick_contacts(conn, True, 5000, 0.21)
            tenant_row = conn.execute("select id::text from cortex.tenants where slug = %s", (slug,)).fetchone()
            assert tenant_row is not None
            rng = random.Random(9)
            searches = [
                c["search"]
                for kind, cs in search_cases(conn, tenant_row[0], 100, rng).items()
                if kind in ("misspelt name", "company fragment", "email fragment")
                for c in cs
            ]
        with api_server(dsn, ROOT / "bench-results" / "api.log") as base:
            print("HTTP baseline (GET /health)", flush=True)
            results["health_http"] = bench_health_http(base, args.samples, args.http_duration)
            print("get_context over HTTP", flush=True)
            results["get_context_http"] = bench_context_http(
                base, keys, fresh, args.samples, (1, args.clients), args.http_duration
            )
            print("search_contacts over HTTP", flush=True)
            results["search_contacts_http"] = bench_search_http(base, keys, tenant_row[0], searches, 30.0)
            print("log_interaction over HTTP", flush=True)
            results["log_interaction_http"] = bench_log_http(base, keys, write_targets, args.clients, args.duration)
            print(f"  {results['log_interaction_http']['throughput_per_s']}/s", flush=True)
        # What-if: two gunicorn processes (WORKERS=2), one per core, instead of one GIL-bound process.
        with api_server(dsn, ROOT / "bench-results" / "api-workers2.log", workers=2) as base:
            print("what-if: HTTP with WORKERS=2", flush=True)
            results["whatif_workers2"] = {
                "get_context_http": bench_context_http(
                    base, keys, fresh, args.samples, (args.clients,), args.http_duration, levels=(1,), workers=2
                ),
                "log_interaction_http": bench_log_http(
                    base, keys, write_targets, args.clients, args.duration, workers=2
                ),
            }
            print(f"  {results['whatif_workers2']['log_interaction_http']['throughput_per_s']}/s", flush=True)
    else:
        results["http_skipped"] = (
            "--no-http" if not args.http else "functions/main.py or functions/cortex/app.py is missing"
        )
        print(f"HTTP skipped: {results['http_skipped']}", flush=True)

    print(f"log_interaction in-process, {args.clients} clients, {args.duration:.0f} s", flush=True)
    results["log_interaction_sql"] = bench_log_sql(dsn, write_targets, args.clients, args.duration)
    print(f"  {results['log_interaction_sql']['throughput_per_s']}/s", flush=True)

    results["targets"] = targetstable(results)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    results["reset_after"] = reset(dsn)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print()
    print(markdown(results))
    print(f"\nresults written to {out}")
    return 0


CPU_VARIANTS = {
    "claims only (the loop's own cost, subtracted from the others)": "",
    "get_context(contact, 1)": "x := public.get_context(r.contact_id, 1);",
    "the rendered row under RLS, read directly": (
        "select l.level_1 into x from cortex.context_levels l "
        "where l.contact_id = r.contact_id and l.tenant_id = (select cortex.current_tenant());"
    ),
    "cortex.require_tenant() (claims parsed, agent checked)": "perform cortex.require_tenant();",
}


def backend_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a local server process (from /proc: load on the machine does not
    inflate it, as it does wall time)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_context_cpu(dsn: str, calls: int = 3000, rounds: int = 3) -> dict[str, float]:
    """CPU microseconds per call of get_context level 1 and its parts, in one backend, as an agent
    (each call with its claims set, as in a request), best of `rounds`, the loop's own cost taken out."""
    best: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select pg_backend_pid()").fetchone()
        assert row is not None
        pid = int(row[0])
        conn.execute(
            "create temp table cpu_targets as select contact_id, claims from bench.context_targets order by n limit %s",
            (calls,),
        )
        conn.execute("grant select on cpu_targets to authenticated")
        for _ in range(rounds):
            for name, body in CPU_VARIANTS.items():
                block = (
                    "do $$ declare r record; x jsonb; begin set local role authenticated; "
                    "for r in select * from cpu_targets loop "
                    f"perform set_config('request.jwt.claims', r.claims, true); {body} end loop; end $$"
                )
                with conn.transaction(force_rollback=True):
                    conn.execute(block)  # warm: plans, caches
                with conn.transaction(force_rollback=True):
                    t0 = backend_cpu_seconds(pid)
                    conn.execute(block)
                    spent = (backend_cpu_seconds(pid) - t0) / calls * 1e6
                best[name] = min(best.get(name, spent), spent)
    base = best.pop(next(iter(CPU_VARIANTS)))
    return {name: round(max(0.0, us - base), 1) for name, us in best.items()}


# Each shape's call, and what replaces it in the empty transaction that measures the shape's own ceiling.
PGBENCH_EMPTY = {
    "edge": ("select public.get_context(current_setting('bench.contact')::uuid, 1);",
             "select current_setting('bench.contact')::uuid;"),
    "postgrest": ("select public.get_context(:contact_id, 1);", "select 1;"),
}  # fmt: skip


def _pgbench(dsn: str, script: Path, protocol: str, clients: int, seconds: int, targets: int) -> dict[str, Any]:
    result = pgbench(dsn, script, protocol, clients, seconds, {"targets": targets})
    if "skipped" in result:
        raise SystemExit(f"bench: {result['skipped']}")
    return result


def bench_context_pgbench(dsn: str, clients: int, seconds: int, max_load: float, max_wait: float) -> dict[str, Any]:
    """get_context level 1 from pgbench with `clients` connections for `seconds`, on random contacts
    whose context is fresh, in both transaction shapes: as Cortex's HTTP edge sends it (`edge`: the
    claims and the call in one round trip) and as PostgREST does (`postgrest`: begin, the claims,
    the call, commit). Each shape is also run with the call replaced by a constant (its ceiling on
    this machine), alternated with the call."""
    reset(dsn)
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(PGBENCH_TARGETS), dsn], check=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select count(*) from bench.context_targets").fetchone()
        targets = int(row[0]) if row else 0
        if targets == 0:
            raise SystemExit("bench: no contact with a fresh context to read (regenerate the data set)")
        jobs_before = conn.execute("select count(*) from cortex.jobs").fetchone()
        info = machine_info(conn)
    load_at_start = wait_for_quiet(max_load, max_wait)
    load_before = os.getloadavg()[0]
    shapes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, script, protocol in CONTEXT_PGBENCH_SHAPES:
            call, constant = PGBENCH_EMPTY[name]
            empty = Path(tmp) / f"{name}-empty.pgbench"
            empty.write_text(script.read_text().replace(call, constant))
            shapes[name] = {
                "script": str(script.relative_to(ROOT)),
                "protocol": protocol,
                **_pgbench(dsn, script, protocol, clients, seconds, targets),
                "empty_tps": _pgbench(dsn, empty, protocol, clients, seconds, targets)["tps"],
            }
    with psycopg.connect(dsn, autocommit=True) as conn:
        jobs_after = conn.execute("select count(*) from cortex.jobs").fetchone()
    cpu = bench_context_cpu(dsn)
    return {
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": info,
        "clients": clients,
        "seconds": seconds,
        "targets": targets,
        "shapes": shapes,
        "refreshes_queued": (jobs_after[0] if jobs_after else 0) - (jobs_before[0] if jobs_before else 0),
        "load_average_at_start": round(load_at_start, 2),
        "load_average_before": round(load_before, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
        "cpu_us_per_call": cpu,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("generate", help="drop, recreate, migrate and load cortex_bench")
    sub.add_parser("status", help="exit 0 when cortex_bench is complete")
    r = sub.add_parser("run", help="run the benchmarks")
    r.add_argument("--samples", type=int, default=2000, help="calls per get_context level (default 2000)")
    r.add_argument("--search-samples", type=int, default=400, help="calls per search kind (default 400)")
    r.add_argument("--search-duration", type=float, default=30.0, help="time limit per search series (s)")
    r.add_argument("--warmup", type=int, default=100, help="unmeasured calls before each series")
    r.add_argument("--clients", type=int, default=8, help="concurrent clients (default 8)")
    r.add_argument("--duration", type=float, default=20.0, help="seconds per log_interaction run (default 20)")
    r.add_argument("--http-duration", type=float, default=30.0, help="time limit per HTTP get_context series")
    r.add_argument("--max-load", type=float, default=1.0, help="start when the 1-min load average is below this")
    r.add_argument("--max-wait", type=float, default=900.0, help="wait at most this long for --max-load (s)")
    r.add_argument("--no-http", dest="http", action="store_false", help="skip the HTTP measurements")
    r.add_argument("--out", default=str(RESULTS), help="where to write the JSON results")
    pg = sub.add_parser("pgbench", help="get_context level 1 in SQL with pgbench")
    pg.add_argument("--clients", type=int, default=16, help="pgbench connections (default 16)")
    pg.add_argument("--seconds", type=int, default=30, help="run time (default 30)")
    pg.add_argument("--max-load", type=float, default=1.0, help="start when the 1-min load average is below this")
    pg.add_argument("--max-wait", type=float, default=300.0, help="wait at most this long for --max-load (s)")
    pg.add_argument("--out", default=str(PGBENCH_RESULTS), help="where to write the JSON result")
    args = parser.parse_args(argv)
    if args.command == "pgbench":
        result = bench_context_pgbench(bench_dsn(), args.clients, args.seconds, args.max_load, args.max_wait)
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(
            f"get_context level 1 (pgbench, {result['clients']} clients, {result['seconds']} s per run): "
            f"refreshes queued {result['refreshes_queued']}, load average before {result['load_average_before']}, "
            f"after {result['load_average_after']}"
        )
        for name, shape in result["shapes"].items():
            print(
                f"  {name} ({shape['script']}, -M {shape['protocol']}): {shape['tps']:.0f} calls/s, "
                f"{shape['latency_avg_ms']} ms average, failed {shape['failed']}; "
                f"the same transaction without the call: {shape['empty_tps']:.0f}/s"
            )
        for name, us in result["cpu_us_per_call"].items():
            print(f"  CPU per call, {name}: {us} us")
        print(f"result written to {out}")
        return 0
    if args.command == "generate":
        seconds = generate(bench_dsn())
        print(f"{dbname(bench_dsn())} generated in {seconds:.0f} s")
        return 0
    if args.command == "status":
        return 0 if is_complete(bench_dsn()) else 1
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
