"""The `cortex queue` commands: run the background worker."""

from __future__ import annotations

import logging
import os
import sys

import click

from cortex.console import emit


@click.group()
def queue() -> None:
    """Background jobs: run the worker."""


@queue.command("work")
@click.option("--once", is_flag=True, help="Run the jobs due now, then exit.")
@click.option("--batch", type=click.IntRange(1, 1000), default=10, show_default=True, help="Jobs claimed at a time.")
@click.option("--worker-id", help="Name in cortex.jobs.locked_by (default hostname:pid).")
def queue_work(once: bool, batch: int, worker_id: str | None) -> None:
    """Run the background worker (summaries, context generation, webhook delivery, the memory index)
    until SIGTERM/SIGINT."""
    import threading

    from cortex.notifications import delivery
    from cortex.queue import worker as worker_mod  # imported late: the other commands need none of it

    logging.basicConfig(
        level=os.environ.get("CORTEX_LOG_LEVEL", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Webhook delivery and the sweeps (the memory index) run beside the job loop; SIGTERM sets the
    # shared stop event for all three.
    stop = threading.Event()
    sender = delivery.start_in_background(stop, f"webhooks@{worker_id}" if worker_id else None, once=once)
    sweeper = worker_mod.start_sweeps_in_background(stop, f"sweeps@{worker_id}" if worker_id else None, once=once)
    try:
        ran = worker_mod.run(worker_id, once=once, batch=batch, stop=stop)
        if once:
            sender.join()  # --once: deliver what is due and index what is pending too, then exit
            sweeper.join()
    finally:
        stop.set()
        sender.join(timeout=30)
        sweeper.join(timeout=30)
    emit({"jobs_run": ran}, f"worker ran {ran} job(s)")
