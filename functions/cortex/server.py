"""Serving the API: functions-framework's ASGI app under gunicorn with uvicorn workers, one per core,
with limits at the edge that the framework's defaults leave open.

`functions-framework --asgi` builds the Starlette app around `main.api` and serves it with
gunicorn's `UvicornWorker`, but passes no limits (gunicorn's `limit_request_line` is 0 and does not
apply to uvicorn workers). `cortex serve` builds the same app with `create_asgi_app` and serves
it with `Worker` below, whose protocol:

- bounds the request line plus headers to `HEAD_LIMIT_BYTES` (431 and close when passed), so a
  64 MB request line costs 16 KiB of buffering, not 80 CPU-seconds;
- closes a connection whose request head has not arrived within `HEAD_TIMEOUT_SECONDS`, so slow
  or half-open connections cannot pin the server (an idle keep-alive connection closes after
  `KEEP_ALIVE_SECONDS`);
- leaves the body to the app, which counts it while it streams (`cortex.routing.read_body`).

With several workers, each new connection goes to the worker holding the fewest
(`cortex.balancer`; `CORTEX_BALANCE=0` leaves it to whichever wakes first).

Each worker process loads the embedding model (`cortex.embeddings.preload`) before it accepts
connections, so the first text search is not slow; `CORTEX_EMBEDDINGS=none` skips it. A model that
does not load stops the server at start with the reason, rather than failing every search later.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

import gunicorn.app.base
from gunicorn.arbiter import Arbiter
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker

from cortex.balancer import BalancedListener, Board
from cortex.config import available_cores, get_settings

HEAD_LIMIT_BYTES = 16 * 1024
HEAD_TIMEOUT_SECONDS = float(os.environ.get("CORTEX_HEAD_TIMEOUT", "10"))
KEEP_ALIVE_SECONDS = 5
_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: 99\r\n\r\n"
    b'{"error": {"code": "headers_too_large", "message": "request line and headers exceed 16384 bytes"}}\n'
)


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bound on the request head's size and arrival time."""

    _head_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _head_cycle: Any = None
    # Set by the balancer (cortex.balancer.BalancedListener): told once when the connection closes.
    released: Callable[[], None] | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection: its first request head must arrive in time."""
        super().connection_made(transport)
        self._await_head()

    def _await_head(self) -> None:
        self._cancel_head_timer()
        self._head_bytes = 0
        self._head_cycle = self.cycle
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_SECONDS, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_cycle and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        """Feeds the parser, refusing a head larger than the limit as soon as it is passed."""
        waiting = self._head_timer is not None
        super().data_received(data)
        if not waiting or self.transport.is_closing():
            return
        if self.cycle is not self._head_cycle:  # the head is complete: the app has the request
            self._cancel_head_timer()
            return
        self._head_bytes += len(data)
        if self._head_bytes > HEAD_LIMIT_BYTES:
            self._cancel_head_timer()
            self.transport.write(_TOO_LARGE)
            self.transport.close()

    def on_response_complete(self) -> None:
        """A response went out: the next request head on this connection is timed again."""
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drops the timer with the connection (and tells the balancer)."""
        self._cancel_head_timer()
        released, self.released = self.released, None
        if released is not None:
            released()
        super().connection_lost(exc)

    def shutdown(self) -> None:
        """Graceful shutdown. A response that has started and not finished is a stream (server-sent
        events: the dashboard's, a chat's): its connection is closed, which the app sees as the
        client leaving, so the stream stops now instead of holding the worker until gunicorn's
        graceful timeout kills it. Clients of such streams reconnect by design."""
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete:
            self.transport.close()
            return
        super().shutdown()


