"""Webhook delivery: the worker side of the outbox (`cortex.outbox`, written with each event).

A delivery round claims due messages under a lease (`cortex.claim_outbox`, FOR UPDATE SKIP LOCKED),
POSTs them concurrently over one keep-alive HTTP client, and reports the outcomes in one statement
each (`cortex.mark_delivered`, `cortex.mark_failed`). A 2xx is delivered; anything else (a status,
a refused connection, a timeout) is retried with exponential backoff and jitter, and dead-lettered
after the message's last attempt. A worker killed mid-delivery leaves its messages leased; when
the lease runs out another worker delivers them again. Delivery is therefore at least once, and
every request carries the message's idempotency key so that receivers process it exactly once.

Each request is signed: `X-Cortex-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">`
with the endpoint's secret, and `X-Cortex-Timestamp` carries the Unix time it was signed; receivers
check both with `verify` (the timestamp bounds replays). Endpoints are rows of
`cortex.webhook_endpoints` (per agent, the monitor, the admin, humans); the monitor falls back to
HELIOS_WEBHOOK_URL (signed with HELIOS_WEBHOOK_SECRET) when its tenant configured none. Messages
for recipients without an endpoint are marked skipped: LISTEN subscribers had them already.

    python -m cortex.notifications.delivery [--once] [--batch N] [--worker-id ID] [--lease S] [--timeout S]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

import httpx
import psycopg

from cortex import db
from cortex.config import get_settings
from cortex.shutdown import signals_set, wait_for_notify

__all__ = [
    "ATTEMPT_HEADER",
    "EVENT_HEADER",
    "IDEMPOTENCY_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "DeliveryConfig",
    "DeliveryStats",
    "default_worker_id",
    "deliver_batch",
    "list_dead_letters",
    "main",
    "message_body",
    "replay_dead_letters",
    "run_delivery",
    "sign",
    "start_in_background",
    "verify",
]

log = logging.getLogger("cortex.webhooks")

SIGNATURE_HEADER = "X-Cortex-Signature"
TIMESTAMP_HEADER = "X-Cortex-Timestamp"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT_HEADER = "X-Cortex-Event"
ATTEMPT_HEADER = "X-Cortex-Attempt"
LISTEN_CHANNEL = "cortex_outbox"
USER_AGENT = "cortex-webhooks/0.1"

# How often to look again, 50 ms apart, at due messages that another session holds.
_MAX_QUICK_LOOKS = 40
_MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class DeliveryConfig:
    """Delivery knobs, from the settings (CORTEX_WEBHOOK_*, HELIOS_WEBHOOK_*) unless given."""

    #: Per-request timeout (connect, read, write), seconds: a hanging receiver costs at most this.
    timeout_seconds: float = 5.0
    #: Requests in flight at once per worker.
    concurrency: int = 16
    #: Messages claimed per round.
    batch: int = 100
    #: Backoff before retry n is base * 2^(n-1) seconds, capped, half of it random (jitter).
    backoff_base_seconds: float = 30.0
    backoff_max_seconds: float = 6 * 3600.0
    #: Lease on claimed messages; None: long enough for a whole round of timeouts.
    lease_seconds: int | None = None
    #: Where the monitor's messages go when its tenant configured no endpoint (HELIOS_WEBHOOK_URL).
    monitor_url: str = ""
    monitor_secret: str = ""

    @classmethod
    def from_env(cls) -> DeliveryConfig:
        """The configuration of this process (cortex.config settings, read from the environment)."""
        s = get_settings()
        return cls(
            timeout_seconds=s.webhook_timeout_seconds,
            concurrency=s.webhook_concurrency,
            batch=s.webhook_batch,
            backoff_base_seconds=s.webhook_backoff_base_seconds,
            backoff_max_seconds=s.webhook_backoff_max_seconds,
            lease_seconds=s.webhook_lease_seconds or None,
            monitor_url=s.helios_webhook_url,
            monitor_secret=s.helios_webhook_secret,
        )

    def lease_for(self, batch: int) -> int:
        """The lease on a round of `batch` messages: every wave of requests timing out twice
        over (connect, then read), plus slack, so a live worker never loses a lease it still uses."""
        if self.lease_seconds is not None:
            return self.lease_seconds
        waves = math.ceil(batch / max(self.concurrency, 1))
        return math.ceil(waves * self.timeout_seconds * 2 + 10)


@dataclass
class DeliveryStats:
    """What delivery rounds did; `claimed` = delivered + retrying + dead + lost."""

    claimed: int = 0
    delivered: int = 0
    #: Failed this time, queued again with backoff.
    retrying: int = 0
    #: Failed their last attempt: dead letters.
    dead: int = 0
    #: Failed after the lease had passed to another worker (that worker decides their fate).
    lost: int = 0
    seconds: float = 0.0

    def add(self, other: DeliveryStats) -> None:
        """Adds another round's counts to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


