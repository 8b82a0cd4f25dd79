#!/usr/bin/env python3
"""HTTP route benchmark (issue 14): every route of the API under wrk, beside a bare handler.

usage: bench_http.py [--scale 0.05] [--duration 10] [--regenerate] [--workers N]
                     [--cortex-cmd CMD] [--bare-cmd CMD] [--sync-bare] [--only TEXT]

1. Data: the core data set (sql/bench/generate_core.sql, bench_core's generator) at --scale (0.05 by
   default for a quick run: 5,000 contacts, 50,000 interactions; 1 is the standard size of the
   published figures) is built once into cortex_bench_http_seed; each run measures a fresh file copy
   of it, cortex_bench_http, so writes of one run never reach the next.
2. Servers, each on a loopback port with the same WORKERS (default: one per core, as `cortex serve`):
   (a) a bare functions-framework ASGI handler (scripts/bench_http_bare.py, `async def`), and
   (b) Cortex, started as `cortex serve` starts it. --cortex-cmd / --bare-cmd (or BENCH_HTTP_CORTEX_CMD /
   BENCH_HTTP_BARE_CMD) switch the command lines; {venv}, {root}, {host} and {port} are filled in.
3. wrk (-t2 -c16 --latency, --duration s per row) against the bare handler, /health and every route
   of /api/v1/openapi.json, with agent keys minted by the generator. A route of the document that has
   no entry here is listed as "not measured". Writes use unique values (external_id, email) per request.
4. pgbench (16 clients) on sql/bench/get_context_level1_edge.pgbench and get_context_level1.pgbench.

Prints a markdown table (route, req/s, p50, p99, non-2xx) and the targets; writes bench-results/http.json
and bench-results/http.md (wrk's own output per row under bench-results/http/). All traffic goes to
127.0.0.1 and every run is bounded by --duration.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import Target, email_body, pick_contacts, reset, search_cases
from bench_core import generate as generate_core
from benchlib import (
    CONTEXT_PGBENCH_SHAPES,
    ROOT,
    Server,
    base_dsn,
    get_meta,
    pgbench,
    recreate_database,
    serving,
    table,
    with_database,
)

SEED_DB = "cortex_bench_http_seed"
RUN_DB = "cortex_bench_http"
RESULTS = ROOT / "bench-results"
LUA = ROOT / "scripts" / "bench_http.lua"
DOCS = ROOT / "docs" / "benchmarks.md"
HOST = "127.0.0.1"
BARE_PORT = 8187
CORTEX_PORT = 8188
WRITERS = ("luna", "mia", "anna", "jasper")
P = "/api/v1"

# How Cortex and the bare handler are started: `cortex serve` decides Cortex's server mode; the bare
# handler is always the ASGI reference of issue 14's target.
DEFAULT_CORTEX_CMD = "{venv}/cortex serve --host {host} --port {port}"
BARE_SOURCE = "--source {root}/scripts/bench_http_bare.py --host {host} --port {port}"
DEFAULT_BARE_CMD = "{venv}/functions-framework --asgi --target bare " + BARE_SOURCE
BARE_DB_CMD = "{venv}/functions-framework --asgi --target bare_db " + BARE_SOURCE
SYNC_BARE_CMD = "{venv}/functions-framework --target bare_sync " + BARE_SOURCE

# Targets of issue 14.
TARGET_HEALTH_RATIO = 0.60
TARGET_CONTEXT1_RPS = 2000.0
TARGET_CONTEXT1_P99_MS = 20.0
TARGET_SQL_CONTEXT1_PER_S = 8000.0

# Paths of the OpenAPI document served by the same handler as a measured path.
ALIASES = {
    ("GET", f"{P}/health"): "/health",
    ("GET", f"{P}/health/ready"): "/health/ready",
    ("GET", f"{P}/health/deep"): "/health/deep",
}


# --- data -------------------------------------------------------------------------------------------


def prepare_database(scale: float, regenerate: bool) -> str:
    """A fresh copy of the seed data set at `scale` (built when missing, of another scale or asked to)."""
    seed = with_database(base_dsn(), SEED_DB)
    meta = get_meta(seed)
    if regenerate or meta.get("complete") != "true" or float(meta.get("scale", "1")) != scale:
        print(f"bench: generating {SEED_DB} at scale {scale} (the standard size takes about 2 minutes)", flush=True)
        generate_core(seed, scale)
    run = with_database(base_dsn(), RUN_DB)
    recreate_database(run, RUN_DB, template=SEED_DB)
    reset(run)  # contexts fresh again (they go stale after 24 h by design)
    return run


@dataclass
class Data:
    """What the requests are drawn from."""

    keys: dict[tuple[str, str], str]  # (tenant id, agent) -> API key
    fresh: list[Target]  # contacts with a fresh generated context (reads)
    others: list[Target]  # contacts without one (writes, so that reads stay on fresh contexts)
    company: dict[str, str | None]
    big_tenant: str
    searches: list[str]
    sizes: dict[str, str]


def load_data(dsn: str) -> Data:
    with psycopg.connect(dsn, autocommit=True) as conn:
        keys = {(t, a): k for t, a, k in conn.execute("select tenant_id::text, agent, key from bench.agent_keys")}
        fresh = pick_contacts(conn, True, 4000, 0.61)
        conn.execute("select setseed(0.62)")
        rows = conn.execute(
            "select c.tenant_id::text, c.id::text, c.company_name from cortex.contacts c where not exists ("
            " select from cortex.contact_context x where x.tenant_id = c.tenant_id and x.contact_id = c.id)"
            " order by random() limit 4000"
        ).fetchall()
        big = conn.execute(
            "select tenant_id::text from cortex.contacts group by 1 order by count(*) desc limit 1"
        ).fetchone()
        assert big is not None
        cases = search_cases(conn, big[0], 100, random.Random(7))
        sizes = get_meta(dsn)
    searches = [c["search"] for k in ("misspelt name", "company fragment", "email fragment") for c in cases[k]]
    return Data(
        keys=keys,
        fresh=fresh,
        others=[Target(t, c) for t, c, _ in rows],
        company={c: name for _, c, name in rows},
        big_tenant=big[0],
        searches=searches,
        sizes={k: sizes.get(k, "?") for k in ("scale", "tenants", "contacts", "interactions", "contact_context")},
    )


# --- requests -----------------------------------------------------------------------------------------

Line = tuple[str, str, str, str]  # method, path, authorization, body


@dataclass
class Variant:
    """One row of the table: requests for one route (or one case of it)."""

    method: str
    template: str  # the OpenAPI path
    label: str
    lines: Callable[[Data, str], list[Line]]  # (data, dsn) -> requests
    note: str = ""
    smoke: bool = True  # send the first request once before wrk (and check it is 2xx)
    base: str = "cortex"


def auth(data: Data, tenant: str, agent: str = "luna") -> str:
    return f"Bearer {data.keys[(tenant, agent)]}"


def body(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


def _get(data: Data, targets: Sequence[Target], path: Callable[[Target], str]) -> list[Line]:
    return [("GET", path(t), auth(data, t.tenant_id, WRITERS[i % 4]), "") for i, t in enumerate(targets)]


def _bare_context_lines(data: Data) -> list[Line]:
    """GET /context/:id?level=1's requests for the bare database handler, with the claims its key carries."""

    def body(i: int, t: Target) -> str:
        claims = {"role": "authenticated", "tenant_id": t.tenant_id, "agent": WRITERS[i % 4]}
        return json.dumps({"call": "get_context", "args": [t.contact_id, 1], "claims": claims})

    return [("POST", "/", "", body(i, t)) for i, t in enumerate(data.fresh)]


