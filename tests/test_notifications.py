"""Webhook delivery from the outbox against a real database and a real HTTP receiver on 127.0.0.1.

The receiver checks every signature, deduplicates on the idempotency key the way a receiver is
told to, and can be made unreliable: it fails a share of requests with 500, hangs past the
client's timeout on some (after processing them, the worst case for duplicates), and can hold
requests so that a worker process is killed with messages in flight. The promise under test: in
the end every message is processed exactly once by idempotency key, or dead-lettered; none is lost.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from cortex.config import get_settings
from cortex.notifications import delivery as webhooks
from cortex.notifications.delivery import DeliveryConfig, deliver_batch, sign, verify
from tests.conftest import AsAgent, Tenant

ROOT = Path(__file__).resolve().parent.parent
Admin = psycopg.Connection[dict[str, Any]]

# A short client timeout keeps the hang cases fast (the receiver hangs for longer than it); the
# other tests allow a loaded machine plenty of time, so that only the failures they stage happen.
FAST = DeliveryConfig(timeout_seconds=0.5, concurrency=8)
STEADY = DeliveryConfig(timeout_seconds=10.0, concurrency=8)


# --- the receiver -------------------------------------------------------------------------------


@dataclass
class Request:
    """One request as the receiver saw it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    verified: bool
    status: int


