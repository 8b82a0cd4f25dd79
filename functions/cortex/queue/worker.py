"""The background worker: runs the jobs queued in `cortex.jobs` (summaries, context generation, ...).

Jobs are claimed with `cortex.claim_jobs` (FOR UPDATE SKIP LOCKED, under a lease), so any number
of workers can run side by side and none runs a job another holds. While a job runs, a heartbeat
thread extends the lease of every job the worker still holds; a worker that dies stops the
heartbeat, its leases run out and another worker takes the jobs again. A handler that raises
fails the job (`cortex.fail_job`): requeued with exponential backoff, then parked with an alert.

The worker acts as the database owner (not through RLS) and passes tenant_id to every handler
explicitly. Handlers get an autocommit connection and open their own transaction around their
writes, so no transaction stays open while a model thinks.

Adding a kind of job: write `handler(conn, tenant_id, payload) -> dict` and register it with
`@register("kind")` (or `HANDLERS["kind"] = handler`); the returned dict is stored as the job's
result. Handlers must be idempotent: a job whose worker died mid-way runs again.

Work that keeps its own queue (rows that carry their own status and lease, such as memory nodes
waiting for their embedding) registers a sweep instead: `@register_sweep("name")` on
`sweep(conn, worker_id, stop) -> int` (how many items it handled, one batch per call). The sweep
loop (`run_sweep_loop`, started beside the job loop by `cortex queue work`, like webhook delivery)
runs every sweep in turn on its own connection and sleeps until a NOTIFY on cortex_jobs (or the
poll interval) only when none found work. It runs in its own thread so that a CPU-bound sweep (an
embedding batch, the model's first load) never delays a job, and a stop request ends it between
batches. A sweep that raises is logged and tried again next round; it claims its items under a
lease of its own, so a worker that dies mid-batch loses nothing.

    python -m cortex.queue.worker [--once] [--batch N] [--worker-id ID]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import logging
import os
import re
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.json import Jsonb

from cortex import db
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.shutdown import signals_set, wait_for_notify

__all__ = [
    "HANDLERS",
    "SWEEPS",
    "Handler",
    "Sweep",
    "UnknownJobKind",
    "default_worker_id",
    "describe_error",
    "main",
    "register",
    "register_sweep",
    "run",
    "run_once",
    "run_sweep_loop",
    "run_sweeps",
    "start_sweeps_in_background",
]

log = logging.getLogger("cortex.worker")

Handler = Callable[[psycopg.Connection[Any], str, dict[str, Any]], dict[str, Any]]

#: Job kind -> handler(conn, tenant_id, payload) -> result.
HANDLERS: dict[str, Handler] = {}

Sweep = Callable[[psycopg.Connection[Any], str, threading.Event], int]

#: Sweep name -> sweep(conn, worker_id, stop) -> items handled (work with a queue of its own).
SWEEPS: dict[str, Sweep] = {}

_KIND = re.compile(r"^[a-z_]+$")  # the same rule as the jobs table's check constraint
_MAX_ERROR_CHARS = 4000
_LISTEN_CHANNEL = "cortex_jobs"


class UnknownJobKind(Exception):
    """A job whose kind has no handler in this worker (perhaps a newer worker knows it)."""


class Deferred(Exception):
    """Raised by a handler whose work must wait (the budget deferred its model call): the job
    goes back to the queue until `run_at`, its attempt refunded (cortex.defer_job)."""

    def __init__(self, run_at: datetime, reason: str = "deferred") -> None:
        super().__init__(f"{reason} until {run_at.isoformat()}")
        self.run_at = run_at
        self.reason = reason


def register(kind: str) -> Callable[[Handler], Handler]:
    """Decorator registering `handler` for jobs of `kind`; a kind has exactly one handler."""
    if not _KIND.match(kind):
        raise ValueError(f"job kind must match {_KIND.pattern}: {kind!r}")

    def decorate(handler: Handler) -> Handler:
        existing = HANDLERS.get(kind)
        if existing is not None and existing is not handler:
            raise ValueError(f"job kind {kind!r} already has a handler ({existing.__qualname__})")
        HANDLERS[kind] = handler
        return handler

    return decorate


def register_sweep(name: str) -> Callable[[Sweep], Sweep]:
    """Decorator registering a sweep (see the module docstring); a name has exactly one sweep."""

    def decorate(sweep: Sweep) -> Sweep:
        existing = SWEEPS.get(name)
        if existing is not None and existing is not sweep:
            raise ValueError(f"sweep {name!r} already registered ({existing.__qualname__})")
        SWEEPS[name] = sweep
        return sweep

    return decorate


# --- handlers ------------------------------------------------------------------------------------

# Each capability registers its job kinds (and sweeps) in its own `jobs` module; the worker loads these.
JOB_MODULES = (
    "cortex.interactions.jobs",
    "cortex.context.jobs",
    "cortex.memories.jobs",
    "cortex.briefings.jobs",
    "cortex.ingest.jobs",
    "cortex.voice.jobs",
    "cortex.consolidation.jobs",
)


def load_handlers() -> dict[str, Handler]:
    """Imports every capability's job handlers (each registers itself) and returns the registry."""
    for module in JOB_MODULES:
        importlib.import_module(module)
    return HANDLERS


