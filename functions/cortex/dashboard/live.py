"""What changed, as it happens: one LISTEN connection per server process, fanned out per tenant.

The outbox gets a row for every handoff, alert and budget event in the transaction that caused it,
and `cortex.notify` NOTIFYs `cortex_outbox` at commit with an empty payload (any role can LISTEN,
so no signal carries a tenant). The hub of a process holds one dedicated connection that only
LISTENs; each wake-up makes it read the outbox rows after its cursor as the owner
(`cortex.dashboard_events`, on the pool) and put each event on the queues of that tenant's
subscribers only. Signals that arrive while a read is under way fold into one more read.

Delivery is best effort, which is enough for a page that re-reads its data on each event: a
subscriber whose queue is full (a stalled browser) misses events rather than holding the others
up, and a row committed after a later id was read (ids are handed out before commit) is not
announced; the next event's re-read shows it. The connection is opened with the first subscriber
and closed after the last one; a lost connection is opened again, then the rows missed meanwhile
are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import psycopg

from cortex import db
from cortex.config import get_settings

log = logging.getLogger("cortex.dashboard")

CHANNEL = "cortex_outbox"
BATCH = 500
QUEUE_SIZE = 100
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
LISTEN_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Change:
    """An event of one tenant: its outbox id, name (handoff.created, alert.raised, ...) and subject id."""

    id: int
    tenant_id: str
    event: str
    subject: str | None

    def as_json(self) -> dict[str, Any]:
        """What a page receives (no recipient, no payload: the page re-reads what it shows)."""
        return {"id": self.id, "event": self.event, "subject": self.subject}


class Hub:
    """The LISTEN connection of this process and the in-memory subscribers, per tenant."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._subscribers: dict[str, set[asyncio.Queue[Change]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._listening = asyncio.Event()
        self._wake = asyncio.Event()
        self.cursor: int | None = None

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open."""
        return sum(len(queues) for queues in self._subscribers.values())

    @contextlib.asynccontextmanager
    async def subscribe(self, tenant_id: str) -> AsyncIterator[asyncio.Queue[Change]]:
        """A queue of `tenant_id`'s changes, from the moment this returns (LISTEN is under way);
        TimeoutError when the listener cannot LISTEN within 10 s."""
        queue: asyncio.Queue[Change] = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.setdefault(tenant_id, set()).add(queue)
        if self._task is None or self._task.done():
            self._listening.clear()
            self._task = asyncio.create_task(self._run(), name="dashboard-listen")
        try:
            # A database that does not answer ends the subscription (the browser reconnects later).
            await asyncio.wait_for(self._listening.wait(), LISTEN_TIMEOUT_SECONDS)
            yield queue
        finally:
            queues = self._subscribers.get(tenant_id, set())
            queues.discard(queue)
            if not queues:
                self._subscribers.pop(tenant_id, None)
            if not self._subscribers and self._task is not None:
                # Nobody is looking: close the connection, and start afresh (no backlog) next time.
                self._task.cancel()
                self._task = None
                self.cursor = None

    async def _run(self) -> None:
        attempt = 0
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True) as conn:
                    await conn.execute(f"listen {CHANNEL}")
                    if self.cursor is None:
                        self.cursor = int(await self._owner("cortex.dashboard_cursor") or 0)
                    self._listening.set()
                    attempt = 0
                    reader = asyncio.create_task(self._read_loop())
                    self._wake.set()  # rows committed while the connection was down
                    try:
                        async for _ in conn.notifies():
                            self._wake.set()
                    finally:
                        reader.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await reader
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a lost connection: open it again, then catch up
                delay = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
                attempt += 1
                log.warning("dashboard listener: %s; reconnecting in %.1f s", exc, delay)
                await asyncio.sleep(delay)

    async def _owner(self, function: str, **args: Any) -> Any:
        pool = await db.get_async_pool()
        async with pool.connection() as conn:
            return await db.acall(conn, function, **args)

    async def _read_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.read_new()
            except Exception as exc:  # the next signal reads again from the same cursor
                log.warning("dashboard listener could not read the outbox: %s", exc)

    async def read_new(self) -> int:
        """Reads the outbox after the cursor and hands each event to its tenant; how many were handed."""
        handed = 0
        while True:
            pool = await db.get_async_pool()
            async with pool.connection() as conn:
                rows = await db.arows(conn, "cortex.dashboard_events", p_after=self.cursor or 0, p_limit=BATCH)
            if not rows:
                return handed
            self.cursor = int(rows[-1]["id"])
            handed += self._fan_out(rows)
            if len(rows) < BATCH:
                return handed

    def _fan_out(self, rows: list[dict[str, Any]]) -> int:
        handed = 0
        seen: set[tuple[str, str, str | None]] = set()
        for row in rows:
            change = Change(int(row["id"]), str(row["tenant_id"]), str(row["event"]), row["subject"])
            key = (change.tenant_id, change.event, change.subject)
            if key in seen:  # one message per recipient: one event for the pages
                continue
            seen.add(key)
            for queue in self._subscribers.get(change.tenant_id, ()):
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(change)
                    handed += 1
        return handed


_hubs: dict[asyncio.AbstractEventLoop, Hub] = {}


def hub() -> Hub:
    """The hub of the running event loop (a server process has one loop; each test client its own)."""
    loop = asyncio.get_running_loop()
    for old in [other for other in _hubs if other.is_closed()]:
        del _hubs[old]
    found = _hubs.get(loop)
    if found is None:
        found = _hubs[loop] = Hub(get_settings().database_url)
    return found
