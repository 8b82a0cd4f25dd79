#!/usr/bin/env python3
"""Voice benchmark (issue 9): the call-start path in SQL and over HTTP, and post-call throughput.

usage: bench_voice.py generate [--scale S]
       bench_voice.py status [--scale S]
       bench_voice.py run [--duration 10] [--connections 16,50] [--post-calls 200] [--workers N]

1. Data (sql/bench/generate_voice.sql, database cortex_bench_voice): 1,000,000 callers across 10
   tenants, 5 voice agents per tenant, each with a state for 30 % of the callers, at --scale 1 (the
   figures of docs/benchmarks.md; develop at 0.02).
2. SQL: pgbench -M simple with sql/bench/voice_client_data.pgbench (the claims and the call in one
   round trip, as the HTTP edge sends them), 16 and 50 clients; p50/p99 from pgbench's per-transaction log.
3. HTTP: wrk (scripts/bench_http.lua, the http suite's request replayer) at 16 and 50 connections
   against the bare functions-framework ASGI handler and `cortex serve` (POST /api/v1/voice/client-data
   with the agents' keys, random tenant, agent and caller, one in eleven a new caller; and GET
   /health/ready, the edge's cheapest route that reaches the database, as a reference), in the same run;
   both with WORKERS processes and CORTEX_EMBEDDINGS=none (no route measured here embeds).
4. Post-call: --post-calls signed webhooks to POST /api/v1/voice/post-call (accepted per second), then
   the worker (in this process, the local generator, no model key) until the queue is empty: calls
   processed per second (each also queues its interaction's summary, counted with it).

Writes bench-results/voice.json and bench-results/voice.md; all traffic goes to 127.0.0.1, every
run is bounded by --duration and --post-calls.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "functions"))

from bench_http import DEFAULT_BARE_CMD, DEFAULT_CORTEX_CMD, command, describe, machine, run_wrk, server_env
from benchlib import (
    ROOT,
    base_dsn,
    get_meta,
    load_sql,
    percentile,
    recreate_database,
    serving,
    set_meta,
    table,
    use_bench_settings,
    with_database,
)

DB = "cortex_bench_voice"
GENERATOR = ROOT / "sql" / "bench" / "generate_voice.sql"
PGBENCH_SCRIPT = ROOT / "sql" / "bench" / "voice_client_data.pgbench"
RESULTS = ROOT / "bench-results"
HOST = "127.0.0.1"
BARE_PORT = 8197
CORTEX_PORT = 8198
PATH = "/api/v1/voice/client-data"
BARE_DB_CMD = DEFAULT_BARE_CMD.replace("--target bare ", "--target bare_db ")
TARGET_P99_MS = 10.0
TARGET_RPS = 2500.0


def dsn() -> str:
    """The benchmark database's URL (DATABASE_URL's server, database cortex_bench_voice)."""
    return with_database(base_dsn(), DB)


def generate(scale: float) -> None:
    """Drops, migrates and fills cortex_bench_voice at `scale`."""
    url = dsn()
    recreate_database(url, "cortex_bench")
    seconds = load_sql(url, GENERATOR, {"scale": str(scale)})
    set_meta(url, {"generated_seconds": f"{seconds:.1f}"})
    print(f"generated {DB} at scale {scale} in {seconds:.0f} s", flush=True)


def status(scale: float) -> bool:
    """True when the data set exists, is complete and has this scale."""
    meta = get_meta(dsn())
    return meta.get("complete") == "true" and float(meta.get("scale", "-1")) == scale


# --- SQL ----------------------------------------------------------------------------------------------


def run_pgbench(url: str, clients: int, duration: int, callers: int) -> dict[str, Any]:
    """pgbench -M simple over the client-data script; p50/p99 from the per-transaction log."""
    if not shutil.which("pgbench"):
        return {"skipped": "pgbench is not installed (Debian: postgresql-client)"}
    with tempfile.TemporaryDirectory() as logs:
        prefix = str(Path(logs) / "voice")
        cmd = ["pgbench", "-n", "-M", "simple", "-c", str(clients), "-j", "2", "-T", str(duration),
               "-D", f"callers={callers}", "-l", f"--log-prefix={prefix}", "-f", str(PGBENCH_SCRIPT), url]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120, check=False, cwd=ROOT)
        latencies = sorted(
            int(line.split()[2]) / 1000
            for log in Path(logs).glob("voice*")
            for line in log.read_text().splitlines()
            if line.strip()
        )
    (RESULTS / "voice").mkdir(parents=True, exist_ok=True)
    (RESULTS / "voice" / f"pgbench-c{clients}.txt").write_text(done.stdout + done.stderr)
    tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", done.stdout)
    if done.returncode != 0 or not tps or not latencies:
        return {"skipped": f"pgbench failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-300:]}"}
    return {"clients": clients, "tps": float(tps.group(1)), "transactions": len(latencies),
            "p50_ms": round(percentile(latencies, 50), 3), "p99_ms": round(percentile(latencies, 99), 3)}  # fmt: skip


# --- HTTP -----------------------------------------------------------------------------------------------


def client_data_lines(url: str, callers: int, n: int = 5000) -> list[tuple[str, str, str, str]]:
    """wrk request lines: random tenant, agent and caller (one in eleven new), with that agent's key."""
    with psycopg.connect(url) as conn:
        keys = conn.execute("select tenant, agent, platform_agent_id, key from bench.keys").fetchall()
    rng = random.Random(20261122)
    lines = []
    for _ in range(n):
        _tenant, _agent, platform_id, key = rng.choice(keys)
        caller = f"+1612{2000000 + rng.randint(1, callers * 11 // 10)}"
        body = json.dumps({"caller_id": caller, "agent_id": platform_id, "called_number": "+14155550100",
                           "call_sid": f"CA{rng.getrandbits(64):016x}"})  # fmt: skip
        lines.append(("POST", PATH, f"Bearer {key}", body))
    return lines


