#!/usr/bin/env python3
"""Customer agents benchmark (issue 11): time to the first streamed byte of
POST /api/v1/customers/{id}/chat/stream, and the overhead of a handoff (abort plus restart),
against the local stand-in of the Messages API.

usage: bench_customers.py run [--requests N] [--write-docs]

`run` recreates the database cortex_bench_customers on DATABASE_URL's server, migrates it, makes a
tenant with the two customer agents and a customer with agreements, receivables, projects,
artifacts and events (its context near the 3,000-token budget), serves the app with uvicorn in a
thread on 127.0.0.1 and starts the Messages API stand-in (tests/fake_anthropic.py) in another. Then,
N requests each, one at a time:
- offline: the deterministic local agent (no key): one tool call and the answer;
- stand-in, no handoff: customer_mgmt answers in one streamed turn;
- stand-in, handoff: customer_mgmt calls handoff (its stream is aborted), product_mgmt answers.
It reports time to the first byte, to the first text delta and to the end, and the handoff's
overhead: the gap between the handoff's tool output and product_mgmt's first text delta (abort,
the recorded Cortex handoff, the budget, the new request), and the difference of the medians of the
whole requests. Results go to bench-results/customers.json; with --write-docs the "Customer agents"
section of docs/benchmarks.md is appended or replaced. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import uvicorn
from functions_framework.aio import create_asgi_app

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib import ROOT, base_dsn, machine_info, percentile, recreate_database, with_database

from cortex.config import get_settings
from tests.fake_anthropic import FakeAnthropic, text_turn, tool_turn

BENCH_DB = "cortex_bench_customers"
RESULTS = ROOT / "bench-results" / "customers.json"
DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Customer agents (issue 11)"
ANSWER = "The account is healthy overall. " * 6 + "Want me to draft a follow-up email?"
HANDOFF = {"reason": "Needs product tools", "summary": "User wants a PRD", "pendingRequest": "Write the PRD"}


def prepare(dsn: str) -> tuple[str, str, int]:
    """The tenant's customer_mgmt key, a customer with a full context, and that context's tokens."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select cortex.create_tenant('Bench', 'bench', 'UTC')").fetchone()
        assert row is not None
        tenant = str(row[0])
        for name in ("customer_mgmt", "product_mgmt"):
            conn.execute("select cortex.create_agent(%s, %s, p_daily_token_budget => 1000000000)", (tenant, name))
        key_row = conn.execute("select cortex.create_agent_key(%s, 'customer_mgmt')", (tenant,)).fetchone()
        assert key_row is not None
        conn.execute("select set_config('role', 'authenticated', false)")
        claims = json.dumps({"role": "authenticated", "tenant_id": tenant, "agent": "customer_mgmt"})
        conn.execute("select set_config('request.jwt.claims', %s, false)", (claims,))
        info = {"vertical": "SaaS", "persona": "CTO", "icp": "Mid-market B2B SaaS", "about": "Enterprise SaaS. " * 20,
                "team": [{"name": f"Person {i}", "role": "Engineer"} for i in range(6)]}  # fmt: skip
        cid = conn.execute("select (public.upsert_contact(email => 'cto@acme.example', name => 'Alice',"
                           " company_name => 'Acme Corp', custom_fields => %s::jsonb)) ->> 'id'",
                           (json.dumps(info),)).fetchone()[0]  # type: ignore[index]  # fmt: skip
        for i in range(5):
            ends = date.today() + timedelta(days=10 + 60 * i)
            conn.execute("select public.add_customer_agreement(%s, %s, 'retainer', %s, %s, 5000)",
                         (cid, f"Agreement {i}", date(2026, 1, 1), ends))  # fmt: skip
            conn.execute("select public.add_customer_receivable(%s, 1500, %s)", (cid, date.today() - timedelta(days=i)))
        for i in range(7):
            project = conn.execute("select public.create_customer_project(%s, %s, %s) ->> 'id'",
                                   (cid, f"Project {i}", "A project description. " * 6)).fetchone()[0]  # type: ignore[index]  # fmt: skip
            conn.execute("select public.create_customer_artifact(%s, %s, 'strategy', '# Doc')", (project, f"Doc {i}"))
        for i in range(12):
            conn.execute("select public.log_customer_event(%s, 'note', %s)", (cid, f"Note {i}: " + "details " * 20))
        tokens = conn.execute("select ceil(length(public.build_customer_context(%s)) / 4.0)::int", (cid,)).fetchone()
    return str(key_row[0]), str(cid), int(tokens[0]) if tokens else 0


