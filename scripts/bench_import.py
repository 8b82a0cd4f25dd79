#!/usr/bin/env python3
"""Import throughput (issue 7, backfill): interactions stored per second by POST /interactions/import
and by `cortex import FILE`, summaries afterwards (not counted).

usage: bench_import.py [--interactions 100000] [--contacts 5000] [--batch 1000] [--clients 2] [--workers 2]
                       [--parallel 2]

A template database (cortex_bench_import_tpl: migrated, one tenant, its agents and `--contacts`
contacts) is built once; each run imports into a fresh copy of it (cortex_bench_import), so both
runs start from the same state. The file is JSON lines of realistic interactions (emails, calls,
tickets, notes; 200-1,500 characters of content; occurred_at over the last two years) over the
existing contacts, by contact_id for 80 % and by contact_email for 20 %. The HTTP run posts
batches of `--batch` items from `--clients` threads to `cortex serve` (WORKERS=`--workers`); the
CLI run is one `cortex import` process (two batches in flight, its default). A re-run of the CLI
import measures the duplicate path. Afterwards (not counted) the contexts the imports left to the
worker are rendered by the render_contexts handler, timed. Every loop is bounded and all traffic
stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (
    ROOT,
    base_dsn,
    http_server,
    machine_info,
    recreate_database,
    table,
    wait_for_quiet,
    with_database,
)

BENCH_DB = "cortex_bench_import"
TEMPLATE_DB = "cortex_bench_import_tpl"
RESULTS = ROOT / "bench-results" / "import.json"
DATA = ROOT / "bench-results" / "import" / "interactions.jsonl"
HTTP_PORT = 8091
TARGET_PER_S = 2000.0

TYPES = ["email_received"] * 4 + ["email_sent"] * 3 + ["call"] * 2 + ["ticket_opened", "ticket_resolved", "note"]
TOPICS = ["the delayed order #{n}", "pricing for {n} units", "a damaged shipment", "the renewal in March",
          "an invoice question", "the onboarding call", "lid sizes for the {n} cups", "a refund for order #{n}",
          "switching to the annual plan", "a missing tracking number"]  # fmt: skip
SENTENCES = ["Thanks for getting back to me so quickly.", "We need this sorted before Friday.",
             "Could you send the updated quote?", "The team is happy with the last delivery.",
             "I am not sure the current plan still fits us.", "Please call me tomorrow morning.",
             "Our finance team needs a corrected invoice.", "We are considering other suppliers.",
             "Can you confirm the delivery date?", "Everything arrived in good condition."]  # fmt: skip


def setup_template(dsn_base: str, contacts: int) -> None:
    """The template: migrated, tenant `bench` with its agents and key, `contacts` contacts."""
    tpl = with_database(dsn_base, TEMPLATE_DB)
    recreate_database(tpl, TEMPLATE_DB)
    with psycopg.connect(tpl, autocommit=True) as conn:
        row = conn.execute("select cortex.create_tenant('Bench', 'bench', 'UTC')").fetchone()
        assert row is not None
        tid = row[0]
        conn.execute("select cortex.create_agent(%s, 'luna')", (tid,))
        conn.execute(
            "insert into cortex.contacts (tenant_id, email, name, company_name) "
            "select %s, 'c' || g || '@example.com', 'Contact ' || g, 'Company ' || (g %% 700) "
            "from generate_series(1, %s) g",
            (tid, contacts),
        )
        conn.execute("vacuum (analyze) cortex.contacts")
    with psycopg.connect(with_database(dsn_base, "postgres"), autocommit=True) as admin:
        admin.execute(f"select pg_terminate_backend(pid) from pg_stat_activity where datname = '{TEMPLATE_DB}'")


def fresh_copy(dsn_base: str) -> tuple[str, str, str]:
    """A fresh copy of the template; its DSN, tenant id and a new key of luna."""
    dsn = with_database(dsn_base, BENCH_DB)
    recreate_database(dsn, BENCH_DB, template=TEMPLATE_DB)
    with psycopg.connect(dsn, autocommit=True) as conn:
        tid = conn.execute("select id::text from cortex.tenants where slug = 'bench'").fetchone()
        assert tid is not None
        key = conn.execute("select cortex.create_agent_key(%s, 'luna')", (tid[0],)).fetchone()
        assert key is not None
        return dsn, tid[0], key[0]


def generate_file(dsn: str, interactions: int, path: Path, seed: int = 7) -> int:
    """Writes `interactions` JSON lines over the contacts of the copy; returns the file's bytes."""
    rng = random.Random(seed)
    with psycopg.connect(dsn, autocommit=True) as conn:
        contacts = conn.execute("select id::text, email from cortex.contacts order by email").fetchall()
    now = datetime.now(UTC)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as out:
        for n in range(interactions):
            cid, email = contacts[min(len(contacts) - 1, int(len(contacts) * rng.random() ** 1.6))]
            kind = rng.choice(TYPES)
            topic = rng.choice(TOPICS).format(n=1000 + n % 9000)
            body = " ".join(rng.choice(SENTENCES) for _ in range(rng.randint(4, 25)))
            item: dict[str, Any] = {
                "type": kind,
                "external_id": f"src-{n}",
                "occurred_at": (now - timedelta(seconds=rng.randint(60, 730 * 86400))).isoformat(),
                "direction": "outbound" if kind in ("email_sent",) else "inbound",
                "subject": f"About {topic}",
                "raw_content": f"Hi, about {topic}. {body}",
                "thread_id": f"thr-{n % 20000}",
                "metadata": {"source": "helpdesk-export", "mailbox": rng.choice(["sales", "support"])},
            }
            item.update({"contact_email": email} if rng.random() < 0.2 else {"contact_id": cid})
            out.write(json.dumps(item) + "\n")
    return path.stat().st_size


