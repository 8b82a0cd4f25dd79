"""The worker's memory indexing (embeddings and auto-links), driven to completion by the eval and
the graph benchmark: the same code the worker runs, called in-process until no node is pending."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "functions") not in sys.path:
    sys.path.insert(0, str(ROOT / "functions"))

PENDING = (
    "select count(*) from cortex.memory_nodes where (embed_status = 'pending' or link_status = 'pending') "
    "and status = 'active'"
)
# Superseded or archived nodes still pending (waiting for their embedding; the linker skips them): counted apart.
PENDING_INACTIVE = (
    "select count(*) from cortex.memory_nodes where (embed_status = 'pending' or link_status = 'pending') "
    "and status <> 'active'"
)
STUCK_ROUNDS = 20
EMBEDDED = "select count(*) from cortex.memory_nodes where embed_status = 'done'"


def pending(conn: psycopg.Connection[Any]) -> int:
    """Active nodes still waiting for their embedding or their links."""
    row = conn.execute(PENDING).fetchone()
    return int(row[0]) if row else 0


def index_all(dsn: str, worker_id: str = "bench-index", max_seconds: float = 1800.0) -> dict[str, Any]:
    """Runs the worker's sweeps (cortex.queue.worker.run_sweeps: embedding, then linking) on `dsn`
    until no active node is pending, a round handles nothing, or `max_seconds` pass. Returns the
    rounds, items handled, nodes embedded in the meantime, seconds, active nodes still pending and
    superseded / archived nodes still pending (their embedding counts for "as of" search)."""
    from cortex.queue import worker

    worker.load_handlers()
    started = time.perf_counter()
    rounds = handled = 0
    stuck = False
    with psycopg.connect(dsn, autocommit=True) as conn:
        embedded_before = int((conn.execute(EMBEDDED).fetchone() or [0])[0])
        best, stale = pending(conn), 0
        while time.perf_counter() - started < max_seconds:
            n = worker.run_sweeps(conn, worker_id)
            rounds += 1
            handled += n
            left = pending(conn)
            if n == 0 or left == 0:
                break
            # Rounds that claim nodes but finish none: the same nodes come back (a bug): stop, report.
            best, stale = (left, 0) if left < best else (best, stale + 1)
            if stale >= STUCK_ROUNDS:
                stuck = True
                break
        left = pending(conn)
        inactive = int((conn.execute(PENDING_INACTIVE).fetchone() or [0])[0])
        embedded_after = int((conn.execute(EMBEDDED).fetchone() or [0])[0])
    return {
        "rounds": rounds,
        "handled": handled,
        "embedded": embedded_after - embedded_before,
        "seconds": round(time.perf_counter() - started, 2),
        "still_pending": left,
        "inactive_pending": inactive,
        "stuck": stuck,
    }