@contextmanager
def serving(dsn: str) -> Iterator[str]:
    """The app under uvicorn in a thread on a free port (the chat needs no embedding model)."""
    os.environ["DATABASE_URL"] = dsn
    get_settings.cache_clear()
    app = create_asgi_app(target="api", source=str(ROOT / "functions" / "main.py"))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def one_request(client: httpx.Client, url: str, key: str, text: str) -> dict[str, float]:
    """One chat request, read as a client reads it: first byte, first text delta, the handoff's gap, end."""
    body = {"messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}
    started = time.perf_counter()
    marks: dict[str, float] = {}
    buffer = b""
    with client.stream("POST", url, json=body, headers={"Authorization": f"Bearer {key}"}) as response:
        assert response.status_code == 200, response.read()
        for chunk in response.iter_bytes():
            now = time.perf_counter() - started
            marks.setdefault("first_byte", now)
            buffer += chunk
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                data = event[6:]
                if data == b"[DONE]":
                    continue
                part = json.loads(data)
                if part["type"] == "text-delta":
                    marks.setdefault("first_text", now)
                    if "handoff" in marks:
                        marks.setdefault("after_handoff_text", now)
                elif part["type"] == "tool-output-available" and (part.get("output") or {}).get("__handoff"):
                    marks["handoff"] = now
                elif part["type"] == "error":
                    raise RuntimeError(part["errorText"])
    marks["total"] = time.perf_counter() - started
    return marks


def stats(values: list[float]) -> dict[str, float]:
    """p50, p95 and max in milliseconds."""
    s = sorted(values)
    return {"n": len(s), "p50_ms": round(percentile(s, 50) * 1000, 2), "p95_ms": round(percentile(s, 95) * 1000, 2),
            "max_ms": round(s[-1] * 1000, 2)}  # fmt: skip


def series(samples: list[dict[str, float]], key: str) -> dict[str, float]:
    """The statistics of one mark across samples."""
    return stats([s[key] for s in samples if key in s])


def run(requests: int) -> dict[str, Any]:
    """One benchmark run."""
    dsn = with_database(base_dsn(), BENCH_DB)
    print(f"bench: recreating and migrating {BENCH_DB}", flush=True)
    recreate_database(dsn, BENCH_DB)
    key, customer, tokens = prepare(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        machine = machine_info(conn)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine,
                               "requests": requests, "context_tokens": tokens}  # fmt: skip
    with FakeAnthropic() as fake, serving(dsn) as base, httpx.Client(timeout=60) as client:
        url = f"{base}/api/v1/customers/{customer}/chat/stream"
        one_request(client, url, key, "How is the account?")  # warm-up: pools, first queries
        print(f"bench: offline, {requests} requests", flush=True)
        offline = [one_request(client, url, key, "How is the account?") for _ in range(requests)]
        os.environ.update({"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": fake.base_url,
                           "CORTEX_LLM_MAX_RETRIES": "0"})  # fmt: skip
        get_settings.cache_clear()
        fake.script = [text_turn(ANSWER)]
        one_request(client, url, key, "How is the account?")
        plain, handoff = [], []
        print(f"bench: stand-in, {requests} requests without and {requests} with a handoff", flush=True)
        for _ in range(requests):
            fake.script = [text_turn(ANSWER)]
            plain.append(one_request(client, url, key, "How is the account?"))
            fake.script = [tool_turn("handoff", HANDOFF, text="Handing over.", trailing_text="unsent " * 50),
                           text_turn(ANSWER)]  # fmt: skip
            handoff.append(one_request(client, url, key, "Write a PRD"))
    gaps = [s["after_handoff_text"] - s["handoff"] for s in handoff if "handoff" in s and "after_handoff_text" in s]
    results.update({
        "offline": {k: series(offline, k) for k in ("first_byte", "first_text", "total")},
        "standin": {k: series(plain, k) for k in ("first_byte", "first_text", "total")},
        "standin_handoff": {k: series(handoff, k) for k in ("first_byte", "first_text", "total")},
        "handoff_gap": stats(gaps),
        "handoff_overhead_p50_ms": round((series(handoff, "total")["p50_ms"] - series(plain, "total")["p50_ms"]), 2),
    })  # fmt: skip
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2, default=str))
    return results


