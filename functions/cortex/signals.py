"""Graceful stop for long-running loops (the job worker and webhook delivery)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


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
