"""Connection balancing between `cortex serve`'s workers (cortex.balancer): the board's rule, and a
real two-worker server whose keep-alive connections end up evenly held, even when the least loaded
worker cannot accept."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from cortex.balancer import Board
from tests.conftest import cortex_serve


def test_a_worker_may_accept_only_while_no_live_worker_holds_fewer_connections() -> None:
    board = Board(4)
    a, b, c = board.reserve(), board.reserve(), board.reserve()
    assert (a, b, c) == (0, 1, 2)
    board.join(a, 101)
    board.join(b, 102)
    board.add(a, 1)
    assert not board.least_loaded(a)
    assert board.least_loaded(b)
    board.add(b, 1)
    assert board.least_loaded(a) and board.least_loaded(b)
    # A slot reserved for a worker still starting (c) does not count: it accepts nothing yet.
    assert board.least_loaded(a)
    board.add(a, -1)
    board.add(a, -1)  # never below zero
    assert board.count(a) == 0
    assert board.least_loaded(a) and not board.least_loaded(b)


def test_an_exited_workers_slot_is_freed_for_the_next_and_stops_counting() -> None:
    board = Board(2)
    a, b = board.reserve(), board.reserve()
    assert a is not None and b is not None
    assert board.reserve() is None
    board.join(a, 101)
    board.join(b, 102)
    board.add(b, 3)
    board.add(a, 5)
    assert not board.least_loaded(a)
    board.free(b)
    assert board.least_loaded(a)  # alone
    assert board.reserve() == b
    assert board.count(b) == 0


def test_a_worker_that_leaves_no_longer_counts_and_keeps_its_slot_until_freed() -> None:
    board = Board(2)
    a, b = board.reserve(), board.reserve()
    assert a is not None and b is not None
    board.join(a, 101)
    board.join(b, 102)
    board.add(a, 4)
    board.add(b, 1)
    assert not board.least_loaded(a)
    board.leave(b)  # shutting down: it accepts nothing more, so the others must not wait for it
    assert board.least_loaded(a)
    assert board.reserve() is None  # still reserved until the arbiter sees it exit
    board.free(b)
    assert board.reserve() == b


# --- a real server -------------------------------------------------------------------------------


def _inodes(port: int, state: str) -> set[str]:
    inodes = set()
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(path) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local_port = int(fields[1].rsplit(":", 1)[1], 16)
                if local_port == port and fields[3] == state:
                    inodes.add(fields[9])
    return inodes


def holders(port: int, state: str = "01") -> Counter[int]:
    """How many sockets on local `port` in `state` (01 established, 0A listening) each process holds."""
    inodes = _inodes(port, state)
    held: Counter[int] = Counter()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in (entry / "fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        held[int(entry.name)] += 1
    return held


def _connect_and_ask(port: int) -> socket.socket:
    """A keep-alive connection that has had one answer (so a worker holds it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, "closed before answering"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
    return sock


@pytest.fixture
def two_workers(dsn: str, tmp_path: Path) -> Iterator[int]:
    """`cortex serve` with two workers (no model); its port."""
    with cortex_serve(dsn, tmp_path / "server.log", CORTEX_EMBEDDINGS="none") as base:
        port = int(base.rsplit(":", 1)[1])
        # /health answers once one worker is up. A worker takes part in the balance once it listens
        # through its own listener, a duplicate of the shared socket: wait for both.
        deadline = time.monotonic() + 60
        while sum(1 for n in holders(port, "0A").values() if n >= 2) < 2:
            assert time.monotonic() < deadline, holders(port, "0A")
            time.sleep(0.1)
        yield port


@pytest.mark.slow
def test_keep_alive_connections_are_held_evenly_by_the_two_workers(two_workers: int) -> None:
    held_open = []
    try:
        for _ in range(16):
            held_open.append(_connect_and_ask(two_workers))
        counts = holders(two_workers)
        assert sorted(counts.values()) == [8, 8], counts
    finally:
        for sock in held_open:
            sock.close()


@pytest.mark.slow
def test_a_stopped_least_loaded_worker_does_not_keep_new_connections_waiting(two_workers: int) -> None:
    held_open = []
    stopped = None
    try:
        for _ in range(5):
            held_open.append(_connect_and_ask(two_workers))
        counts = holders(two_workers)
        assert sorted(counts.values()) == [2, 3], counts
        (busier, _), (least, _) = counts.most_common()
        os.kill(least, signal.SIGSTOP)
        stopped = least
        # The busier worker is not in turn, and the one in turn cannot accept: after the stall
        # limit the busier one answers anyway.
        started = time.monotonic()
        held_open.append(_connect_and_ask(two_workers))
        assert time.monotonic() - started < 5
        assert holders(two_workers)[busier] == 4
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        for sock in held_open:
            sock.close()