def section(r: dict[str, Any]) -> str:
    """The docs/benchmarks.md section for these results."""
    m = r["machine"]
    rows = []
    for label, key in (("offline (local agent: tool call + answer)", "offline"),
                       ("stand-in, no handoff", "standin"), ("stand-in, one handoff", "standin_handoff")):  # fmt: skip
        s = r[key]
        rows.append(f"| {label} | {s['first_byte']['p50_ms']} / {s['first_byte']['p95_ms']} | "
                    f"{s['first_text']['p50_ms']} / {s['first_text']['p95_ms']} | "
                    f"{s['total']['p50_ms']} / {s['total']['p95_ms']} |")  # fmt: skip
    g = r["handoff_gap"]
    return f"""{SECTION}

Run of {r["date"]} (`bench-results/customers.json`) on {m["cpus"]} x {m["cpu_model"]}, {m["memory_gib"]} GiB,
{m["postgres"].split(" on ")[0]}, Python {m["python"]}; load average {m["load_average_at_start"]} at the start
(the machine is shared). Reproduce with `scripts/bench customers --write-docs` (builds its own database
`cortex_bench_customers`, under a minute).

### What was measured

`POST /api/v1/customers/{{id}}/chat/stream`, {r["requests"]} requests per row, one at a time, read by an httpx
client as the AI SDK reads it, against the app under uvicorn in a thread and the Messages API stand-in
(`tests/fake_anthropic.py`, streaming, no delay) on 127.0.0.1. The customer has 5 agreements, 5 receivables,
7 projects with an artifact each and 19 events (a context of about {r["context_tokens"]} tokens). First byte:
the `start` part (after the checks and `start_customer_chat`, which builds the context); first text: the first
`text-delta`. The handoff row: customer_mgmt streams a sentence and calls `handoff` (with 50 more words
scripted after it, never read: the stream is aborted), product_mgmt answers. Milliseconds, p50 / p95.

### Results

| request | first byte | first text | whole response |
|---|---|---|---|
{chr(10).join(rows)}

Handoff overhead (abort of the first stream, `record_customer_handoff` (a Cortex handoff created, accepted and
completed), the budget reservation, the new agent's request, to its first text): p50 {g["p50_ms"]} ms, p95
{g["p95_ms"]} ms (n {g["n"]}). Difference of the medians of whole responses with and without a handoff:
{r["handoff_overhead_p50_ms"]} ms. Against the real API, add the model's own time to first token per agent.
"""


def write_docs(text: str) -> None:
    """Appends the section to docs/benchmarks.md, or replaces an earlier run's section in place."""
    doc = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    start = doc.find(SECTION)
    if start == -1:
        doc = doc.rstrip("\n") + "\n\n" + text
    else:
        nxt = doc.find("\n## ", start + len(SECTION))
        doc = doc[:start] + text + ("\n" + doc[nxt + 1 :] if nxt != -1 else "")
    DOCS.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    parser = argparse.ArgumentParser(prog="bench_customers.py", description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the benchmark")
    r.add_argument("--requests", type=int, default=50)
    r.add_argument("--write-docs", action="store_true", help="append/replace the section in docs/benchmarks.md")
    args = parser.parse_args(argv)
    results = run(args.requests)
    print(section(results))
    if args.write_docs:
        write_docs(section(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