def bare_voice_lines(url: str, lines: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    """The same requests for the bare database handler: each body carries its key's claims (it does not
    authenticate), so it answers what Cortex answers for that request."""
    with psycopg.connect(url) as conn:
        claims = {key: {"role": "authenticated", "tenant_id": str(tenant_id), "agent": agent}
                  for key, tenant_id, agent in conn.execute(
                      "select k.key, t.id, k.agent from bench.keys k "
                      "join cortex.tenants t on t.slug = 'voice-' || k.tenant")}  # fmt: skip
    out = []
    for method, _path, auth, body in lines:
        data = json.loads(body)
        call = {"call": "voice_client_data", "args": [data["agent_id"], data["caller_id"]],
                "claims": claims[auth.removeprefix("Bearer ")]}  # fmt: skip
        out.append((method, "/", "", json.dumps(call)))
    return out


def wrk_row(server_url: str, lines: list[tuple[str, str, str, str]], label: str, connections: int,
            args: argparse.Namespace, n: int) -> dict[str, Any]:  # fmt: skip
    """One wrk row (bench_http.run_wrk, after `--warmup` unmeasured seconds) at `connections`: req/s,
    p50, p99, non-2xx, socket errors."""
    name = f"voice-{n:02d}-" + re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:50]
    wrk_args = argparse.Namespace(threads=2, connections=connections, duration=args.duration)
    r = run_wrk(server_url, lines, name, wrk_args, f"voice{n}", args.warmup)
    seconds = r["duration_us"] / 1e6
    row = {"label": label, "connections": connections, "rps": round(r["requests"] / seconds, 1) if seconds else None,
           "p50_ms": round(r["p50_us"] / 1000, 2), "p99_ms": round(r["p99_us"] / 1000, 2), "non2xx": r["non2xx"],
           "errors": r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"]}  # fmt: skip
    print(f"  {label} c{connections}: {row['rps']} req/s, p50 {row['p50_ms']} ms, p99 {row['p99_ms']} ms, "
          f"non-2xx {row['non2xx']}", flush=True)  # fmt: skip
    return row


# --- post-call -----------------------------------------------------------------------------------------


def post_call_events(url: str, count: int, callers: int) -> list[tuple[bytes, str]]:
    """`count` signed post_call_transcription events (raw body, ElevenLabs-Signature)."""
    from cortex.voice.service import signature_header

    with psycopg.connect(url) as conn:
        keys = conn.execute("select tenant, platform_agent_id from bench.keys").fetchall()
    rng = random.Random(7)
    run = f"{int(time.time())}"
    out = []
    for i in range(count):
        tenant, platform_id = rng.choice(keys)
        phone = f"+1612{2000000 + rng.randint(1, callers * 11 // 10)}"
        turns = [
            {"role": "agent", "message": "Hello, this is your voice agent. Who am I speaking with?"},
            {"role": "user", "message": rng.choice(["Hi, my name is Stefan.", "It's Maria here.", "Hello there."])
             + " I'm calling about my order and the delivery date, and the invoice looks wrong."},
            {"role": "agent", "message": "Let me check the order and the invoice for you."},
            {"role": "user", "message": "Thanks, the delivery is late again and I need it by Friday."},
        ]  # fmt: skip
        body = json.dumps({"type": "post_call_transcription", "event_timestamp": int(time.time()), "data": {
            "agent_id": platform_id, "conversation_id": f"bench_{run}_{i}", "status": "done", "transcript": turns,
            "metadata": {"start_time_unix_secs": int(time.time()) - 60, "call_duration_secs": 58,
                         "phone_call": {"direction": "inbound", "external_number": phone}}}}).encode()  # fmt: skip
        out.append((body, signature_header(f"bench-post-call-{tenant}", body)))
    return out


def post_calls(server_url: str, url: str, count: int, callers: int) -> dict[str, Any]:
    """Accept rate over HTTP (8 concurrent senders), then the worker's processing rate."""
    events = post_call_events(url, count, callers)
    with httpx.Client(base_url=server_url, timeout=30) as client:

        def send(item: tuple[bytes, str]) -> int:
            body, sig = item
            headers = {"ElevenLabs-Signature": sig, "Content-Type": "application/json"}
            return client.post("/api/v1/voice/post-call", content=body, headers=headers).status_code

        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(send, events))
        accepted_s = time.perf_counter() - started
    ok = sum(1 for s in statuses if s == 200)
    # Answers that fell back to the empty default are 200s too: the server's log counts them.
    # The worker, as `cortex queue work` runs it, in this process (local generator: no model key).
    use_bench_settings(url, 2)
    from cortex.queue.worker import load_handlers, run_once

    load_handlers()
    started = time.perf_counter()
    jobs = 0
    with psycopg.connect(url, autocommit=True) as conn:
        while n := run_once(conn, "bench-voice", 50):
            jobs += n
    processed_s = time.perf_counter() - started
    prefix = json.loads(events[0][0])["data"]["conversation_id"].rsplit("_", 1)[0] + "_%"
    with psycopg.connect(url) as conn:
        stored = conn.execute(
            "select count(*) filter (where status = 'done'), count(*) from cortex.voice_calls"
            " where conversation_id like %s",
            (prefix,),
        ).fetchone()
    assert stored is not None
    return {"events": count, "accepted_200": ok, "accept_seconds": round(accepted_s, 2),
            "accepted_per_s": round(ok / accepted_s, 1) if accepted_s else None, "jobs_run": jobs,
            "calls_stored": stored[0], "process_seconds": round(processed_s, 2),
            "calls_per_s": round(stored[0] / processed_s, 1) if processed_s else None}  # fmt: skip