def _log_lines(data: Data, _: str) -> list[Line]:
    rng = random.Random(11)
    out = []
    for i in range(2000):
        t = data.others[rng.randrange(len(data.others))]
        subject, text = email_body(rng)
        payload = {
            "contact_id": t.contact_id,
            "type": "email_received",
            "direction": "inbound",
            "subject": subject,
            "raw_content": text,
            "external_id": "bench-http-__UNIQ__",
            "thread_id": f"bench-http-{i % 50}",
            "metadata": {"bench": "http"},
        }
        out.append(("POST", f"{P}/interactions", auth(data, t.tenant_id, WRITERS[i % 4]), body(payload)))
    return out


def _contact_create_lines(data: Data, _: str) -> list[Line]:
    rng = random.Random(12)
    tenants = sorted({t.tenant_id for t in data.fresh})
    return [
        (
            "POST",
            f"{P}/contacts",
            auth(data, tenants[i % len(tenants)], WRITERS[i % 4]),
            body(
                {
                    "email": "new.__UNIQ__@bench-http.example.com",
                    "name": f"{rng.choice(('Ada', 'Bo', 'Cy'))} Bench",
                    "company_name": "Bench Works",
                    "stage": "prospect",
                    "source": "website",
                    "tags": ["bench"],
                }
            ),
        )
        for i in range(200)
    ]