class Worker(UvicornWorker):  # type: ignore[misc]
    """gunicorn's uvicorn worker with Cortex's edge protocol and uvloop; loads the embedding model
    at start."""

    CONFIG_KWARGS: dict[str, Any] = {  # noqa: RUF012 (uvicorn_worker's own attribute)
        "loop": "uvloop",
        "http": EdgeProtocol,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
    }

    def load_wsgi(self) -> None:
        """Loads the embedding model in this process, then the app. Here, not earlier: after the
        fork (torch's thread pools do not survive one) and after `init_signals`, so a SIGTERM
        during the load ends the process at once instead of being lost (the master would then
        wait out its graceful timeout). An EmbeddingError makes gunicorn stop with "Worker failed
        to boot" and the message on stderr."""
        from cortex import embeddings

        embeddings.preload()
        super().load_wsgi()
        # Everything loaded so far lives as long as the process: out of the collector's sight, a
        # full collection no longer walks the framework, the models and the routes (a pause that
        # showed in the hot reads' p99 under load, docs/benchmarks.md).
        gc.freeze()

    async def _serve(self) -> None:
        """uvicorn_worker's serve, with the balanced listener when `cortex serve` runs several workers."""
        slot = getattr(self, "cortex_slot", None)
        if _BOARD is None or slot is None:
            await super()._serve()
            return
        self.config.app = self.wsgi
        server = BalancedServer(self.config, _BOARD, slot)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)


class BalancedServer(Server):
    """uvicorn's server, accepting through `cortex.balancer.BalancedListener` instead of an asyncio server."""

    def __init__(self, config: Any, board: Board, slot: int) -> None:
        super().__init__(config=config)
        self.board = board
        self.slot = slot

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start (lifespan, state) with no server of its own; then one listener per socket."""
        await super().startup(sockets=[])
        config, loop = self.config, asyncio.get_running_loop()

        def protocol() -> Any:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state, _loop=loop
            )

        self.servers = [BalancedListener(sock, protocol, self.board, self.slot) for sock in sockets or []]  # type: ignore[misc]
        self.board.join(self.slot, os.getpid())


# The workers' connection counts (cortex.balancer), made in `serve` before the workers are forked.
_BOARD: Board | None = None


def _reserve_slot(server: Any, worker: Any) -> None:
    """gunicorn's pre_fork hook (in the arbiter): a board slot for the worker about to be forked."""
    worker.cortex_slot = _BOARD.reserve() if _BOARD is not None else None


def _free_slot(server: Any, worker: Any) -> None:
    """gunicorn's child_exit hook (in the arbiter): the exited worker's slot is free again."""
    slot = getattr(worker, "cortex_slot", None)
    if _BOARD is not None and slot is not None:
        _BOARD.free(slot)


class _Server(gunicorn.app.base.BaseApplication):  # type: ignore[misc]
    def __init__(self, app: Any, options: dict[str, Any]) -> None:
        self.app = app
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.app


def share_cores(workers: int) -> None:
    """Gives each of `workers` processes an equal share of the cores (at least one) for what would
    otherwise take them all, unless it is configured:

    - `CORTEX_EMBEDDING_THREADS`, the model's threads: a thread per core in every process would
      oversubscribe the cores, and spinning threads would slow the other workers' event loops;
    - `CORTEX_SEARCH_CONCURRENCY`, searches in the database at once: a search is CPU-bound on both
      sides, so more at once only share the cores more finely and widen the tail
      (cortex.memories.search)."""
    settings = get_settings()
    share = str(max(1, available_cores() // workers))
    for variable, configured in (
        ("CORTEX_EMBEDDING_THREADS", settings.embedding_threads),
        ("CORTEX_SEARCH_CONCURRENCY", settings.search_concurrency),
    ):
        if configured <= 0:
            os.environ[variable] = share
    get_settings.cache_clear()  # the workers are forked from this process: no stale copy


def serve(source: str, host: str, port: int, workers: int | None = None) -> None:
    """Serves `source`'s `api` target (functions-framework's ASGI app) on host:port until stopped."""
    global _BOARD
    from functions_framework.aio import create_asgi_app

    app = create_asgi_app(target="api", source=source)  # type: ignore[no-untyped-call]
    workers = workers or int(os.environ.get("WORKERS", os.cpu_count() or 1))
    share_cores(workers)
    options: dict[str, Any] = {
        "bind": f"{host}:{port}",
        "workers": workers,
        "worker_class": "cortex.server.Worker",
        "timeout": 0,
        "graceful_timeout": int(os.environ.get("CORTEX_GRACEFUL_TIMEOUT", "10")),
        "loglevel": os.environ.get("GUNICORN_LOG_LEVEL", "error"),
    }
    if workers > 1 and os.environ.get("CORTEX_BALANCE", "1") != "0":
        # Room for a reload's new workers beside the old ones still finishing.
        _BOARD = Board(2 * workers + 2)
        options |= {"pre_fork": _reserve_slot, "child_exit": _free_slot}
    _Server(app, options).run()
