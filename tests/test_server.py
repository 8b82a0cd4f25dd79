"""The edge as a client meets it: `cortex serve` (functions-framework's ASGI app under uvicorn
workers with Cortex's protocol limits) on a loopback port, driven over raw sockets."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import Tenant, cortex_serve, free_port

ROOT = Path(__file__).resolve().parents[1]
HEAD_TIMEOUT = 2.0

pytestmark = pytest.mark.slow


@pytest.fixture
def server(dsn: str, tmp_path: Path) -> Iterator[str]:
    """`cortex serve` with two workers on a free port; its base URL."""
    with cortex_serve(dsn, tmp_path / "server.log", CORTEX_HEAD_TIMEOUT=str(HEAD_TIMEOUT)) as base:
        yield base


def _connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_serve_answers_the_api_with_its_own_errors(server: str, tenant: Tenant) -> None:
    key = {"Authorization": f"Bearer {tenant.keys['luna']}"}
    created = httpx.post(f"{server}/api/v1/contacts", headers=key, json={"email": "wire@acme.com"}, timeout=10)
    assert created.status_code == 201
    got = httpx.get(f"{server}/api/v1/contacts/{created.json()['id']}", headers=key, timeout=10)
    assert got.json()["email"] == "wire@acme.com"
    assert httpx.get(f"{server}/api/v1/nowhere", timeout=10).json()["error"]["code"] == "route_not_found"


def test_a_huge_request_line_is_refused_with_431_after_a_bounded_read(server: str) -> None:
    sock = _connect(server)
    sent = 0
    try:
        sock.sendall(b"GET /health?")
        while sent < 8 * 1024 * 1024:
            sock.sendall(b"a" * 65536)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError):
        pass
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert sent < 8 * 1024 * 1024  # the server hung up long before the client was done
    assert httpx.get(f"{server}/health", timeout=5).status_code == 200


def test_a_slow_request_head_is_closed_after_the_head_timeout(server: str) -> None:
    sock = _connect(server)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
    sock.settimeout(HEAD_TIMEOUT * 10)  # a server that never hangs up fails here with a timeout
    started = time.monotonic()
    assert sock.recv(1024) == b""  # closed by the server, with no answer
    waited = time.monotonic() - started
    sock.close()
    assert waited >= HEAD_TIMEOUT * 0.5  # it waited for the head before giving up


def test_half_open_connections_do_not_freeze_the_api(server: str) -> None:
    idle = [_connect(server) for _ in range(60)]
    try:
        for sock in idle[::2]:
            sock.sendall(b"POST /api/v1/contacts HTTP/1.1\r\n")
        answers = [httpx.get(f"{server}/health", timeout=5).status_code for _ in range(20)]
        assert answers == [200] * 20
    finally:
        for sock in idle:
            sock.close()


def test_a_chunked_body_over_the_limit_is_refused_while_it_streams(server: str, tenant: Tenant) -> None:
    sock = _connect(server)
    head = (
        "POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {tenant.keys['luna']}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    sock.sendall(head.encode())
    chunk = b"a" * 65536
    sent = 0
    try:
        while sent < 64 * 1024 * 1024:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            sock.setblocking(False)
            try:
                if sock.recv(1, socket.MSG_PEEK):
                    break
            except BlockingIOError:
                pass
            finally:
                sock.setblocking(True)
    except (BrokenPipeError, ConnectionResetError):
        pass
    sock.settimeout(10)
    answer = _read_all(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"field": "body"' in answer or b'"field":"body"' in answer
    assert sent < 16 * 1024 * 1024  # refused near the 8 MiB limit, not after 64 MiB


def test_serve_stops_at_start_when_the_embedding_model_does_not_load(tmp_path: Path) -> None:
    # Each worker loads the model before it listens: a bad setting is reported at start, not by
    # every search later.
    env = {**os.environ, "CORTEX_EMBEDDINGS": "local", "CORTEX_EMBEDDING_MODEL": str(tmp_path / "missing")}
    cortex = Path(sys.executable).parent / "cortex"
    command = [str(cortex), "serve", "--host", "127.0.0.1", "--port", str(free_port()), "--workers", "1"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "CORTEX_EMBEDDING_MODEL" in done.stderr and "Worker failed to boot" in done.stderr


def test_stopping_the_server_ends_open_event_streams_instead_of_waiting_them_out(
    dsn: str, tenant: Tenant, tmp_path: Path
) -> None:
    """A server told to stop closes its open event streams (the dashboard's here) and exits,
    rather than waiting for streams that never end until the graceful timeout (120 s here)."""
    with cortex_serve(dsn, tmp_path / "server.log", CORTEX_GRACEFUL_TIMEOUT="120") as base:
        signed_in = httpx.post(f"{base}/api/v1/dashboard/session", json={"key": tenant.keys["helios"]}, timeout=10)
        assert signed_in.status_code == 200, signed_in.text
        port = base.rsplit(":", 1)[1]
        master = min(int(pid) for pid in subprocess.check_output(["pgrep", "-f", f"serve .*--port {port}"]).split())
        with httpx.stream("GET", f"{base}/api/v1/dashboard/events", cookies=signed_in.cookies, timeout=60) as events:
            assert events.status_code == 200 and events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            assert next(lines) == "retry: 3000" and next(lines) == "event: ready"
            os.kill(master, signal.SIGTERM)
            stopped = time.monotonic()
            # The stream ends: the server closes it (its keep-alives would hold it open until
            # gunicorn's graceful timeout, 120 s here, killed the worker).
            with contextlib.suppress(httpx.RemoteProtocolError):
                for _ in lines:
                    assert time.monotonic() - stopped < 60, "the stream outlived the server's stop"
            assert time.monotonic() - stopped < 60, "the stream ended only when the graceful timeout killed it"
        deadline = stopped + 60
        while (
            subprocess.run(["pgrep", "-f", f"serve .*--port {port}"], capture_output=True, check=False).returncode == 0
        ):
            assert time.monotonic() < deadline, "the server still runs 60 s after SIGTERM"
            time.sleep(0.2)