def _contact_patch_lines(data: Data, _: str) -> list[Line]:
    # The contact's own company name: a real write (updated_at, triggers) that leaves the data as it was.
    return [
        (
            "PATCH",
            f"{P}/contacts/{t.contact_id}",
            auth(data, t.tenant_id),
            body({"company_name": data.company[t.contact_id]}),
        )
        for t in data.others[: len(data.others) // 2]
    ]


def _handoff_create_lines(data: Data, _: str) -> list[Line]:
    rng = random.Random(13)
    out = []
    for i, t in enumerate(data.others[len(data.others) // 2 :]):
        sender = WRITERS[i % 4]
        payload = {
            "contact_id": t.contact_id,
            "to_agent": rng.choice([w for w in WRITERS if w != sender]),
            "reason": rng.choice(("warm_reply", "escalation", "upsell_opportunity", "churn_risk")),
            "reason_detail": "Asked for a call about pricing for 50 seats before their budget meeting.",
            "urgency": rng.choice(("low", "normal", "high", "urgent")),
            "metadata": {"bench": "http"},
        }
        out.append(("POST", f"{P}/handoffs", auth(data, t.tenant_id, sender), body(payload)))
    return out


def _bench_handoffs(dsn: str) -> list[tuple[str, str, str]]:
    """(tenant, id, receiving agent) of the handoffs the POST /handoffs row created."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [
            (t, h, a)
            for t, h, a in conn.execute(
                "select tenant_id::text, id::text, to_agent from cortex.handoff_events "
                "where metadata ? 'bench' and to_agent is not null order by created_at"
            )
        ]


def _handoff_get_lines(data: Data, dsn: str) -> list[Line]:
    return [("GET", f"{P}/handoffs/{h}", auth(data, t, a), "") for t, h, a in _bench_handoffs(dsn)]


def _handoff_patch_lines(data: Data, dsn: str) -> list[Line]:
    # Every handoff accepted, then every one completed: each request a legal move while the list lasts.
    found = _bench_handoffs(dsn)
    return [
        ("PATCH", f"{P}/handoffs/{h}", auth(data, t, a), body({"status": status}))
        for status in ("accepted", "completed")
        for t, h, a in found
    ]


def _tenants(data: Data) -> list[str]:
    return sorted({t.tenant_id for t in data.fresh})


def variants() -> list[Variant]:
    """Every benchmark entry, in the order they run: reads first (on fresh contexts), then writes."""
    out = [
        Variant(
            "GET",
            "/",
            "bare ASGI handler (functions-framework --asgi)",
            lambda d, _: [("GET", "/", "", "")],
            base="bare",
        ),
        Variant(
            "POST",
            "/",
            "bare ASGI handler + the level-1 SQL call (one pooled round trip)",
            lambda d, _: _bare_context_lines(d),
            base="bare_db",
        ),
        Variant("GET", "/health", "GET /health", lambda d, _: [("GET", "/health", "", "")]),
        Variant("GET", "/health/ready", "GET /health/ready", lambda d, _: [("GET", "/health/ready", "", "")]),
        Variant(
            "GET",
            "/health/deep",
            "GET /health/deep",
            # Operators only (an admin agent's key); the model's answer is cached 60 s per process.
            lambda d, _: [("GET", "/health/deep", auth(d, _tenants(d)[0], "system"), "")],
        ),
        Variant(
            "GET", f"{P}/openapi.json", "GET /api/v1/openapi.json", lambda d, _: [("GET", f"{P}/openapi.json", "", "")]
        ),
        Variant(
            "GET",
            f"{P}/contacts/{{id}}",
            "GET /contacts/:id",
            lambda d, _: _get(d, d.fresh, lambda t: f"{P}/contacts/{t.contact_id}"),
        ),
        Variant(
            "GET",
            f"{P}/contacts",
            "GET /contacts?search= (misspelt name, company, email fragment; biggest tenant)",
            lambda d, _: [("GET", f"{P}/contacts?search={quote(s)}", auth(d, d.big_tenant), "") for s in d.searches],
        ),
        Variant(
            "GET",
            f"{P}/contacts",
            "GET /contacts?stage= (list, biggest tenant)",
            lambda d, _: [
                ("GET", f"{P}/contacts?stage={s}", auth(d, d.big_tenant), "") for s in ("customer", "prospect", "lost")
            ],
        ),
    ]
    for level in range(4):
        out.append(
            Variant(
                "GET",
                f"{P}/context/{{contact_id}}",
                f"GET /context/:id?level={level}",
                lambda d, _, level=level: _get(d, d.fresh, lambda t: f"{P}/context/{t.contact_id}?level={level}"),
                note="fresh contexts",
            )
        )
    out += [
        Variant(
            "GET",
            f"{P}/interactions",
            "GET /interactions?contact_id=",
            lambda d, _: _get(d, d.fresh, lambda t: f"{P}/interactions?contact_id={t.contact_id}"),
        ),
        Variant(
            "GET",
            f"{P}/usage/summary",
            "GET /usage/summary?period=day",
            lambda d, _: [("GET", f"{P}/usage/summary?period=day", auth(d, t), "") for t in _tenants(d)],
        ),
        Variant(
            "GET",
            f"{P}/usage/budget-check/{{agent}}",
            "GET /usage/budget-check/:agent",
            lambda d, _: [
                ("GET", f"{P}/usage/budget-check/{a}?estimated_tokens=1500", auth(d, t, a), "")
                for t in _tenants(d)
                for a in WRITERS
            ],
        ),
        Variant(
            "POST",
            f"{P}/interactions",
            "POST /interactions (local summariser, unique external_id)",
            _log_lines,
            note="email bodies of 300-2,000 chars",
        ),
        Variant("POST", f"{P}/contacts", "POST /contacts (new contact, unique email)", _contact_create_lines),
        Variant("PATCH", f"{P}/contacts/{{id}}", "PATCH /contacts/:id", _contact_patch_lines),
        Variant(
            "POST",
            f"{P}/usage",
            "POST /usage",
            lambda d, _: [
                (
                    "POST",
                    f"{P}/usage",
                    auth(d, t, a),
                    body(
                        {"model": "claude-haiku-4-5", "operation": "bench_http", "input_tokens": 20, "output_tokens": 5}
                    ),
                )
                for t in _tenants(d)
                for a in WRITERS
            ],
        ),
        Variant(
            "POST",
            f"{P}/context/{{contact_id}}/refresh",
            "POST /context/:id/refresh (local generator)",
            lambda d, _: [
                ("POST", f"{P}/context/{t.contact_id}/refresh", auth(d, t.tenant_id), "")
                for t in d.others[: len(d.others) // 2]
            ],
        ),
        Variant(
            "POST",
            f"{P}/handoffs",
            "POST /handoffs (local briefing)",
            _handoff_create_lines,
            note="one handoff per contact while the list lasts",
        ),
        Variant(
            "GET",
            f"{P}/handoffs/pending",
            "GET /handoffs/pending (agent's own queue)",
            lambda d, _: [("GET", f"{P}/handoffs/pending", auth(d, t, a), "") for t in _tenants(d) for a in WRITERS],
        ),
        Variant(
            "GET",
            f"{P}/handoffs",
            "GET /handoffs?since= (monitor)",
            lambda d, _: [
                (
                    "GET",
                    f"{P}/handoffs?since={(datetime.now(UTC) - timedelta(days=1)).strftime('%Y-%m-%dT%H:%M:%SZ')}",
                    auth(d, t, "helios"),
                    "",
                )
                for t in _tenants(d)
            ],
        ),
        Variant("GET", f"{P}/handoffs/{{id}}", "GET /handoffs/:id", _handoff_get_lines),
        Variant(
            "PATCH",
            f"{P}/handoffs/{{id}}",
            "PATCH /handoffs/:id (accept, then complete)",
            _handoff_patch_lines,
            note="each handoff once per move; repeats past the list answer 409",
            smoke=False,
        ),
    ]
    return out


# --- wrk ------------------------------------------------------------------------------------------------


@dataclass
class Row:
    route: str
    label: str
    rps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    non2xx: int | None = None
    socket_errors: int | None = None
    requests: int | None = None
    note: str = ""
    smoke_status: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)


def run_wrk(
    base: str, lines: list[Line], name: str, args: argparse.Namespace, run_id: str, warmup: int = 0
) -> dict[str, Any]:
    """wrk -t THREADS -c CONNECTIONS -d DURATION --latency over the request lines; returns the done()
    figures. With `warmup`, the same load runs that many seconds first, unmeasured: a server's first
    seconds open its pool's connections and look each agent key up once (start-up, not steady state)."""
    if warmup > 0:
        run_wrk(base, lines, name + "-warmup", argparse.Namespace(**{**vars(args), "duration": warmup}), run_id + "w")
    out_dir = RESULTS / "http"
    out_dir.mkdir(parents=True, exist_ok=True)
    req_file = out_dir / f"{name}.requests"
    req_file.write_text("".join("\t".join(line) + "\n" for line in lines))
    cmd = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{args.duration}s",
        "--latency",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        base,
        "--",
        str(req_file),
        str(args.threads),
        run_id,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.duration + 60, check=False)
    (out_dir / f"{name}.wrk.txt").write_text(done.stdout + done.stderr)
    found = re.search(r"^BENCH_RESULT (\{.*\})$", done.stdout, re.M)
    if not found:
        raise RuntimeError(f"wrk printed no result (exit {done.returncode}): {done.stderr.strip()[:300]}")
    result: dict[str, Any] = json.loads(found.group(1))
    return result


def wrk_latency_row(r: dict[str, Any]) -> dict[str, Any]:
    """A run_wrk result in the benchmarks' common latency columns (benchlib.LAT): n, p50/p95/p99,
    mean and max in ms, requests/s, and errors (non-2xx answers plus socket errors)."""
    seconds = r["duration_us"] / 1e6
    return {
        "n": r["requests"],
        "p50_ms": round(r["p50_us"] / 1000, 2),
        "p95_ms": round(r["p95_us"] / 1000, 2),
        "p99_ms": round(r["p99_us"] / 1000, 2),
        "mean_ms": round(r["mean_us"] / 1000, 2),
        "max_ms": round(r["max_us"] / 1000, 2),
        "throughput_per_s": round(r["requests"] / seconds, 1) if seconds else None,
        "errors": r["non2xx"] + r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"],
    }


def smoke(base: str, line: Line) -> int:
    """One request as wrk would send it; its status code."""
    method, path, authorization, payload = line
    headers = {"Authorization": authorization} if authorization else {}
    if payload:
        headers["Content-Type"] = "application/json"
    content = payload.replace("__UNIQ__", f"smoke-{time.time_ns()}") if payload else None
    return httpx.request(
        method, base + path.replace("__UNIQ__", "smoke"), headers=headers, content=content, timeout=30
    ).status_code


def measure(server: Server, v: Variant, lines: list[Line], args: argparse.Namespace, run_id: str, n: int) -> Row:
    row = Row(f"{v.method} {v.template}", v.label, note=v.note)
    if not lines:
        row.note = "skipped: nothing to request (an earlier row created none)"
        return row
    if v.smoke:
        row.smoke_status = smoke(server.url, lines[0])
    name = f"{n:02d}-" + re.sub(r"[^a-z0-9]+", "-", v.label.lower()).strip("-")[:60]
    # One-shot rows (smoke off) have no spare requests to warm up with.
    r = run_wrk(server.url, lines, name, args, run_id, args.warmup if v.smoke else 0)
    seconds = r["duration_us"] / 1e6
    row.rps = round(r["requests"] / seconds, 1) if seconds else None
    row.p50_ms = round(r["p50_us"] / 1000, 2)
    row.p99_ms = round(r["p99_us"] / 1000, 2)
    row.non2xx = r["non2xx"]
    row.socket_errors = r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]
    row.requests = r["requests"]
    row.raw = r
    if not v.smoke:  # one-shot requests: say how many legal ones there were
        row.note += f" ({len(lines):,} in the list, {row.requests:,} sent)"
    if row.smoke_status is not None and not 200 <= row.smoke_status < 300:
        row.note = (row.note + "; " if row.note else "") + f"first request answered {row.smoke_status}"
    print(
        f"  {v.label}: {row.rps} req/s, p50 {row.p50_ms} ms, p99 {row.p99_ms} ms, non-2xx {row.non2xx}",
        flush=True,
    )
    return row


# --- servers --------------------------------------------------------------------------------------------


def command(template: str, port: int) -> list[str]:
    """A server command line from its template ({venv}, {root}, {host}, {port})."""
    venv = str(Path(sys.executable).parent)
    return shlex.split(template.format(venv=venv, root=ROOT, host=HOST, port=port))


def server_env(dsn: str, workers: int) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": dsn, "WORKERS": str(workers)}
    env.pop("ANTHROPIC_API_KEY", None)  # the local summariser and generator: nothing leaves the machine
    return env


def describe(server: Server) -> dict[str, Any]:
    """The server's processes and its mode (ASGI for `functions-framework --asgi` and `cortex serve`)."""
    procs = server.processes()
    asgi = any("--asgi" in p.split() or "serve" in p.split() for p in procs)
    return {
        "command_line": procs[0] if procs else "?",
        "worker_processes": max(0, len(procs) - 1),
        "mode": "ASGI (gunicorn with uvicorn workers)" if asgi else "Flask/gunicorn (gthread)",
    }


# --- pgbench --------------------------------------------------------------------------------------------


def run_pgbench(dsn: str, duration: int) -> dict[str, Any]:
    """get_context level 1 in SQL with 16 clients, in both transaction shapes (benchlib.CONTEXT_PGBENCH_SHAPES)."""
    # The scripts draw random fresh contacts from bench.context_targets (made here, as bench_core does).
    targets = ROOT / "sql" / "bench" / "get_context_targets.sql"
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(targets), dsn], check=True,
                   capture_output=True, cwd=ROOT)  # fmt: skip
    count = subprocess.run(["psql", "-X", "-At", "-c", "select count(*) from bench.context_targets", dsn],
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    return {
        name: pgbench(dsn, script, protocol, 16, duration, {"targets": count}, RESULTS / "http" / f"pgbench-{name}.txt")
        for name, script, protocol in CONTEXT_PGBENCH_SHAPES
    }


# --- report ---------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    free = subprocess.run(["free", "-h"], capture_output=True, text=True, check=False).stdout.strip()
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True, check=False)
    return {
        "nproc": os.cpu_count(),
        "free_h": free,
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "wrk": (wrk.stdout + wrk.stderr).split(" Copyright")[0].strip() or "?",
    }


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 100 else f"{value:,.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    rows = results["rows"]
    cortex = results["cortex_server"]
    parts = [
        f"Run of {results['date']}: {m['nproc']} cores (`nproc`), memory (`free -h`): "
        f"{m['free_h'].splitlines()[1].split()[1] if len(m['free_h'].splitlines()) > 1 else '?'} total; load average "
        f"{m['load_average_at_start']} at the start, {m.get('load_average_at_end')} at the end. "
        f"Server mode at the time: {cortex['mode']}, {cortex['worker_processes']} worker processes "
        f"(`{cortex['command_line']}`); the bare handler: {results['bare_server']['mode']}, "
        f"{results['bare_server']['worker_processes']} worker processes. wrk: -t{results['threads']} "
        f"-c{results['connections']} -d{results['duration']}s after {results.get('warmup', 0)} s unmeasured, "
        f"{m['wrk']}. "
        f"Data set: scale {results['dataset']['scale']} "
        f"({results['dataset']['contacts']} contacts, {results['dataset']['interactions']} interactions, "
        f"{results['dataset']['contact_context']} generated contexts).",
        "",
        table(
            [
                {
                    "route": r["label"],
                    "rps": fmt(r["rps"]),
                    "p50": fmt(r["p50_ms"]),
                    "p99": fmt(r["p99_ms"]),
                    "non2xx": fmt(r["non2xx"]) if r["rps"] is not None else "-",
                    "note": r["note"] or ("not measured" if r["rps"] is None else ""),
                }
                for r in rows
            ],
            [
                ("route", "route"),
                ("rps", "req/s"),
                ("p50", "p50 ms"),
                ("p99", "p99 ms"),
                ("non2xx", "non-2xx"),
                ("note", "note"),
            ],
        ),
        "",
    ]
    if results["not_measured"]:
        parts += [
            "Routes of the OpenAPI document without a benchmark entry (not measured): "
            + ", ".join(f"`{r}`" for r in results["not_measured"])
            + ".",
            "",
        ]
    if results["aliases"]:
        parts += [
            "Served by the same handler as a measured path (not measured separately): "
            + ", ".join(f"`{a}` (= `{b}`)" for a, b in results["aliases"].items())
            + ".",
            "",
        ]
    pg = results["pgbench"]
    parts += [
        "get_context level 1 in SQL (pgbench, 16 clients): "
        + (
            "; ".join(
                f"{shape['tps']:,.0f}/s, latency average {shape['latency_avg_ms']} ms in {name} shape"
                if "tps" in shape
                else f"{name} shape not measured: {shape['skipped']}"
                for name, shape in pg.items()
            )
            + " (edge: the claims and the call in one round trip, as Cortex's HTTP edge sends them; "
            "postgrest: begin, the claims, the call, commit)."
        ),
        "",
        table(
            [
                {**t, "met": "met" if t["met"] else ("-" if t["met"] is None else "**missed**")}
                for t in results["targets"]
            ],
            [("target", "target"), ("measured", "measured"), ("met", "result")],
        ),
    ]
    return "\n".join(parts) + "\n"


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    by_label = {r["label"]: r for r in results["rows"]}
    bare = next(r for r in results["rows"] if r["route"] == "GET /")
    health = by_label["GET /health"]
    ctx1 = by_label["GET /context/:id?level=1"]
    out = []
    ratio = health["rps"] / bare["rps"] if health["rps"] and bare["rps"] else None
    out.append(
        {
            "target": "/health >= 60 % of the bare ASGI handler's req/s (same run)",
            "measured": f"{ratio:.0%} ({fmt(health['rps'])} / {fmt(bare['rps'])})" if ratio else "-",
            "met": None if ratio is None else ratio >= TARGET_HEALTH_RATIO,
        }
    )
    out.append(
        {
            "target": "GET /context/:id?level=1 >= 2,000 req/s",
            "measured": fmt(ctx1["rps"]),
            "met": None if ctx1["rps"] is None else ctx1["rps"] >= TARGET_CONTEXT1_RPS,
        }
    )
    out.append(
        {
            "target": "GET /context/:id?level=1 p99 <= 20 ms",
            "measured": f"{fmt(ctx1['p99_ms'])} ms",
            "met": None if ctx1["p99_ms"] is None else ctx1["p99_ms"] <= TARGET_CONTEXT1_P99_MS,
        }
    )
    for name, shape in results["pgbench"].items():
        if not isinstance(shape, dict):
            continue
        out.append(
            {
                "target": f"get_context level 1 in SQL >= 8,000/s (pgbench, 16 clients, {name} shape)",
                "measured": f"{shape['tps']:,.0f}/s" if "tps" in shape else "not measured",
                "met": shape["tps"] >= TARGET_SQL_CONTEXT1_PER_S if "tps" in shape else None,
            }
        )
    return out


