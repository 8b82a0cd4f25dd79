#!/usr/bin/env python3
"""Webhook delivery benchmark (issue 4): outbox messages delivered to a local receiver by one worker.

usage: bench_webhooks.py run [--messages N] [--batch N] [--concurrency N] [--write-docs]
       bench_webhooks.py receiver SECRET      (internal: the receiver process; prints its port)

`run` recreates the database cortex_bench_webhooks on DATABASE_URL's server, migrates it, queues
N messages (default 20,000) for five recipients of one tenant with cortex.notify, starts the
receiver in its own process (asyncio, HTTP/1.1 keep-alive; it verifies every signature and
counts idempotency keys), then delivers everything with one worker (`run_delivery(once=True)`,
in this process) and reports messages/s. It checks that every message is delivered, the
receiver saw each key once and every signature verified. Results go to
bench-results/webhooks.json; with --write-docs the "Webhook delivery" section of
docs/benchmarks.md is appended (or, on a re-run, replaced in place; nothing else is touched).
All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, base_dsn, recreate_database, with_database
from benchlib import machine_info as full_machine_info

from cortex.notifications import delivery as webhooks

BENCH_DB = "cortex_bench_webhooks"
RESULTS = ROOT / "bench-results" / "webhooks.json"
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Webhook delivery (issue 4)"
TARGET_PER_S = 500.0
RECIPIENTS = ("agent:luna", "agent:mia", "agent:anna", "agent:jasper", "monitor")


# --- the receiver (its own process, so that it does not share the worker's interpreter) -----------


def receiver_main(secret: str) -> None:
    """Serves POST /hooks/* (verify, count keys, answer 200) and GET /stats on 127.0.0.1."""
    seen: set[str] = set()
    stats = {"requests": 0, "unique": 0, "duplicates": 0, "bad_signatures": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                if request_line.startswith(b"GET /stats"):
                    payload = json.dumps(stats).encode()
                else:
                    stats["requests"] += 1
                    if not webhooks.verify(
                        secret, headers.get("x-cortex-timestamp"), body, headers.get("x-cortex-signature")
                    ):
                        stats["bad_signatures"] += 1
                    key = headers.get("idempotency-key", "")
                    if key in seen:
                        stats["duplicates"] += 1
                    else:
                        seen.add(key)
                        stats["unique"] += 1
                    payload = b"ok"
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(payload), payload))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(port, flush=True)
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


# --- the run ---------------------------------------------------------------------------------------


def machine_info(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """CPU, Postgres and Python versions of this run (the fields this section shows)."""
    m = full_machine_info(conn)
    return {
        "cpus": m["cpus"],
        "cpu_model": m["cpu_model"],
        "postgres": m["postgres"].split(" on ")[0],
        "python": m["python"],
        "httpx": httpx.__version__,
        "load_average_at_start": m["load_average_at_start"],
    }


def run(messages: int, batch: int, concurrency: int) -> dict[str, Any]:
    """One benchmark run; returns the results (raising when a message went missing)."""
    dsn = with_database(base_dsn(), BENCH_DB)
    print(f"bench: recreating and migrating {BENCH_DB}", flush=True)
    recreate_database(dsn, BENCH_DB)
    secret = "bench-" + os.urandom(8).hex()
    receiver = subprocess.Popen([sys.executable, __file__, "receiver", secret], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        with psycopg.connect(dsn, autocommit=True) as conn:
            machine = machine_info(conn)
            row = conn.execute("select cortex.create_tenant('Bench', 'bench', 'UTC')").fetchone()
            assert row is not None
            tenant = row[0]
            for name in ("luna", "mia", "anna", "jasper"):
                conn.execute("select cortex.create_agent(%s, %s)", (tenant, name))
            for recipient in RECIPIENTS:
                conn.execute(
                    "insert into cortex.webhook_endpoints (tenant_id, recipient, url, secret) values (%s, %s, %s, %s)",
                    (tenant, recipient, f"http://127.0.0.1:{port}/hooks/{recipient}", secret),
                )
            started = time.perf_counter()
            conn.execute(
                "select count(cortex.notify(%s, 'bench.event', (%s::text[])[1 + g %% %s],"
                " jsonb_build_object('n', g, 'text', repeat('x', 200))))"
                " from generate_series(1, %s) g",
                (tenant, list(RECIPIENTS), len(RECIPIENTS), messages),
            )
            enqueue_s = time.perf_counter() - started
            conn.execute("vacuum analyze cortex.outbox")

        config = webhooks.DeliveryConfig(batch=batch, concurrency=concurrency, timeout_seconds=5.0)
        print(f"bench: delivering {messages} messages (batch {batch}, concurrency {concurrency})", flush=True)
        started = time.perf_counter()
        totals = webhooks.run_delivery("bench", once=True, config=config, dsn=dsn)
        deliver_s = time.perf_counter() - started

        with psycopg.connect(dsn, autocommit=True) as conn:
            states: dict[str, int] = dict(
                conn.execute("select status, count(*) from cortex.outbox group by 1").fetchall()
            )
            lag = conn.execute(
                "select percentile_cont(array[0.5, 0.95]) within group (order by extract(epoch from"
                " delivered_at - created_at)) from cortex.outbox"
            ).fetchone()
        seen = httpx.get(f"http://127.0.0.1:{port}/stats", timeout=5).json()
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)

    ok = (
        states == {"delivered": messages}
        and seen["unique"] == messages
        and seen["duplicates"] == 0
        and seen["bad_signatures"] == 0
    )
    per_s = round(messages / deliver_s, 1)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine,
        "messages": messages,
        "batch": batch,
        "concurrency": concurrency,
        "enqueue_seconds": round(enqueue_s, 2),
        "enqueue_per_s": round(messages / enqueue_s, 1),
        "deliver_seconds": round(deliver_s, 2),
        "delivered_per_s": per_s,
        "rounds_delivered": totals.delivered,
        "receiver": seen,
        "outbox_states": states,
        "queue_wait_p50_s": round(float(lag[0][0]), 2) if lag and lag[0] else None,
        "queue_wait_p95_s": round(float(lag[0][1]), 2) if lag and lag[0] else None,
        "all_delivered_once": ok,
        "target": f">= {TARGET_PER_S:.0f} messages/s with one worker",
        "target_met": per_s >= TARGET_PER_S,
    }


def markdown(r: dict[str, Any]) -> str:
    """The docs/benchmarks.md section for a result."""
    m = r["machine"]
    rows = [
        ("Measure", "Result"),
        ("---", "---"),
        (
            "Delivery throughput, one worker",
            f"**{r['delivered_per_s']:,} messages/s** ({r['messages']:,} in {r['deliver_seconds']} s)",
        ),
        (
            "Every message delivered, each key once, every signature valid",
            "yes" if r["all_delivered_once"] else "NO",
        ),
        (
            f"Queueing {r['messages']:,} messages in one transaction (`cortex.notify`)",
            f"{r['enqueue_seconds']} s ({r['enqueue_per_s']:,}/s)",
        ),
        (
            "Time from queueing to delivery, p50 / p95 (whole backlog queued at once)",
            f"{r['queue_wait_p50_s']} s / {r['queue_wait_p95_s']} s",
        ),
    ]
    table = "\n".join(f"| {a} | {b} |" for a, b in rows)
    return f"""{SECTION}

Run of {r["date"]} (`bench-results/webhooks.json`) on the machine of
[Machine and settings](#machine-and-settings) ({m["cpus"]} x {m["cpu_model"]}, {m["postgres"]}, Python
{m["python"]}, httpx {m["httpx"]}); load average {m["load_average_at_start"]} at the start. Reproduce with
`.venv/bin/python scripts/bench_webhooks.py run --write-docs` (reads `DATABASE_URL`; builds its own database
`cortex_bench_webhooks`, about 30 s in all).

### Data set

{r["messages"]:,} outbox messages of one tenant for five recipients (four agents and the monitor), each
with its own endpoint row in `cortex.webhook_endpoints`, queued with `cortex.notify` in one transaction.
Bodies are JSON of about 300 bytes.

### What was measured

One worker process (`cortex.notifications.delivery.run_delivery(once=True)`: batch {r["batch"]}, {r["concurrency"]}
requests in flight over one keep-alive httpx client, 5 s timeout) delivers the whole backlog to a
receiver on 127.0.0.1 that runs in its own process (asyncio, HTTP/1.1 keep-alive), checks every HMAC
signature and counts idempotency keys. Throughput is messages over the wall time of the delivery,
from the first claim until nothing is due. Afterwards the script checks that every outbox row is
`delivered`, that the receiver saw every key exactly once and that no signature failed. Retries,
timeouts, dead letters and a killed worker are covered by `tests/test_webhooks.py`, not timed here.

### Results

{table}

Each round of {r["batch"]} messages costs the database three statements (`claim_outbox`,
`mark_delivered`, and `mark_failed` when something failed); the worker's time goes to HTTP (httpx
and the thread pool), and the receiver shares the same two cores.

### Targets

| target | measured | result |
|---|---|---|
| webhook delivery >= {TARGET_PER_S:.0f} messages/s to a local receiver, one worker | \
{r["delivered_per_s"]:,}/s | {"met" if r["target_met"] else "**missed**"} |
"""


def write_docs(section: str) -> None:
    """Appends the section to docs/benchmarks.md, or replaces an earlier run's section in place."""
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    start = text.find(SECTION)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(SECTION))
        text = text[:start] + section + ("\n" + text[nxt + 1 :] if nxt != -1 else "")
    DOCS.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(prog="bench_webhooks.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the benchmark")
    r.add_argument("--messages", type=int, default=20_000)
    r.add_argument("--batch", type=int, default=100)
    r.add_argument("--concurrency", type=int, default=16)
    r.add_argument("--write-docs", action="store_true", help="append/replace the section in docs/benchmarks.md")
    rcv = sub.add_parser("receiver", help=argparse.SUPPRESS)
    rcv.add_argument("secret")
    args = parser.parse_args(argv)
    if args.command == "receiver":
        receiver_main(args.secret)
        return 0
    result = run(args.messages, args.batch, args.concurrency)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, default=str))
    section = markdown(result)
    print(section)
    if args.write_docs:
        write_docs(section)
        print(f"bench: wrote the section to {DOCS.relative_to(ROOT)}")
    return 0 if result["all_delivered_once"] else 1


if __name__ == "__main__":
    sys.exit(main())