# --- signing ------------------------------------------------------------------------------------


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The signature header value for `body` signed at `timestamp` (Unix seconds):
    `sha256=` + hex HMAC-SHA256 with `secret` over `"<timestamp>.<body>"`."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str,
    timestamp: str | int | None,
    body: bytes,
    signature: str | None,
    *,
    tolerance_seconds: float = 300.0,
    now: float | None = None,
) -> bool:
    """For receivers: True when `signature` (the X-Cortex-Signature header; several comma-separated
    values are accepted, for secret rotation) signs `body` at `timestamp` (X-Cortex-Timestamp)
    with `secret`, and the timestamp is within `tolerance_seconds` of now (replay protection)."""
    if not secret or not signature or timestamp is None:
        return False
    try:
        ts = int(str(timestamp))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - ts) > tolerance_seconds:
        return False
    expected = sign(secret, ts, body)
    return any(hmac.compare_digest(expected, candidate.strip()) for candidate in signature.split(","))


def message_body(message: Mapping[str, Any]) -> bytes:
    """The JSON body POSTed for an outbox message: id, event, tenant, recipient, idempotency key,
    creation time and the event's data. The same bytes on every attempt."""
    created = message["created_at"]
    doc = {
        "id": message["id"],
        "event": message["event"],
        "tenant_id": str(message["tenant_id"]),
        "recipient": message["recipient"],
        "idempotency_key": message["idempotency_key"],
        "created_at": created.isoformat() if isinstance(created, datetime) else str(created),
        "data": message["payload"],
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=str).encode()


# --- one round ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    status_code: int | None
    error: str | None = None


def _post(client: httpx.Client, message: Mapping[str, Any]) -> _Outcome:
    body = message_body(message)
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        EVENT_HEADER: message["event"],
        TIMESTAMP_HEADER: timestamp,
        IDEMPOTENCY_HEADER: message["idempotency_key"],
        ATTEMPT_HEADER: str(message["attempts"]),
    }
    if message["secret"]:
        headers[SIGNATURE_HEADER] = sign(message["secret"], timestamp, body)
    try:
        response = client.post(message["url"], content=body, headers=headers)
    except httpx.TimeoutException as exc:
        return _Outcome(False, None, f"timeout ({type(exc).__name__}) posting to {message['url']}")
    except httpx.HTTPError as exc:
        return _Outcome(False, None, f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS])
    except Exception as exc:  # an unusable URL, say: recorded on the message, never fatal to the round
        return _Outcome(False, None, f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS])
    if 200 <= response.status_code < 300:
        return _Outcome(True, response.status_code)
    text = response.text.strip().replace("\n", " ")[:500]
    return _Outcome(False, response.status_code, f"HTTP {response.status_code}" + (f": {text}" if text else ""))


def _client(config: DeliveryConfig) -> httpx.Client:
    return httpx.Client(
        timeout=httpx.Timeout(config.timeout_seconds),
        limits=httpx.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency),
        headers={"User-Agent": USER_AGENT},
        follow_redirects=False,  # a redirect is the receiver's misconfiguration: fail and retry
    )


@contextmanager
def _resources(
    config: DeliveryConfig, client: httpx.Client | None, executor: Executor | None
) -> Iterator[tuple[httpx.Client, Executor]]:
    own_client = client is None
    own_executor = executor is None
    c = client if client is not None else _client(config)
    e = executor if executor is not None else ThreadPoolExecutor(config.concurrency, "webhook")
    try:
        yield c, e
    finally:
        if own_executor:
            e.shutdown(wait=True)
        if own_client:
            c.close()


