"""Connection balancing between `cortex serve`'s worker processes: each new connection goes to the
worker holding the fewest open connections.

Why: gunicorn's workers share one listening socket, and whichever worker's event loop wakes first
accepts. A few long-lived keep-alive connections (a proxy's pool, the voice platform, an agent
fleet, a load generator) then land unevenly: 16 connections split 10/6, 14/2, even 15/1 between
two workers (docs/benchmarks.md, "Balanced workers"). The busier worker queues its requests behind
each other while the other idles, which is the latency tail. So a worker accepts only while it
holds no more connections than the least loaded live worker; the others leave the connection to
it ("join the shortest queue").

The counts live in a small shared array (`Board`), made before the workers are forked: one slot per
worker, each written only by its owner (the arbiter frees it when the worker exits). A worker that
is behind does not stall new connections: if one has waited `STALL_SECONDS` with no taker (the least
loaded worker is busy or stopped), any worker takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing.sharedctypes
import os
import select
import socket
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("cortex.balancer")

# How often a worker with more connections than another looks again, and how long a connection may
# wait for the least loaded worker before any worker takes it.
POLL_SECONDS = 0.005
STALL_SECONDS = 0.02


class Board:
    """Per worker slot: its pid (0 = free, -1 = reserved for a worker being forked) and its open
    connections. Plain shared memory: a slot's count is written only by the worker that owns it,
    and a slightly stale read only makes one accept less even."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._pids = multiprocessing.sharedctypes.RawArray(ctypes.c_long, slots)
        self._counts = multiprocessing.sharedctypes.RawArray(ctypes.c_long, slots)

    def reserve(self) -> int | None:
        """A free slot for a worker about to be forked (in the arbiter), or None when all are taken."""
        for slot in range(self.slots):
            if self._pids[slot] == 0:
                self._pids[slot] = -1
                self._counts[slot] = 0
                return slot
        return None

    def join(self, slot: int, pid: int) -> None:
        """The worker in `slot` accepts from now on."""
        self._counts[slot] = 0
        self._pids[slot] = pid

    def leave(self, slot: int) -> None:
        """The worker in `slot` stops accepting (it is shutting down): the others no longer leave new
        connections to it, and the slot stays reserved until the arbiter frees it."""
        self._pids[slot] = -1

    def free(self, slot: int) -> None:
        """The worker in `slot` exited (in the arbiter)."""
        self._pids[slot] = 0
        self._counts[slot] = 0

    def add(self, slot: int, delta: int) -> None:
        """Counts a connection opened (+1) or closed (-1) by the worker in `slot`."""
        self._counts[slot] = max(0, self._counts[slot] + delta)

    def count(self, slot: int) -> int:
        """The open connections of the worker in `slot`."""
        return int(self._counts[slot])

    def least_loaded(self, slot: int) -> bool:
        """Whether the worker in `slot` holds no more connections than every other live worker."""
        mine = self._counts[slot]
        return all(
            self._counts[other] >= mine for other in range(self.slots) if other != slot and self._pids[other] > 0
        )


def _pending(sock: socket.socket) -> bool:
    """Whether a connection waits to be accepted on the listening `sock`."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class BalancedListener:
    """Accepts on a listening socket shared with the other workers, only in this worker's turn
    (`Board.least_loaded`), and hands each connection to the protocol factory. Stands in for the
    asyncio server uvicorn would make: `close()` and `wait_closed()`."""

    def __init__(self, sock: socket.socket, factory: Callable[[], Any], board: Board, slot: int) -> None:
        # A duplicate: closing this listener must not close the socket gunicorn holds.
        self._sock = socket.socket(fileno=os.dup(sock.fileno()))
        self._sock.setblocking(False)
        self._factory = factory
        self._board = board
        self._slot = slot
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._accept_forever())

    async def _my_turn(self) -> None:
        waiting_since: float | None = None
        while not self._board.least_loaded(self._slot):
            if _pending(self._sock):
                now = time.monotonic()
                waiting_since = now if waiting_since is None else waiting_since
                if now - waiting_since >= STALL_SECONDS:
                    return
            else:
                waiting_since = None
            await asyncio.sleep(POLL_SECONDS)

    async def _accept_forever(self) -> None:
        while True:
            await self._my_turn()
            try:
                conn, _ = await self._loop.sock_accept(self._sock)
            except OSError as exc:  # EMFILE and the like: as asyncio's own server does, wait and go on
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.5)
                continue
            self._board.add(self._slot, 1)
            try:
                with contextlib.suppress(OSError):
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await self._loop.connect_accepted_socket(self._protocol, conn)
            except Exception as exc:  # the client left before the connection was made
                self._board.add(self._slot, -1)
                conn.close()
                log.debug("connection dropped at accept: %s", exc)

    def _protocol(self) -> Any:
        protocol = self._factory()
        protocol.released = self._released
        return protocol

    def _released(self) -> None:
        self._board.add(self._slot, -1)

    def close(self) -> None:
        """Stops accepting (open connections are the server's to close)."""
        self._board.leave(self._slot)
        self._task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        """Waits for the accept loop to end."""
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
