"""Soak: concurrent writers on a few hot contacts while the worker regenerates their contexts.

16 client threads log and import interactions, hand contacts over (and move those handoffs) and
patch contacts, all on 20 hot contacts, through the Python service functions, while the real
worker (`cortex.worker.run`, in threads) summarises interactions, renders the contexts imports
left to it and regenerates contexts. The lock
order (docs/architecture.md, "Lock order") must leave the server with no deadlock and the
callers with no server-side error. CORTEX_SOAK_SECONDS shortens or lengthens it (default 60).
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from typing import Any

import psycopg
import pytest

from cortex import db
from cortex.config import get_settings
from cortex.contacts import service as contacts
from cortex.db import agent_claims
from cortex.errors import CortexError
from cortex.handoffs import service as handoffs
from cortex.interactions import backfill
from cortex.interactions import service as interactions
from cortex.queue import worker
from tests.conftest import AsAgent, Tenant

CLIENTS = 16
HOT_CONTACTS = 20
WORKERS = 2
AGENTS = ("luna", "mia", "anna", "jasper")
STAGES = ("prospect", "qualified", "opportunity", "customer", "churning")
TYPES = ("note", "email_received", "email_sent", "call", "ticket_opened", "order_placed")
BODIES = (
    "Thanks for the quick reply yesterday, it helped a lot.",
    "I am really frustrated that the delivery is late again, this is the third time.",
    "Could you send us a quote for 500 units with the volume discount we discussed?",
    "Please cancel our subscription at the end of the billing period unless the pricing changes.",
    "Our procurement team approved the budget, so we are ready to move forward.",
)


def deadlocks(dsn: str) -> int:
    """The server's deadlock count for this database (pg_stat_database, read afresh)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("select pg_stat_clear_snapshot()")
        row = conn.execute("select deadlocks from pg_stat_database where datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


def client(
    idx: int,
    tenant: Tenant,
    hot: list[str],
    deadline: float,
    ops: Counter[str],
    errors: list[str],
    lock: threading.Lock,
) -> None:
    rng = random.Random(idx)
    mine: Counter[str] = Counter()
    problems: list[str] = []
    handoff_ids: list[tuple[str, str]] = []  # (id, addressee): only the addressee may move it
    while time.monotonic() < deadline:
        contact_id = rng.choice(hot)
        agent = rng.choice(AGENTS)
        claims = agent_claims(tenant.id, agent)
        roll = rng.random()
        try:
            if roll < 0.40:
                kind = "interaction"
                fields: dict[str, Any] = {"contact_id": contact_id, "type": rng.choice(TYPES)}
                if rng.random() < 0.5:
                    fields["summary"] = rng.choice(BODIES)  # analysed now
                else:
                    fields["raw_content"] = rng.choice(BODIES)  # summarised here by the local model
                interactions.log_interaction(claims, **fields)
            elif roll < 0.45:
                # A batch over several hot contacts: locks them in id order, defers their rendering.
                kind = "import"
                items = [
                    {"contact_id": rng.choice(hot), "type": rng.choice(TYPES), "raw_content": rng.choice(BODIES),
                     "external_id": f"soak-{idx}-{mine['import']}-{n}",
                     "occurred_at": f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T10:00:00Z"}
                    for n in range(rng.randint(2, 8))
                ]  # fmt: skip
                if backfill.import_interactions(claims, items)["failed"]:
                    problems.append("import: items failed")
            elif roll < 0.65:
                kind = "handoff"
                to = rng.choice([a for a in AGENTS if a != agent])
                fields = {"contact_id": contact_id, "to_agent": to, "reason": "escalation"}
                if rng.random() < 0.5:
                    fields["context_summary"] = "Hot contact, please take over."
                made = handoffs.create_handoff(claims, **fields)
                handoff_ids.append((made["id"], to))
            elif roll < 0.75 and handoff_ids:
                kind = "handoff_move"
                status = rng.choice(("accepted", "completed", "rejected"))
                handoff_id, addressee = rng.choice(handoff_ids)
                handoffs.update_handoff_status(agent_claims(tenant.id, addressee), handoff_id, status)
            else:
                kind = "contact_update"
                patch = {"stage": rng.choice(STAGES), "name": f"Hot Contact {rng.randrange(1000)}"}
                contacts.update_contact(claims, contact_id, patch)
            mine[kind] += 1
        except CortexError as exc:
            if exc.status == 409:  # an illegal handoff move (already accepted, completed, ...)
                mine["409"] += 1
            else:
                problems.append(f"{kind}: {exc.status} {exc.code} {exc.message}")
        except Exception as exc:  # a raw database error (e.g. at commit) is as bad as a 5xx
            problems.append(f"{kind}: {type(exc).__name__}: {exc}")
    with lock:
        ops.update(mine)
        errors.extend(problems)


@pytest.mark.slow
def test_hot_contacts_under_concurrent_writers_and_the_worker_never_deadlock(
    tenant: Tenant, as_agent: AsAgent, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seconds = float(os.environ.get("CORTEX_SOAK_SECONDS", "60"))
    monkeypatch.setenv("CORTEX_POOL_MAX", str(CLIENTS + 2))
    monkeypatch.setenv("CORTEX_WORKER_POLL", "0.2")
    get_settings.cache_clear()
    luna = agent_claims(tenant.id, "luna")
    hot = [
        contacts.upsert_contact(luna, email=f"hot{n}@example.com", name=f"Hot Contact {n}", stage="customer")["id"]
        for n in range(HOT_CONTACTS)
    ]

    before = deadlocks(dsn)
    stop = threading.Event()
    workers = [
        threading.Thread(target=worker.run, kwargs={"worker_id": f"soak-{n}", "stop": stop}, daemon=True)
        for n in range(WORKERS)
    ]
    for w in workers:
        w.start()
    ops: Counter[str] = Counter()
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    threads = [
        threading.Thread(target=client, args=(i, tenant, hot, deadline, ops, errors, lock), daemon=True)
        for i in range(CLIENTS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 120)
    stop.set()
    for w in workers:
        w.join(120)

    db.close_pool()
    regenerated = renders = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        # A session reports its statistics (deadlocks among them) when it ends: wait for the others.
        for _ in range(100):
            others = conn.execute(
                "select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()"
            ).fetchone()
            if others is not None and others[0] == 0:
                break
            time.sleep(0.1)
        row = conn.execute(
            "select count(*) filter (where kind = 'generate_context'), count(*) filter (where kind = 'render_contexts')"
            " from cortex.jobs where status = 'done'"
        ).fetchone()
        regenerated, renders = (int(row[0]), int(row[1])) if row else (0, 0)
    found = deadlocks(dsn) - before
    summary = f"ops={dict(ops)} regenerated={regenerated} renders={renders} deadlocks={found} errors={len(errors)}"
    print(summary)
    assert not any(t.is_alive() for t in threads) and not any(w.is_alive() for w in workers), summary
    assert ops["interaction"] > 0 and ops["import"] > 0 and ops["handoff"] > 0 and ops["contact_update"] > 0, summary
    assert regenerated > 0 and renders > 0, summary
    assert found == 0, summary
    assert errors == [], f"{summary}: {errors[:10]}"