def deliver_batch(
    conn: psycopg.Connection[Any],
    worker_id: str,
    batch: int = 100,
    *,
    config: DeliveryConfig | None = None,
    client: httpx.Client | None = None,
    executor: Executor | None = None,
) -> DeliveryStats:
    """Claims up to `batch` due messages, POSTs them concurrently and records each outcome.

    `conn` is an autocommit connection as the database owner. `client` (keep-alive, reused across
    rounds) and `executor` (the concurrency) are made for this call when not given. A message
    another worker took over after this worker's lease ran out and that failed here counts as
    `lost`: its new holder decides what happens to it.
    """
    if not conn.autocommit:
        raise ValueError("deliver_batch needs an autocommit connection (each step commits on its own)")
    config = config or DeliveryConfig.from_env()
    started = time.monotonic()
    # Payloads arrive as JSON text and are decoded one by one: a message that cannot be
    # encoded (nested deeper than the decoder recurses, stored before the SQL limits) is
    # dead-lettered alone instead of failing the whole round.
    claimed = db.rows_json_text(
        conn,
        "cortex.claim_outbox",
        p_worker=worker_id,
        p_limit=batch,
        p_lease_seconds=config.lease_for(batch),
        p_monitor_url=config.monitor_url or None,
        p_monitor_secret=config.monitor_secret,
    )
    stats = DeliveryStats(claimed=len(claimed))
    if not claimed:
        return stats
    messages, undeliverable = _decode(claimed)
    if undeliverable:
        _dead_letter(conn, worker_id, undeliverable, stats)
    with _resources(config, client, executor) as (http, pool):
        outcomes = list(pool.map(lambda m: _post(http, m), messages))
    done = [(m, o) for m, o in zip(messages, outcomes, strict=True) if o.ok]
    failed = [(m, o) for m, o in zip(messages, outcomes, strict=True) if not o.ok]
    if done:
        db.call(
            conn,
            "cortex.mark_delivered",
            p_tenant_ids=db.typed([m["tenant_id"] for m, _ in done], "uuid[]"),
            p_ids=db.typed([m["id"] for m, _ in done], "bigint[]"),
            p_status_codes=db.typed([o.status_code for _, o in done], "int[]"),
        )
        stats.delivered = len(done)
    if failed:
        rows = db.rows(
            conn,
            "cortex.mark_failed",
            p_worker=worker_id,
            p_tenant_ids=db.typed([m["tenant_id"] for m, _ in failed], "uuid[]"),
            p_ids=db.typed([m["id"] for m, _ in failed], "bigint[]"),
            p_status_codes=db.typed([o.status_code for _, o in failed], "int[]"),
            p_errors=db.typed([o.error for _, o in failed], "text[]"),
            p_base_seconds=config.backoff_base_seconds,
            p_max_delay_seconds=config.backoff_max_seconds,
        )
        status = {(str(r["tenant_id"]), r["id"]): r["status"] for r in rows}
        for m, o in failed:
            outcome = status.get((str(m["tenant_id"]), m["id"]), "lost")
            if outcome == "dead":
                stats.dead += 1
            elif outcome == "pending":
                stats.retrying += 1
            else:
                stats.lost += 1
            level = logging.WARNING if outcome == "dead" else logging.INFO
            log.log(
                level,
                "webhook id=%s event=%s recipient=%s attempt=%s/%s outcome=%s error=%s",
                m["id"],
                m["event"],
                m["recipient"],
                m["attempts"],
                m["max_attempts"],
                "retry" if outcome == "pending" else outcome,
                o.error,
            )
    stats.seconds = time.monotonic() - started
    return stats


def _decode(claimed: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], str]]]:
    """The claimed messages with their payload decoded, and those that cannot be sent with why."""
    messages: list[dict[str, Any]] = []
    undeliverable: list[tuple[dict[str, Any], str]] = []
    for m in claimed:
        try:
            decoded = {**m, "payload": json.loads(m["payload"])}
            message_body(decoded)
        except RecursionError:
            undeliverable.append((m, "payload is nested too deeply to encode; not retried"))
        except (TypeError, ValueError) as exc:
            undeliverable.append((m, f"payload cannot be encoded ({exc}); not retried"[:_MAX_ERROR_CHARS]))
        else:
            messages.append(decoded)
    return messages, undeliverable