@dataclass
class Receiver:
    """A webhook receiver: verifies signatures, processes each idempotency key once."""

    secrets: dict[str, str]  # path -> signing secret
    fail_rate: float = 0.0
    hang_rate: float = 0.0
    hang_seconds: float = 1.5
    seed: int = 20261122
    #: After this many requests, further ones wait until `release()` (to kill a worker mid-delivery).
    hold_after: int | None = None
    requests: list[Request] = field(default_factory=list)
    #: Idempotency keys in the order they were processed (a key is processed once, then deduplicated).
    processed: list[str] = field(default_factory=list)
    duplicates: int = 0
    held: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()
        self._gate = threading.Event()
        self._done: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the worker's client expects

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, hang = receiver.handle(self.path, {k: v for k, v in self.headers.items()}, body)
                if hang:
                    time.sleep(receiver.hang_seconds)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the client gave up (timeout) or died: exactly the cases under test

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str) -> str:
        """The URL of `path` on this receiver."""
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, bool]:
        with self._lock:
            n = len(self.requests) + self.held
            roll = self._rng.random()
            hold = self.hold_after is not None and n >= self.hold_after
            if hold:
                self.held += 1
        if hold:
            self._gate.wait(30)
        lowered = {k.lower(): v for k, v in headers.items()}
        verified = verify(
            self.secrets.get(path, ""),
            lowered.get("x-cortex-timestamp"),
            raw,
            lowered.get("x-cortex-signature"),
        )
        body = json.loads(raw) if raw else {}
        key = lowered.get("idempotency-key", "")
        hang = False
        if not verified:
            status = 401
        elif roll < self.fail_rate:
            status = 500
        else:
            status = 200
            # Processed first, then (sometimes) hanging before the reply: the sender sees a
            # timeout and retries something already done; the idempotency key saves us.
            hang = roll < self.fail_rate + self.hang_rate
            with self._lock:
                if key in self._done:
                    self.duplicates += 1
                else:
                    self._done.add(key)
                    self.processed.append(key)
        with self._lock:
            self.requests.append(Request(path, headers, body, verified, status))
        return status, hang

    def release(self) -> None:
        """Lets held requests go on."""
        self.hold_after = None
        self._gate.set()

    def close(self) -> None:
        """Stops the server."""
        self.release()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory() -> Iterator[Callable[..., Receiver]]:
    """Makes receivers; all are shut down at the end of the test."""
    made: list[Receiver] = []

    def make(secrets: dict[str, str] | None = None, **kw: Any) -> Receiver:
        r = Receiver(secrets or {}, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def queue_conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """The delivery worker's connection: autocommit, as the database owner."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def add_endpoint(admin: Admin, tenant: Tenant, recipient: str, receiver: Receiver, enabled: bool = True) -> str:
    """Configures `recipient`'s webhook at /hooks/<tenant>/<recipient> on the receiver; returns its path."""
    path = f"/hooks/{tenant.slug}/" + recipient.replace(":", "-")
    row = admin.execute(
        "insert into cortex.webhook_endpoints (tenant_id, recipient, url, enabled) values (%s, %s, %s, %s)"
        " returning secret",
        (tenant.id, recipient, receiver.url(path), enabled),
    ).fetchone()
    assert row is not None
    receiver.secrets[path] = row["secret"]
    return path


def notify(admin: Admin, tenant: Tenant, event: str, recipient: str, payload: dict[str, Any]) -> int:
    """Queues one outbox message as an event function would; returns its id."""
    row = admin.execute(
        "select cortex.notify(%s, %s, %s, %s) as id", (tenant.id, event, recipient, Jsonb(payload))
    ).fetchone()
    assert row is not None
    return int(row["id"])


def outbox_row(admin: Admin, message_id: int) -> dict[str, Any]:
    """One outbox row, with the backoff its last failure set (seconds from then to the next attempt)."""
    row = admin.execute(
        "select *, extract(epoch from next_attempt_at - updated_at)::float8 as backoff from cortex.outbox"
        " where id = %s",
        (message_id,),
    ).fetchone()
    assert row is not None
    return row


def make_due(admin: Admin) -> None:
    """Skips the backoff wait of every queued retry (tests do not sleep through backoffs)."""
    admin.execute("update cortex.outbox set next_attempt_at = now() where status = 'pending'")


# --- signing ------------------------------------------------------------------------------------


def test_signature_is_hmac_sha256_of_timestamp_dot_body_and_verify_rejects_tampering() -> None:
    body = b'{"event":"handoff.created"}'
    now = 1_800_000_000
    signature = sign("s3cret", now, body)

    assert signature == "sha256=" + hmac.new(b"s3cret", b"1800000000." + body, hashlib.sha256).hexdigest()
    assert verify("s3cret", str(now), body, signature, now=now + 10)
    assert not verify("s3cret", str(now), body + b" ", signature, now=now)  # body changed
    assert not verify("other", str(now), body, signature, now=now)  # wrong secret
    assert not verify("s3cret", str(now + 1), body, signature, now=now)  # timestamp changed
    assert not verify("s3cret", str(now), body, signature, now=now + 301)  # too old: a replay
    assert not verify("s3cret", None, body, signature, now=now)
    assert not verify("s3cret", str(now), body, None, now=now)
    # During a secret rotation the sender may send several signatures; one valid one suffices.
    assert verify("s3cret", str(now), body, f"sha256=00ff, {signature}", now=now)


# --- one delivery -------------------------------------------------------------------------------


def test_a_message_is_posted_as_signed_json_with_idempotency_key_and_marked_delivered(
    admin: Admin, tenant: Tenant, queue_conn: psycopg.Connection[Any], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory()
    path = add_endpoint(admin, tenant, "agent:jasper", receiver)
    message_id = notify(admin, tenant, "handoff.created", "agent:jasper", {"handoff_id": "h1", "urgency": "high"})

    stats = deliver_batch(queue_conn, "w1", config=STEADY)

    assert (stats.claimed, stats.delivered, stats.retrying, stats.dead) == (1, 1, 0, 0)
    [req] = receiver.requests
    row = outbox_row(admin, message_id)
    assert req.path == path and req.verified and req.status == 200
    assert req.headers["Idempotency-Key"] == row["idempotency_key"]
    assert req.headers["X-Cortex-Event"] == "handoff.created"
    assert req.headers["Content-Type"] == "application/json"
    assert abs(int(req.headers["X-Cortex-Timestamp"]) - time.time()) < 60
    assert req.headers["X-Cortex-Signature"].startswith("sha256=")
    assert req.body["id"] == message_id and req.body["event"] == "handoff.created"
    assert req.body["tenant_id"] == tenant.id and req.body["recipient"] == "agent:jasper"
    assert req.body["idempotency_key"] == row["idempotency_key"]
    assert req.body["data"] == {"handoff_id": "h1", "urgency": "high"}
    assert (row["status"], row["attempts"], row["last_status_code"]) == ("delivered", 1, 200)
    assert row["delivered_at"] is not None and row["locked_by"] is None
    # Nothing is delivered twice: the next round finds nothing due.
    assert deliver_batch(queue_conn, "w1", config=STEADY).claimed == 0


def test_a_failed_delivery_is_retried_with_exponential_backoff_and_jitter_then_dead_lettered(
    admin: Admin, tenant: Tenant, queue_conn: psycopg.Connection[Any], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory(fail_rate=1.0)
    add_endpoint(admin, tenant, "monitor", receiver)
    ids = [notify(admin, tenant, "usage.daily_report", "monitor", {"n": i}) for i in range(20)]
    admin.execute("update cortex.outbox set max_attempts = 4 where tenant_id = %s", (tenant.id,))

    delays: list[list[float]] = []
    for attempt in range(1, 4):
        stats = deliver_batch(queue_conn, "w1", config=STEADY)
        assert (stats.claimed, stats.retrying, stats.dead) == (20, 20, 0)
        rows = [outbox_row(admin, i) for i in ids]
        assert {(r["status"], r["attempts"], r["last_status_code"]) for r in rows} == {("pending", attempt, 500)}
        assert all(r["last_error"].startswith("HTTP 500") for r in rows)
        delays.append([r["backoff"] for r in rows])
        make_due(admin)

    # Delay before retry n: between half and all of 30 s * 2^(n-1) ("equal jitter").
    for n, attempt_delays in enumerate(delays, start=1):
        full = 30 * 2 ** (n - 1)
        assert all(full / 2 <= d <= full for d in attempt_delays), (n, attempt_delays)
        assert len({round(d, 3) for d in attempt_delays}) > 10  # jittered, not in lockstep

    stats = deliver_batch(queue_conn, "w1", config=STEADY)
    assert (stats.claimed, stats.dead) == (20, 20)
    assert {outbox_row(admin, i)["status"] for i in ids} == {"dead"}
    alerts = admin.execute(
        "select kind, details ->> 'outbox_id' as outbox_id from cortex.alerts where tenant_id = %s", (tenant.id,)
    ).fetchall()
    assert sorted(int(a["outbox_id"]) for a in alerts) == ids
    assert {a["kind"] for a in alerts} == {"webhook_dead_letter"}
    assert len(receiver.requests) == 80 and receiver.processed == []


def test_a_hanging_receiver_times_out_and_the_message_is_retried(
    admin: Admin, tenant: Tenant, queue_conn: psycopg.Connection[Any], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory(hang_rate=1.0, hang_seconds=5.0)
    add_endpoint(admin, tenant, "agent:mia", receiver)
    message_id = notify(admin, tenant, "handoff.created", "agent:mia", {})

    started = time.monotonic()
    stats = deliver_batch(queue_conn, "w1", config=FAST)

    assert time.monotonic() - started < 4  # gave up at the client timeout, not the receiver's pace
    assert stats.retrying == 1
    row = outbox_row(admin, message_id)
    assert row["status"] == "pending" and row["last_status_code"] is None
    assert row["last_error"].startswith("timeout")

    # The receiver had processed it before hanging; the retry is recognised by its key.
    receiver.hang_rate = 0.0
    make_due(admin)
    assert deliver_batch(queue_conn, "w1", config=STEADY).delivered == 1
    assert receiver.processed == [row["idempotency_key"]] and receiver.duplicates == 1


# --- endpoints and fallbacks --------------------------------------------------------------------


def test_monitor_without_endpoint_falls_back_to_helios_webhook_url(
    admin: Admin,
    tenant: Tenant,
    queue_conn: psycopg.Connection[Any],
    receiver_factory: Callable[..., Receiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = receiver_factory({"/helios": "helios-secret"})
    monkeypatch.setenv("HELIOS_WEBHOOK_URL", receiver.url("/helios"))
    monkeypatch.setenv("HELIOS_WEBHOOK_SECRET", "helios-secret")
    monkeypatch.setenv("CORTEX_WEBHOOK_TIMEOUT", "7.5")
    get_settings.cache_clear()
    config = DeliveryConfig.from_env()
    assert config.monitor_url == receiver.url("/helios") and config.timeout_seconds == 7.5
    message_id = notify(admin, tenant, "usage.daily_report", "monitor", {"date": "2026-11-21"})

    assert deliver_batch(queue_conn, "w1", config=config).delivered == 1

    [req] = receiver.requests
    assert req.path == "/helios" and req.verified
    assert outbox_row(admin, message_id)["status"] == "delivered"


def test_a_configured_monitor_endpoint_wins_over_helios_webhook_url(
    admin: Admin, tenant: Tenant, queue_conn: psycopg.Connection[Any], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory({"/helios": "helios-secret"})
    path = add_endpoint(admin, tenant, "monitor", receiver)
    notify(admin, tenant, "usage.daily_report", "monitor", {})
    config = DeliveryConfig(timeout_seconds=10.0, monitor_url=receiver.url("/helios"), monitor_secret="x")

    assert deliver_batch(queue_conn, "w1", config=config).delivered == 1
    assert [r.path for r in receiver.requests] == [path]
    assert receiver.requests[0].verified


def test_recipients_without_an_enabled_endpoint_are_skipped_not_retried(
    admin: Admin, tenant: Tenant, queue_conn: psycopg.Connection[Any], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory()
    add_endpoint(admin, tenant, "agent:anna", receiver, enabled=False)
    no_endpoint = notify(admin, tenant, "handoff.created", "agent:jasper", {})
    disabled = notify(admin, tenant, "handoff.created", "agent:anna", {})
    monitor = notify(admin, tenant, "usage.daily_report", "monitor", {})  # and no HELIOS_WEBHOOK_URL

    stats = deliver_batch(queue_conn, "w1", config=STEADY)

    assert stats.claimed == 0 and receiver.requests == []
    for message_id, recipient in ((no_endpoint, "agent:jasper"), (disabled, "agent:anna"), (monitor, "monitor")):
        row = outbox_row(admin, message_id)
        assert (row["status"], row["attempts"]) == ("skipped", 0)
        assert row["last_error"] == f"no webhook endpoint for recipient {recipient}"


def test_a_lease_lost_during_the_last_attempt_is_dead_lettered_on_the_next_claim(
    admin: Admin, tenant: Tenant, queue_conn: psycopg.Connection[Any], receiver_factory: Callable[..., Receiver]
) -> None:
    receiver = receiver_factory()
    add_endpoint(admin, tenant, "agent:luna", receiver)
    message_id = notify(admin, tenant, "handoff.created", "agent:luna", {})
    # A worker claimed its last attempt and died: the lease has run out.
    admin.execute(
        "update cortex.outbox set status = 'delivering', attempts = max_attempts, locked_by = 'gone',"
        " locked_until = now() - interval '1 second' where id = %s",
        (message_id,),
    )

    assert deliver_batch(queue_conn, "w1", config=STEADY).claimed == 0

    row = outbox_row(admin, message_id)
    assert row["status"] == "dead" and "worker gone lost the message" in row["last_error"]
    assert admin.execute(
        "select count(*) as n from cortex.alerts where kind = 'webhook_dead_letter' and tenant_id = %s", (tenant.id,)
    ).fetchone() == {"n": 1}


# --- dead letters -------------------------------------------------------------------------------


def test_dead_letters_are_listed_and_replayed_by_id_or_all(
    admin: Admin,
    tenant: Tenant,
    other_tenant: Tenant,
    queue_conn: psycopg.Connection[Any],
    receiver_factory: Callable[..., Receiver],
) -> None:
    receiver = receiver_factory(fail_rate=1.0)
    for t in (tenant, other_tenant):
        add_endpoint(admin, t, "agent:luna", receiver)
    ours = [notify(admin, tenant, "handoff.created", "agent:luna", {"n": i}) for i in range(3)]
    theirs = notify(admin, other_tenant, "handoff.created", "agent:luna", {"n": 9})
    admin.execute("update cortex.outbox set max_attempts = 1")
    assert deliver_batch(queue_conn, "w1", config=STEADY).dead == 4

    dead = webhooks.list_dead_letters(queue_conn, tenant_id=tenant.id)
    assert [d["id"] for d in dead] == ours
    assert all(d["last_status_code"] == 500 and d["attempts"] == 1 for d in dead)
    assert len(webhooks.list_dead_letters(queue_conn)) == 4
    with pytest.raises(ValueError):
        webhooks.replay_dead_letters(queue_conn)

    # The receiver is fixed; one message is replayed by id, then all of this tenant's.
    receiver.fail_rate = 0.0
    assert webhooks.replay_dead_letters(queue_conn, [ours[0]]) == 1
    replayed = outbox_row(admin, ours[0])
    assert (replayed["status"], replayed["attempts"]) == ("pending", 0)
    assert deliver_batch(queue_conn, "w1", config=STEADY).delivered == 1
    assert webhooks.replay_dead_letters(queue_conn, tenant_id=tenant.id, all_dead=True) == 2
    assert deliver_batch(queue_conn, "w1", config=STEADY).delivered == 2

    assert {outbox_row(admin, i)["status"] for i in ours} == {"delivered"}
    assert outbox_row(admin, theirs)["status"] == "dead"  # another tenant's dead letter is untouched
    assert webhooks.replay_dead_letters(queue_conn, [ours[0]]) == 0  # delivered: nothing to replay


def test_delivery_functions_are_not_executable_by_api_roles(tenant: Tenant, as_agent: AsAgent) -> None:
    for query in (
        "select * from cortex.claim_outbox('w', 1, 30)",
        "select cortex.replay_dead_letters(null, null)",
        "select * from cortex.list_dead_letters()",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
            conn.execute(query)


# --- the loop -----------------------------------------------------------------------------------


def test_run_delivery_wakes_on_notify_and_stops_when_asked(
    dsn: str,
    admin: Admin,
    tenant: Tenant,
    receiver_factory: Callable[..., Receiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = receiver_factory()
    add_endpoint(admin, tenant, "agent:luna", receiver)
    monkeypatch.setenv("CORTEX_WORKER_POLL", "30")  # only a NOTIFY can wake it within the test
    get_settings.cache_clear()
    stop = threading.Event()
    thread = webhooks.start_in_background(stop, "bg")
    try:
        time.sleep(0.5)  # idle and listening
        started = time.monotonic()
        notify(admin, tenant, "handoff.created", "agent:luna", {"n": 1})
        deadline = started + 10
        while not receiver.processed and time.monotonic() < deadline:
            time.sleep(0.02)
        assert receiver.processed, "the NOTIFY did not wake the delivery loop"
        assert time.monotonic() - started < 5
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


# --- faults -------------------------------------------------------------------------------------


def test_unreliable_receiver_and_killed_worker_lose_nothing_and_process_each_key_once(
    dsn: str,
    admin: Admin,
    tenant: Tenant,
    queue_conn: psycopg.Connection[Any],
    receiver_factory: Callable[..., Receiver],
    tmp_path: Path,
) -> None:
    # 30 % of requests fail with 500, 5 % hang past the client timeout (after processing).
    receiver = receiver_factory(fail_rate=0.30, hang_rate=0.05, hang_seconds=1.0, hold_after=12)
    recipients = ["agent:luna", "agent:mia", "agent:jasper", "monitor"]
    for r in recipients:
        add_endpoint(admin, tenant, r, receiver)
    admin.execute(
        "select count(cortex.notify(%s, 'test.event', (%s::text[])[1 + g %% 4], jsonb_build_object('n', g)))"
        " from generate_series(1, 400) g",
        (tenant.id, recipients),
    )
    # Three attempts each, so that some messages do run out of them and are dead-lettered.
    admin.execute("update cortex.outbox set max_attempts = 3")

    # A worker process starts delivering; the receiver holds its requests after the 12th, and
    # the worker is killed while they are in flight.
    log_file = tmp_path / "killed.log"
    with open(log_file, "w") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cortex.notifications.delivery",
                "--worker-id",
                "killed",
                "--batch",
                "50",
                "--concurrency",
                "4",
                "--timeout",
                "0.5",
                "--lease",
                "3",
            ],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": dsn, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 30
        while receiver.held < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert receiver.held >= 4, log_file.read_text()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    in_flight = {
        r["idempotency_key"]
        for r in admin.execute(
            "select idempotency_key from cortex.outbox where status = 'delivering' and locked_by = 'killed'"
        ).fetchall()
    }
    assert in_flight, "the worker was killed with nothing in flight"
    receiver.release()  # the held requests now complete, to a sender that no longer exists

    # A surviving worker delivers everything; retries are made due at once between rounds, and
    # the dead worker's messages come back when its 3 s lease runs out.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        make_due(admin)
        stats = deliver_batch(queue_conn, "survivor", 100, config=FAST)
        left = admin.execute(
            "select count(*) as n from cortex.outbox where status in ('pending', 'delivering')"
        ).fetchone()
        assert left is not None
        if left["n"] == 0:
            break
        if stats.claimed == 0:
            time.sleep(0.25)  # waiting for the killed worker's lease to run out
    rows = admin.execute("select idempotency_key, event, recipient, status, attempts from cortex.outbox").fetchall()
    messages = [r for r in rows if r["event"] == "test.event"]
    by_status = Counter(r["status"] for r in messages)
    # Every message counts below, the alert.raised messages about dead letters included.
    delivered = {r["idempotency_key"] for r in rows if r["status"] == "delivered"}
    dead = {r["idempotency_key"] for r in rows if r["status"] == "dead"}

    # Nothing lost: every message ended delivered or dead-lettered.
    assert set(by_status) <= {"delivered", "dead"} and sum(by_status.values()) == 400, by_status
    assert delivered and dead, by_status
    # Each dead letter raised an alert for the monitor (delivered here too, or dead: then no further
    # alert message, the loop guard) and the admin channel (no endpoint: skipped).
    raised = [r for r in rows if r["event"] == "alert.raised"]
    assert Counter(r["recipient"] for r in raised) == {"monitor": by_status["dead"], "admin": by_status["dead"]}
    assert {r["status"] for r in raised if r["recipient"] == "admin"} == {"skipped"}
    assert {r["status"] for r in raised if r["recipient"] == "monitor"} <= {"delivered", "dead"}
    # Every delivered message reached the receiver, which processed each key exactly once.
    processed = Counter(receiver.processed)
    assert delivered <= set(processed)
    assert max(processed.values()) == 1
    # Every request the receiver got is counted: a message is never sent more often than the
    # attempts the outbox recorded for it (a lost lease counts as one), so a double delivery
    # (twice in one attempt, or again after it was marked delivered) fails here.
    sent: Counter[str] = Counter()
    for request in receiver.requests:
        sent[{k.lower(): v for k, v in request.headers.items()}["idempotency-key"]] += 1
    attempts = {r["idempotency_key"]: r["attempts"] for r in rows}
    over = {k: (n, attempts.get(k)) for k, n in sent.items() if n > attempts.get(k, 0)}
    assert not over, over
    assert all(sent[k] >= 1 for k in delivered)
    # What the receiver processed but never acknowledged in time (a hang) may have died later.
    assert set(processed) - delivered <= dead
    # Retries after hangs and the killed worker's in-flight messages did arrive twice, and were
    # recognised by their key.
    assert receiver.duplicates > 0
    assert all(r.verified for r in receiver.requests)
    # Messages that died had used all their attempts (a lost lease counts as one).
    assert all(r["attempts"] == 3 for r in messages if r["status"] == "dead")