# --- run ------------------------------------------------------------------------------------------------


POST_CALL_COLUMNS = [("events", "events"), ("accepted_per_s", "accepted/s"), ("calls_stored", "stored"),
                     ("calls_per_s", "processed calls/s")]  # fmt: skip


def markdown(results: dict[str, Any]) -> str:
    """The run as markdown tables (bench-results/voice.md)."""
    sql_rows = [r for r in results["sql"] if "skipped" not in r]
    lines = [f"Voice benchmark, scale {results['scale']} ({results['callers_per_tenant']:,} callers per tenant), "
             f"{results['started']}; {results['machine']['nproc']} cores, WORKERS={results['workers']}.", "",
             "SQL (pgbench -M simple, claims + public.voice_client_data in one round trip):", "",
             table(sql_rows, [("clients", "clients"), ("tps", "tx/s"), ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms")]),
             "", f"HTTP (wrk -t2, {results['duration']} s per row after {results.get('warmup', 0)} s unmeasured, POST "
             "/api/v1/voice/client-data with agent keys; the bare ASGI handlers in the same run):",
             "", table(results["http"], [("label", "server"), ("connections", "connections"), ("rps", "req/s"),
                                         ("p50_ms", "p50 ms"), ("p99_ms", "p99 ms"), ("non2xx", "non-2xx")]),
             "", "Post-call (signed webhooks, then the worker with the local generator):", "",
             table([results["post_call"]], POST_CALL_COLUMNS)]  # fmt: skip
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """pgbench, then wrk against the bare handler and Cortex, then post-call; writes bench-results/voice.*"""
    url = dsn()
    meta = get_meta(url)
    if meta.get("complete") != "true":
        print(f"{DB} is missing: run `scripts/bench voice --scale S` (it generates first)", file=sys.stderr)
        return 1
    callers = int(meta["callers_per_tenant"])
    results: dict[str, Any] = {"scale": float(meta["scale"]), "callers_per_tenant": callers, "workers": args.workers,
                               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
                               "duration": args.duration, "warmup": args.warmup}  # fmt: skip
    connections = [int(c) for c in args.connections.split(",")]
    print("SQL: pgbench", flush=True)
    results["sql"] = [run_pgbench(url, c, args.duration, callers) for c in connections]
    for r in results["sql"]:
        print(f"  {r}", flush=True)
    # The call-start path needs no embedding model: the servers skip loading it (seconds per worker).
    env = {**server_env(url, args.workers), "CORTEX_EMBEDDINGS": "none"}
    lines = client_data_lines(url, callers)
    bare_lines = bare_voice_lines(url, lines)
    rows: list[dict[str, Any]] = []
    with serving(command(DEFAULT_BARE_CMD, BARE_PORT), env, f"http://{HOST}:{BARE_PORT}",
                 RESULTS / "voice-bare.log", "/") as bare:  # fmt: skip
        results["bare_server"] = describe(bare)
        for c in connections:
            rows.append(wrk_row(bare.url, [("GET", "/", "", "")], "bare ASGI handler", c, args, len(rows)))
    # The floor of any Python edge on this stack: the same SQL call, one pooled round trip, nothing else.
    with serving(command(BARE_DB_CMD, BARE_PORT), env, f"http://{HOST}:{BARE_PORT}",
                 RESULTS / "voice-bare-db.log", "/") as bare_db:  # fmt: skip
        results["bare_db_server"] = describe(bare_db)
        for c in connections:
            rows.append(wrk_row(bare_db.url, bare_lines, "bare ASGI handler + the SQL call", c, args, len(rows)))
    with serving(command(DEFAULT_CORTEX_CMD, CORTEX_PORT), env, f"http://{HOST}:{CORTEX_PORT}",
                 RESULTS / "voice-cortex.log") as cortex:  # fmt: skip
        results["cortex_server"] = describe(cortex)
        first = httpx.post(cortex.url + PATH, content=lines[0][3], timeout=10,
                           headers={"Authorization": lines[0][2], "Content-Type": "application/json"})  # fmt: skip
        results["first_answer"] = {"status": first.status_code, "fallback": first.headers.get("X-Voice-Fallback")}
        for c in connections:
            rows.append(wrk_row(cortex.url, lines, "cortex client-data", c, args, len(rows)))
            # A reference in the same run: the edge's cheapest route that reaches the database.
            rows.append(wrk_row(cortex.url, [("GET", "/health/ready", "", "")], "cortex GET /health/ready", c, args,
                                len(rows)))  # fmt: skip
        results["http"] = rows
        print("post-call", flush=True)
        results["post_call"] = post_calls(cortex.url, url, args.post_calls, callers)
        print(f"  {results['post_call']}", flush=True)
    results["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "voice.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    text = markdown(results)
    (RESULTS / "voice.md").write_text(text)
    print()
    print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """generate | status | run (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("generate", "status"):
        p = sub.add_parser(name)
        p.add_argument("--scale", type=float, default=1.0)
    p = sub.add_parser("run")
    p.add_argument("--duration", type=int, default=10, help="seconds per pgbench and wrk row (default 10)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured seconds of wrk before each row (default 5)")
    p.add_argument("--connections", default="16,50", help="clients / connections, comma-separated (default 16,50)")
    p.add_argument("--post-calls", type=int, default=200, help="post-call webhooks to send and process (default 200)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="WORKERS for both servers")
    args = parser.parse_args(argv)
    if args.command == "generate":
        generate(args.scale)
        return 0
    if args.command == "status":
        return 0 if status(args.scale) else 1
    if not 1 <= args.duration <= 120 or not 1 <= args.post_calls <= 100_000:
        parser.error("--duration must be 1-120 seconds and --post-calls 1-100000")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