def _dead_letter(
    conn: psycopg.Connection[Any], worker_id: str, undeliverable: list[tuple[dict[str, Any], str]], stats: DeliveryStats
) -> None:
    """Dead-letters at once what no retry can deliver (with an alert, as any dead letter)."""
    rows = db.rows(
        conn,
        "cortex.mark_undeliverable",
        p_worker=worker_id,
        p_tenant_ids=db.typed([m["tenant_id"] for m, _ in undeliverable], "uuid[]"),
        p_ids=db.typed([m["id"] for m, _ in undeliverable], "bigint[]"),
        p_errors=db.typed([error for _, error in undeliverable], "text[]"),
    )
    dead = {(str(r["tenant_id"]), r["id"]) for r in rows}
    for m, error in undeliverable:
        if (str(m["tenant_id"]), m["id"]) in dead:
            stats.dead += 1
        else:
            stats.lost += 1
        log.warning(
            "webhook id=%s event=%s recipient=%s outcome=dead error=%s", m["id"], m["event"], m["recipient"], error
        )


def _due(conn: psycopg.Connection[Any]) -> bool:
    return bool(db.call(conn, "cortex.outbox_due"))


# --- the loop -----------------------------------------------------------------------------------


def default_worker_id() -> str:
    """`webhooks@hostname:pid`, the name in cortex.outbox.locked_by unless one is given."""
    return f"webhooks@{socket.gethostname()}:{os.getpid()}"


def _serve(
    dsn: str, worker_id: str, config: DeliveryConfig, once: bool, stop: threading.Event, total: DeliveryStats
) -> None:
    app = f"cortex-webhooks {worker_id}"[:63]
    with (
        psycopg.connect(dsn, autocommit=True, application_name=app) as conn,
        _client(config) as client,
        ThreadPoolExecutor(config.concurrency, "webhook") as pool,
    ):
        # LISTEN before the first claim, so a message queued in between still wakes us.
        conn.execute(f"listen {LISTEN_CHANNEL}")
        log.info(
            "webhook delivery %s started (batch %d, concurrency %d, timeout %.1fs)",
            worker_id,
            config.batch,
            config.concurrency,
            config.timeout_seconds,
        )
        idle_due = 0
        while not stop.is_set():
            stats = deliver_batch(conn, worker_id, config.batch, config=config, client=client, executor=pool)
            total.add(stats)
            if stats.claimed:
                idle_due = 0
                continue  # a backlog: claim the next round at once
            if idle_due < _MAX_QUICK_LOOKS and _due(conn):
                # Due but not claimed: all skipped (no endpoint), or locked by another session for
                # a moment. Look again shortly rather than spin; after a while, as when idle.
                idle_due += 1
                stop.wait(0.05)
                continue
            if once:
                return
            idle_due = 0
            wait_for_notify(conn, get_settings().worker_poll_seconds, stop)