# --- one batch ---------------------------------------------------------------------------------


def default_worker_id() -> str:
    """`hostname:pid`, what a worker is called in `cortex.jobs.locked_by` unless named."""
    return f"{socket.gethostname()}:{os.getpid()}"


def describe_error(exc: BaseException) -> str:
    """The error text stored on a failed job: the exception, then where it was raised."""
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)[-4:]
    where = " <- ".join(f"{Path(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(frames))
    text = f"{head} (at {where})" if where else head
    return text[:_MAX_ERROR_CHARS]


_dumps = functools.partial(json.dumps, default=str)


class _Heartbeat:
    """Extends the leases of the jobs a worker still holds, every lease/3 seconds, in a thread.

    It uses the queue connection, which is idle while handlers run on their own connection
    (psycopg serialises the rare overlap with the main thread's complete/fail calls)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        worker_id: str,
        lease_seconds: int,
        jobs: Sequence[tuple[str, int]],
    ) -> None:
        self._conn = conn
        self._worker_id = worker_id
        self._lease_seconds = lease_seconds
        self._held = set(jobs)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {worker_id}", daemon=True)

    def __enter__(self) -> _Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._thread.join()

    def release(self, job: tuple[str, int]) -> None:
        """Stops extending this job's lease (it is finished)."""
        with self._lock:
            self._held.discard(job)

    def _beat(self) -> None:
        interval = max(self._lease_seconds / 3, 0.1)
        while not self._stopped.wait(interval):
            with self._lock:
                held = sorted(self._held)
            for tenant_id, job_id in held:
                try:
                    kept = db.call(
                        self._conn,
                        "cortex.extend_lease",
                        p_tenant_id=tenant_id,
                        p_id=job_id,
                        p_worker=self._worker_id,
                        p_lease_seconds=self._lease_seconds,
                    )
                except (psycopg.Error, CortexError) as exc:
                    # The next beat may succeed; if not, the lease runs out and the job is retried.
                    log.warning("heartbeat for job %s failed: %s", job_id, exc)
                    continue
                if not kept:
                    log.warning("job %s: lease lost (another worker may have taken it)", job_id)
                    self.release((tenant_id, job_id))


def _connect(dsn: str, worker_id: str, role: str) -> psycopg.Connection[Any]:
    # The application name shows each worker's connections in pg_stat_activity.
    return psycopg.connect(dsn, autocommit=True, application_name=f"cortex-worker {role} {worker_id}"[:63])


def _usable(conn: psycopg.Connection[Any] | None) -> bool:
    return (
        conn is not None
        and not conn.closed
        and not conn.broken
        and conn.info.transaction_status == pq.TransactionStatus.IDLE
    )


def run_once(
    conn: psycopg.Connection[Any],
    worker_id: str,
    batch: int = 10,
    lease_seconds: int | None = None,
    *,
    stop: threading.Event | None = None,
) -> int:
    """Claims up to `batch` due jobs and runs each; returns how many were run.

    `conn` is an autocommit connection as the database owner, used for the queue itself
    (claim, heartbeat, complete, fail); handlers run on a second connection to
    `settings.database_url`. A handler's success completes its job; an exception (or a kind
    without handler) fails it with the error text, so it is retried later or parked. When `stop`
    is set between two jobs, the jobs not yet started are handed back to the queue at once.
    """
    load_handlers()
    if not conn.autocommit:
        raise ValueError("run_once needs an autocommit connection (each queue step commits on its own)")
    settings = get_settings()
    lease = settings.job_lease_seconds if lease_seconds is None else lease_seconds
    jobs = db.rows(conn, "cortex.claim_jobs", p_worker=worker_id, p_limit=batch, p_lease_seconds=lease)
    if not jobs:
        return 0
    ran = 0
    work: psycopg.Connection[Any] | None = None
    try:
        with _Heartbeat(conn, worker_id, lease, [(str(j["tenant_id"]), j["id"]) for j in jobs]) as beat:
            for i, job in enumerate(jobs):
                if stop is not None and stop.is_set():
                    _hand_back(conn, worker_id, jobs[i:])
                    break
                if not _usable(work):
                    if work is not None:
                        work.close()
                    work = _connect(settings.database_url, worker_id, "handler")
                assert work is not None
                _run_job(conn, work, worker_id, job, beat)
                ran += 1
    finally:
        if work is not None:
            work.close()
    return ran


def _run_job(
    conn: psycopg.Connection[Any],
    work: psycopg.Connection[Any],
    worker_id: str,
    job: dict[str, Any],
    beat: _Heartbeat,
) -> None:
    tenant_id, job_id, kind = str(job["tenant_id"]), job["id"], job["kind"]
    started = time.monotonic()
    error: str | None = None
    result: Any = None
    deferred: Deferred | None = None
    try:
        handler = HANDLERS.get(kind)
        if handler is None:
            raise UnknownJobKind(f"no handler for job kind {kind!r}")
        result = handler(work, tenant_id, dict(job["payload"] or {}))
    except Deferred as exc:
        deferred = exc
    except Exception as exc:
        error = describe_error(exc)
    finally:
        beat.release((tenant_id, job_id))
    if deferred is not None:
        held = db.call(
            conn, "cortex.defer_job", p_tenant_id=tenant_id, p_id=job_id, p_worker=worker_id, p_run_at=deferred.run_at
        )
        outcome = f"deferred to {deferred.run_at.isoformat()} ({deferred.reason})" if held else "lost"
    elif error is None:
        completed = db.call(
            conn,
            "cortex.complete_job",
            p_tenant_id=tenant_id,
            p_id=job_id,
            p_worker=worker_id,
            p_result=Jsonb(result, dumps=_dumps),
        )
        outcome = "done" if completed else "lost"
    else:
        # 'retry' (requeued with backoff), 'parked' (alert written) or 'lost' (lease taken over).
        outcome = str(
            db.call(conn, "cortex.fail_job", p_tenant_id=tenant_id, p_id=job_id, p_worker=worker_id, p_error=error)
            or "lost"
        )
    ms = round((time.monotonic() - started) * 1000)
    level = logging.INFO if outcome == "done" or outcome.startswith("deferred") else logging.WARNING
    log.log(
        level,
        "job kind=%s id=%s tenant=%s attempt=%s/%s outcome=%s ms=%d%s",
        kind,
        job_id,
        tenant_id,
        job["attempts"],
        job["max_attempts"],
        outcome,
        ms,
        f" error={error.splitlines()[0]}" if error else "",
    )


def run_sweeps(conn: psycopg.Connection[Any], worker_id: str, stop: threading.Event | None = None) -> int:
    """Runs every registered sweep once on the autocommit connection `conn`; returns the items
    they handled. A sweep that raises is logged, not fatal: the others go on, and it runs again."""
    load_handlers()
    stop = stop or threading.Event()
    handled = 0
    for name, sweep in list(SWEEPS.items()):
        if stop.is_set():
            break
        try:
            handled += sweep(conn, worker_id, stop)
        except psycopg.OperationalError:
            raise  # the connection is gone: the loop reconnects
        except Exception as exc:
            log.error("sweep %s failed: %s", name, describe_error(exc))
    return handled


def run_sweep_loop(worker_id: str | None = None, *, once: bool = False, stop: threading.Event | None = None) -> int:
    """Runs the sweeps until `stop` is set (with `once`: until none finds work); returns the items
    handled. Idle, it LISTENs on cortex_jobs (an inserted memory node signals there too). A lost
    database connection is retried with backoff (up to 30 s); with `once` it is raised instead."""
    worker_id = worker_id or default_worker_id()
    stop = stop or threading.Event()
    load_handlers()
    handled = 0
    backoff = 1.0
    while not stop.is_set():
        settings = get_settings()
        try:
            with _connect(settings.database_url, worker_id, "sweeps") as conn:
                conn.execute(f"listen {_LISTEN_CHANNEL}")
                backoff = 1.0
                while not stop.is_set():
                    n = run_sweeps(conn, worker_id, stop)
                    handled += n
                    if n == 0:
                        if once:
                            return handled
                        wait_for_notify(conn, settings.worker_poll_seconds, stop)
        except psycopg.OperationalError as exc:
            if once:
                raise
            log.error("sweeps: database unavailable (%s); reconnecting in %.0f s", str(exc).strip(), backoff)
            stop.wait(backoff)
            backoff = min(backoff * 2, 30.0)
    return handled


def start_sweeps_in_background(
    stop: threading.Event, worker_id: str | None = None, *, once: bool = False
) -> threading.Thread:
    """Runs `run_sweep_loop` in a daemon thread that ends when `stop` is set (or, with `once`, when
    no sweep finds work); join the thread after setting `stop`."""
    thread = threading.Thread(
        target=run_sweep_loop,
        kwargs={"worker_id": worker_id, "once": once, "stop": stop},
        name="sweeps",
        daemon=True,
    )
    thread.start()
    return thread


def _hand_back(conn: psycopg.Connection[Any], worker_id: str, jobs: Sequence[dict[str, Any]]) -> None:
    db.call(
        conn,
        "cortex.release_jobs",
        p_worker=worker_id,
        p_tenant_ids=db.typed([j["tenant_id"] for j in jobs], "uuid[]"),
        p_ids=db.typed([j["id"] for j in jobs], "bigint[]"),
    )
    for job in jobs:
        log.info("job kind=%s id=%s tenant=%s outcome=released", job["kind"], job["id"], job["tenant_id"])


# --- the loop ----------------------------------------------------------------------------------


def _serve(worker_id: str, once: bool, batch: int, stop: threading.Event, on_connect: Callable[[], None]) -> int:
    settings = get_settings()
    processed = 0
    with _connect(settings.database_url, worker_id, "queue") as conn:
        # LISTEN before the first claim, so a job queued in between still wakes us.
        conn.execute(f"listen {_LISTEN_CHANNEL}")
        on_connect()
        while not stop.is_set():
            ran = run_once(conn, worker_id, batch, settings.job_lease_seconds, stop=stop)
            processed += ran
            if ran == 0:
                if once:
                    break
                wait_for_notify(conn, settings.worker_poll_seconds, stop)
    return processed


def run(
    worker_id: str | None = None, *, once: bool = False, batch: int = 10, stop: threading.Event | None = None
) -> int:
    """Runs jobs until `stop` is set or SIGTERM/SIGINT arrives; returns how many jobs it ran.

    Idle, it LISTENs on cortex_jobs and wakes on a NOTIFY (or every settings.worker_poll_seconds).
    With `once`, it returns as soon as no job is due. A lost database connection is retried
    with backoff (up to 30 s); with `once` it is raised instead.
    """
    worker_id = worker_id or default_worker_id()
    stop = stop or threading.Event()
    load_handlers()
    processed = 0
    backoff = 1.0

    def connected() -> None:
        nonlocal backoff
        backoff = 1.0
        log.info("worker %s started (batch %d, lease %ds)", worker_id, batch, get_settings().job_lease_seconds)

    with signals_set(stop, log, "the current job"):
        while not stop.is_set():
            try:
                processed += _serve(worker_id, once, batch, stop, connected)
                break
            except psycopg.OperationalError as exc:
                if once:
                    raise
                log.error("database unavailable (%s); reconnecting in %.0f s", str(exc).strip(), backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
    log.info("worker %s stopped after %d job(s)", worker_id, processed)
    return processed


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: `python -m cortex.queue.worker [--once] [--batch N] [--worker-id ID] [--log-level L]`."""
    parser = argparse.ArgumentParser(prog="python -m cortex.queue.worker", description="Runs Cortex's background jobs.")
    parser.add_argument("--once", action="store_true", help="run the jobs due now, then exit")
    parser.add_argument("--batch", type=int, default=10, help="jobs claimed at a time (default 10)")
    parser.add_argument("--worker-id", default=None, help="name in cortex.jobs.locked_by (default hostname:pid)")
    parser.add_argument("--log-level", default=os.environ.get("CORTEX_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    if args.batch < 1:
        parser.error("--batch must be at least 1")
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        run(args.worker_id, once=args.once, batch=args.batch)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    # Run the imported module's main, so handlers registered on `cortex.worker` by other modules
    # are the ones used (under -m this file is also loaded as __main__, a separate copy).
    from cortex.queue.worker import main as _main

    sys.exit(_main())