# --- main -----------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if not shutil.which("wrk"):
        print("bench_http: wrk is missing (scripts/bench http installs it: apt-get install wrk)", file=sys.stderr)
        return 2
    dsn = prepare_database(args.scale, args.regenerate)
    data = load_data(dsn)
    run_id = datetime.now(UTC).strftime("%H%M%S")
    results: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "dataset": data.sizes,
        "duration": args.duration,
        "warmup": args.warmup,
        "connections": args.connections,
        "threads": args.threads,
        "workers": args.workers,
    }
    wanted = [
        v
        for v in variants()
        if not args.only or args.only in v.label or v.base in ("bare", "bare_db") or v.label == "GET /health"
    ]
    rows: list[Row] = []
    env = server_env(dsn, args.workers)
    print(f"bare handler: {args.bare_cmd}", flush=True)
    with serving(
        command(args.bare_cmd, BARE_PORT), env, f"http://{HOST}:{BARE_PORT}", RESULTS / "http-bare.log", "/"
    ) as bare:
        results["bare_server"] = describe(bare)
        for n, v in enumerate(x for x in wanted if x.base == "bare"):
            rows.append(measure(bare, v, v.lines(data, dsn), args, run_id, n))
    bare_db = [x for x in wanted if x.base == "bare_db"]
    if bare_db:
        with serving(
            command(BARE_DB_CMD, BARE_PORT), env, f"http://{HOST}:{BARE_PORT}", RESULTS / "http-bare-db.log", "/"
        ) as server:
            results["bare_db_server"] = describe(server)
            for v in bare_db:
                rows.append(measure(server, v, v.lines(data, dsn), args, run_id, 1))
    if args.sync_bare:
        with serving(
            command(SYNC_BARE_CMD, BARE_PORT), env, f"http://{HOST}:{BARE_PORT}", RESULTS / "http-bare-sync.log", "/"
        ) as bare:
            v = Variant(
                "GET",
                "/",
                "bare sync handler (functions-framework, Flask/gunicorn)",
                lambda d, _: [("GET", "/", "", "")],
                base="bare",
            )
            rows.append(measure(bare, v, v.lines(data, dsn), args, run_id, 1))
    print(f"cortex: {args.cortex_cmd}", flush=True)
    with serving(
        command(args.cortex_cmd, CORTEX_PORT), env, f"http://{HOST}:{CORTEX_PORT}", RESULTS / "http-cortex.log"
    ) as cortex:
        results["cortex_server"] = describe(cortex)
        print(f"  {results['cortex_server']}", flush=True)
        document = httpx.get(f"{cortex.url}{P}/openapi.json", timeout=30).json()
        for n, v in enumerate((x for x in wanted if x.base == "cortex"), start=2):
            rows.append(measure(cortex, v, v.lines(data, dsn), args, run_id, n))
    # Coverage from the OpenAPI document: a route without an entry is reported, not silently skipped.
    entries = {(v.method, v.template) for v in variants()}
    documented = [(m.upper(), p) for p, ops in document["paths"].items() for m in ops]
    results["aliases"] = {f"{m} {p}": ALIASES[(m, p)] for m, p in documented if (m, p) in ALIASES}
    missing = [f"{m} {p}" for m, p in documented if (m, p) not in entries and (m, p) not in ALIASES]
    results["not_measured"] = missing
    rows += [Row(r, r, note="not measured: no benchmark entry in scripts/bench_http.py") for r in missing]
    gone = sorted({f"{m} {t}" for m, t in entries if t != "/" and (m, t) not in set(documented)})
    if gone:
        print(f"bench_http: entries for routes the document no longer has: {', '.join(gone)}", flush=True)
    print("pgbench: get_context level 1", flush=True)
    results["pgbench"] = run_pgbench(dsn, args.duration)
    results["rows"] = [r.__dict__ for r in rows]
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    # The targets need the bare handler, /health and level 1, which every run measures unless --only leaves level 1 out.
    labels = {r["label"] for r in results["rows"]}
    results["targets"] = targets(results) if "GET /context/:id?level=1" in labels else []
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "http.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = markdown(results)
    (RESULTS / "http.md").write_text(text)
    print()
    print(text)
    print(f"results written to {RESULTS / 'http.json'} and {RESULTS / 'http.md'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.05, help="data set size; 1 = the standard (published) size")
    parser.add_argument("--regenerate", action="store_true", help="rebuild the seed data set first")
    parser.add_argument("--duration", type=int, default=10, help="seconds of wrk per row (default 10)")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections (default 16)")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured seconds of wrk before each row (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default 2)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="WORKERS for both servers")
    parser.add_argument("--cortex-cmd", default=os.environ.get("BENCH_HTTP_CORTEX_CMD", DEFAULT_CORTEX_CMD))
    parser.add_argument("--bare-cmd", default=os.environ.get("BENCH_HTTP_BARE_CMD", DEFAULT_BARE_CMD))
    parser.add_argument("--sync-bare", action="store_true", help="also measure a bare sync (Flask) handler")
    parser.add_argument("--only", help="only the rows whose label contains this (plus the bare handler and /health)")
    args = parser.parse_args(argv)
    if not 1 <= args.duration <= 120:
        parser.error("--duration must be 1-120 seconds")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