def run_delivery(
    worker_id: str | None = None,
    *,
    once: bool = False,
    stop: threading.Event | None = None,
    config: DeliveryConfig | None = None,
    dsn: str | None = None,
) -> DeliveryStats:
    """Delivers outbox messages until `stop` is set or SIGTERM/SIGINT arrives; returns the totals.

    Idle, it LISTENs on cortex_outbox and wakes on a NOTIFY (or every settings.worker_poll_seconds,
    which also picks up retries coming due). With `once`, it returns when nothing is due. A lost
    database connection is retried with backoff (up to 30 s); with `once` it is raised instead.
    """
    worker_id = worker_id or default_worker_id()
    stop = stop or threading.Event()
    config = config or DeliveryConfig.from_env()
    dsn = dsn or get_settings().database_url
    if not config.monitor_url:
        log.info("HELIOS_WEBHOOK_URL is not set: monitor messages without an endpoint are skipped")
    elif not config.monitor_secret:
        log.warning("HELIOS_WEBHOOK_SECRET is not set: messages to HELIOS_WEBHOOK_URL go unsigned")
    total = DeliveryStats()
    backoff = 1.0
    with signals_set(stop, log, "the round in flight"):
        while not stop.is_set():
            try:
                _serve(dsn, worker_id, config, once, stop, total)
                break
            except psycopg.OperationalError as exc:
                if once:
                    raise
                log.error("database unavailable (%s); reconnecting in %.0f s", str(exc).strip(), backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except Exception:
                # Nothing a round meets may end delivery for every tenant: log, pause, go on.
                if once:
                    raise
                log.exception("webhook delivery round failed; going on in %.0f s", backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
    log.info(
        "webhook delivery %s stopped: %d delivered, %d retrying, %d dead",
        worker_id,
        total.delivered,
        total.retrying,
        total.dead,
    )
    return total


def start_in_background(stop: threading.Event, worker_id: str | None = None, *, once: bool = False) -> threading.Thread:
    """Runs `run_delivery` in a daemon thread that ends when `stop` is set (how `cortex worker`
    delivers webhooks beside its jobs); join the thread after setting `stop`."""
    thread = threading.Thread(
        target=run_delivery,
        kwargs={"worker_id": worker_id, "once": once, "stop": stop},
        name="webhook-delivery",
        daemon=True,
    )
    thread.start()
    return thread


# --- dead letters -------------------------------------------------------------------------------

_DEAD_COLUMNS = (
    "id", "tenant_id", "event", "recipient", "idempotency_key", "attempts", "max_attempts", "last_status_code",
    "last_error", "created_at", "updated_at",
)  # fmt: skip


def list_dead_letters(
    conn: psycopg.Connection[Any], tenant_id: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """Dead-lettered messages, oldest first (all tenants, or one), with their last error."""
    return [
        {k: r[k] for k in _DEAD_COLUMNS}
        for r in db.rows(conn, "cortex.list_dead_letters", p_tenant_id=tenant_id, p_limit=limit)
    ]


def replay_dead_letters(
    conn: psycopg.Connection[Any],
    ids: Sequence[int] | None = None,
    *,
    tenant_id: str | None = None,
    all_dead: bool = False,
) -> int:
    """Queues dead letters again with a fresh set of attempts: the given `ids`, or with
    `all_dead=True` every one (of `tenant_id` when given). Returns how many were requeued."""
    if not ids and not all_dead:
        raise ValueError("name the dead letters to replay, or pass all_dead=True")
    if ids and all_dead:
        raise ValueError("give either ids or all_dead=True, not both")
    replayed = db.call(
        conn,
        "cortex.replay_dead_letters",
        p_ids=db.typed(list(ids), "bigint[]") if ids else None,
        p_tenant_id=tenant_id,
    )
    return int(replayed or 0)


# --- command line -------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m cortex.notifications.delivery [--once] [--batch N] [--worker-id ID] [--lease S] [--timeout S]`."""
    parser = argparse.ArgumentParser(
        prog="python -m cortex.notifications.delivery", description="Delivers Cortex's outbox as signed webhooks."
    )
    parser.add_argument("--once", action="store_true", help="deliver what is due now, then exit")
    parser.add_argument("--batch", type=int, default=None, help="messages claimed per round (default 100)")
    parser.add_argument("--worker-id", default=None, help="name in cortex.outbox.locked_by")
    parser.add_argument("--lease", type=int, default=None, help="lease on claimed messages, seconds")
    parser.add_argument("--timeout", type=float, default=None, help="per-request timeout, seconds")
    parser.add_argument("--concurrency", type=int, default=None, help="requests in flight at once")
    parser.add_argument("--log-level", default=os.environ.get("CORTEX_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    config = DeliveryConfig.from_env()
    overrides: dict[str, Any] = {
        "batch": args.batch,
        "lease_seconds": args.lease,
        "timeout_seconds": args.timeout,
        "concurrency": args.concurrency,
    }
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    if config.batch < 1 or config.concurrency < 1 or config.timeout_seconds <= 0:
        parser.error("--batch and --concurrency must be at least 1, --timeout positive")
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        run_delivery(args.worker_id, once=args.once, config=config)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