def stored(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "select (select count(*) from cortex.interactions), "
            "(select count(*) from cortex.jobs where kind = 'summarise_interaction' and status = 'queued')"
        ).fetchone()
        assert row is not None
        return {"interactions": int(row[0]), "summaries_queued": int(row[1])}


def run_http(dsn: str, key: str, path: Path, batch: int, clients: int, workers: int) -> dict[str, Any]:
    """POSTs the file in batches from `clients` threads; stored interactions per second of wall time."""
    lines = path.read_text().splitlines()
    bodies = ["[" + ",".join(lines[i : i + batch]) + "]" for i in range(0, len(lines), batch)]
    env = {**os.environ, "DATABASE_URL": dsn, "WORKERS": str(workers)}
    env.pop("ANTHROPIC_API_KEY", None)
    latencies: list[float] = []
    totals = {"inserted": 0, "duplicates": 0, "failed": 0}
    errors: list[str] = []
    lock = threading.Lock()
    next_body = [0]
    log = ROOT / "bench-results" / "import" / "api.log"
    with http_server(
        [str(ROOT / ".venv/bin/cortex"), "serve", "--host", "127.0.0.1", "--port", str(HTTP_PORT)],
        env,
        f"http://127.0.0.1:{HTTP_PORT}",
        log,
    ) as base:

        def loop() -> None:
            with httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {key}"}) as client:
                while True:
                    with lock:
                        if next_body[0] >= len(bodies):
                            return
                        body = bodies[next_body[0]]
                        next_body[0] += 1
                    t0 = time.perf_counter()
                    r = client.post(
                        "/api/v1/interactions/import", content=body, headers={"Content-Type": "application/json"}
                    )
                    took = time.perf_counter() - t0
                    with lock:
                        if r.status_code != 200:
                            errors.append(f"{r.status_code}: {r.text[:200]}")
                            continue
                        latencies.append(took)
                        for k in totals:
                            totals[k] += r.json()[k]

        threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(3600)
        wall = time.perf_counter() - started
    lat = sorted(latencies)
    return {
        "path": "HTTP", "batch": batch, "clients": clients, "server_workers": workers, **totals,
        "errors": errors[:5], "wall_s": round(wall, 2), "per_s": round(totals["inserted"] / wall, 1),
        "batch_p50_ms": round(lat[len(lat) // 2] * 1000, 1) if lat else None,
        "batch_p95_ms": round(lat[int(len(lat) * 0.95)] * 1000, 1) if lat else None,
    }  # fmt: skip


def run_cli(dsn: str, path: Path, batch: int, parallel: int, label: str) -> dict[str, Any]:
    """One `cortex import` process over the file; stored interactions per second of wall time."""
    env = {**os.environ, "DATABASE_URL": dsn}
    env.pop("ANTHROPIC_API_KEY", None)
    cmd = [str(ROOT / ".venv/bin/cortex"), "--json", "--tenant", "bench", "--agent", "luna", "import", str(path),
           "--batch-size", str(batch), "--parallel", str(parallel), "--restart", "--no-progress"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"cortex import failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.loads(done.stdout)
    count = summary["inserted"] or summary["duplicates"]
    return {
        "path": label, "batch": batch, "clients": parallel, "inserted": summary["inserted"],
        "duplicates": summary["duplicates"], "failed": summary["failed"], "wall_s": round(wall, 2),
        "per_s": round(count / wall, 1),
    }  # fmt: skip


def render_afterwards(dsn: str) -> dict[str, Any]:
    """Runs the render_contexts jobs the imports queued (the worker's handler, in this process) and
    times them: the rendering an import leaves to the worker, not counted in its throughput."""
    from cortex.interactions.jobs import render_contexts

    with psycopg.connect(dsn, autocommit=True) as conn:
        jobs = conn.execute(
            "select tenant_id::text, payload from cortex.jobs where kind = 'render_contexts' order by id"
        ).fetchall()
        started = time.perf_counter()
        rendered = sum(render_contexts(conn, tenant_id, payload)["rendered"] for tenant_id, payload in jobs)
        seconds = time.perf_counter() - started
    return {"jobs": len(jobs), "rendered": rendered, "seconds": round(seconds, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interactions", type=int, default=100_000)
    parser.add_argument("--contacts", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=2, help="concurrent HTTP clients (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="cortex serve processes (default 2)")
    parser.add_argument("--parallel", type=int, default=2, help="cortex import batches in flight (default 2)")
    parser.add_argument("--max-load", type=float, default=1.5, help="start when the 1-min load is below this")
    parser.add_argument("--max-wait", type=float, default=300.0)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    dsn_base = base_dsn()
    load_before = wait_for_quiet(args.max_load, args.max_wait)
    setup_template(dsn_base, args.contacts)
    dsn, _, key = fresh_copy(dsn_base)
    size = generate_file(dsn, args.interactions, DATA)
    with psycopg.connect(dsn, autocommit=True) as conn:
        machine = machine_info(conn)
    runs = []

    runs.append(run_http(dsn, key, DATA, args.batch, args.clients, args.workers))
    runs[-1].update(stored(dsn))
    runs[-1]["load_after"] = round(os.getloadavg()[0], 2)

    dsn, _, _ = fresh_copy(dsn_base)
    runs.append(run_cli(dsn, DATA, args.batch, args.parallel, "CLI (cortex import)"))
    runs[-1].update(stored(dsn))
    runs[-1]["load_after"] = round(os.getloadavg()[0], 2)
    runs.append(run_cli(dsn, DATA, args.batch, args.parallel, "CLI re-run (all duplicates)"))
    runs[-1]["load_after"] = round(os.getloadavg()[0], 2)
    afterwards = render_afterwards(dsn)

    results = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "interactions": args.interactions, "contacts": args.contacts, "file_bytes": size,
        "target_per_s": TARGET_PER_S, "load_average_before": round(load_before, 2), "machine": machine, "runs": runs,
        "rendered_afterwards": afterwards,
    }  # fmt: skip
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, default=str))
    print(f"\nimport of {args.interactions} interactions ({size / 1e6:.0f} MB JSON lines) over {args.contacts} "
          f"contacts; load average before {load_before:.2f}; target >= {TARGET_PER_S:.0f}/s stored\n")  # fmt: skip
    print(table(runs, [("path", "path"), ("batch", "batch"), ("clients", "clients"), ("inserted", "inserted"),
                       ("duplicates", "duplicates"), ("wall_s", "wall s"), ("per_s", "per s"),
                       ("batch_p50_ms", "batch p50 ms"), ("batch_p95_ms", "batch p95 ms"),
                       ("summaries_queued", "summaries queued"), ("load_after", "load after")]))  # fmt: skip
    print(f"\nafterwards (not counted): {afterwards['jobs']} render_contexts jobs rendered {afterwards['rendered']} "
          f"contexts in {afterwards['seconds']} s")  # fmt: skip
    ok = all(r["per_s"] >= TARGET_PER_S for r in runs[:2]) and all(not r.get("errors") for r in runs)
    print("\n" + ("target met" if ok else "TARGET MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
