"""Stopping and waking the long-running loops (the job worker and webhook delivery)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from types import FrameType
from typing import Any

import psycopg

# How often a wait looks at `stop`, so a stop set by another thread or a signal is seen at once.
STOP_CHECK_SECONDS = 0.25


@contextmanager
def signals_set(stop: threading.Event, log: logging.Logger, finishing: str) -> Iterator[None]:
    """While inside, SIGTERM/SIGINT set `stop` (the loop finishes `finishing` first); a second
    signal interrupts at once. Outside the main thread it does nothing (only it may install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.info("%s received: finishing %s, then stopping", signal.Signals(signum).name, finishing)
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def wait_for_notify(conn: psycopg.Connection[Any], timeout: float, stop: threading.Event) -> None:
    """Sleeps until a NOTIFY on a channel `conn` LISTENs to, `stop`, or the timeout; then drops the
    notifications that piled up meanwhile (they all mean the same: look at the queue again)."""
    deadline = time.monotonic() + timeout
    woken = False
    while not woken and not stop.is_set() and (remaining := deadline - time.monotonic()) > 0:
        with closing(conn.notifies(timeout=min(remaining, STOP_CHECK_SECONDS), stop_after=1)) as wake:
            for _ in wake:
                woken = True
                break
    with closing(conn.notifies(timeout=0)) as backlog:
        for _ in backlog:
            pass
