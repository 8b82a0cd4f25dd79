"""The background worker against a real database, with Claude played by FakeAnthropic over HTTP.

Covers the queue's promises end to end: a PostgREST-logged interaction gets summarised, a
significant one regenerates context, failures are retried five minutes later and parked with an
alert after the third, two workers never share a job, a killed worker loses nothing, and SIGTERM
lets the current job finish before the process exits cleanly.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from cortex.config import get_settings
from cortex.db import call
from cortex.queue import worker
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import ANALYSIS_ANSWER, CONTEXT_ANSWER, FakeAnthropic

ROOT = Path(__file__).resolve().parent.parent
EMAIL = (
    "Hi Luna, order #1234 arrived two weeks late and half the lids are cracked. "
    "Please tell me when the replacement ships."
)

Admin = psycopg.Connection[dict[str, Any]]


@pytest.fixture
def fake_llm(dsn: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """A local Messages API; the settings point Claude at it (after `dsn` cleared the key)."""
    with FakeAnthropic() as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        # The queue retries; the SDK's own retries would only slow the failure tests down.
        monkeypatch.setenv("CORTEX_LLM_MAX_RETRIES", "0")
        get_settings.cache_clear()
        yield fake
    get_settings.cache_clear()


@pytest.fixture
def queue_conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """The worker's queue connection: autocommit, as the database owner."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


def log_pending(as_agent: AsAgent, tenant: Tenant, contact_id: str, **fields: Any) -> dict[str, Any]:
    """Logs an interaction the PostgREST way, without a summary, so the worker must summarise it."""
    with as_agent(tenant, "luna") as conn:
        row: dict[str, Any] = call(
            conn,
            "log_interaction",
            contact_id=contact_id,
            type=fields.pop("type", "email_received"),
            **fields,
        )
    assert row["analysis_status"] == "pending"
    return row


def job_of(admin: Admin, kind: str) -> dict[str, Any]:
    """The single job of a kind, with its timing as seconds."""
    rows = admin.execute(
        "select *, extract(epoch from run_at - updated_at)::float8 as delay_s,"
        " extract(epoch from run_at - now())::float8 as due_in_s from cortex.jobs where kind = %s",
        (kind,),
    ).fetchall()
    assert len(rows) == 1, rows
    return rows[0]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Polls `predicate` until it returns something truthy, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class WorkerProcess:
    """`python -m cortex.queue.worker` as a child process, its log lines collected by a thread."""

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: queue.Queue[str] = queue.Queue()
        self.log: list[str] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cortex.queue.worker", "--worker-id", "child"],
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for_log(self, text: str, timeout: float) -> str:
        """The first log line containing `text` (raising after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log:
                if text in line:
                    return line
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (self.proc.poll() is not None and self.lines.empty()):
                raise AssertionError(f"worker never logged {text!r}; log so far: {self.log}")
            with contextlib.suppress(queue.Empty):
                self.log.append(self.lines.get(timeout=min(remaining, 0.2)))

    def close(self) -> None:
        """Kills the child if a test left it running, and reaps it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def spawn_worker() -> Iterator[Callable[[dict[str, str]], WorkerProcess]]:
    """Starts worker subprocesses; every one is reaped at the end of the test."""
    started: list[WorkerProcess] = []

    def spawn(env: dict[str, str]) -> WorkerProcess:
        w = WorkerProcess(env)
        started.append(w)
        return w

    yield spawn
    for w in started:
        w.close()


# --- the jobs the worker runs -------------------------------------------------------------------


def test_an_interaction_logged_through_postgrest_is_summarised_and_metered_by_the_worker(
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Admin,
    fake_llm: FakeAnthropic,
    queue_conn: psycopg.Connection[Any],
) -> None:
    row = log_pending(as_agent, tenant, contact["id"], subject="Late order", raw_content=EMAIL)

    assert worker.run_once(queue_conn, "w1") == 1

    analysed = admin.execute(
        "select summary, key_points, sentiment, intent, analysis_status, analysis_model, token_count"
        " from cortex.interactions where id = %s",
        (row["id"],),
    ).fetchone()
    assert analysed is not None
    assert analysed["summary"] == ANALYSIS_ANSWER["summary"]
    assert analysed["key_points"] == ANALYSIS_ANSWER["key_points"]
    assert (analysed["sentiment"], analysed["intent"]) == ("negative", "complaint")
    assert analysed["analysis_status"] == "done" and analysed["analysis_model"] == "claude-haiku-4-5"
    assert analysed["token_count"] > 0
    usage = admin.execute(
        "select agent, model, operation, input_tokens > 0 as counted from cortex.token_usage where interaction_id = %s",
        (row["id"],),
    ).fetchall()
    assert usage == [{"agent": "luna", "model": "claude-haiku-4-5", "operation": "summarize", "counted": True}]
    job = job_of(admin, "summarise_interaction")
    assert (job["status"], job["attempts"], job["locked_by"]) == ("done", 1, None)
    assert job["result"]["context_refresh_triggered"] is True
    assert fake_llm.requests[0]["model"] == "claude-haiku-4-5"


def test_a_significant_interaction_regenerates_context_through_a_generate_context_job(
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Admin,
    fake_llm: FakeAnthropic,
    queue_conn: psycopg.Connection[Any],
) -> None:
    log_pending(as_agent, tenant, contact["id"], subject="Late order", raw_content=EMAIL)
    assert worker.run_once(queue_conn, "w1") == 1  # the summary: negative complaint, so significant

    queued = job_of(admin, "generate_context")
    assert queued["status"] == "queued"
    assert queued["payload"] == {"contact_id": contact["id"], "reason": "interaction"}
    assert worker.run_once(queue_conn, "w1") == 1

    with as_agent(tenant, "mia") as conn:
        ctx = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert ctx["is_stale"] is False and ctx["refresh_queued"] is False
    assert ctx["context"]["summary"] == CONTEXT_ANSWER["summary"]
    assert ctx["context"]["current_status"] == CONTEXT_ANSWER["current_status"]
    assert job_of(admin, "generate_context")["status"] == "done"
    usage = admin.execute(
        "select agent, model, contact_id::text as contact from cortex.token_usage where operation = 'generate_context'"
    ).fetchall()
    assert usage == [{"agent": "system", "model": "claude-haiku-4-5", "contact": contact["id"]}]


def test_failed_context_generation_serves_the_cached_context_stale_retries_in_5_minutes_then_parks(
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Admin,
    fake_llm: FakeAnthropic,
    queue_conn: psycopg.Connection[Any],
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "refresh_context", contact_id=contact["id"])
    assert worker.run_once(queue_conn, "w1") == 1  # a good context is cached first

    fake_llm.always_fail = True
    with as_agent(tenant, "luna") as conn:
        call(conn, "refresh_context", contact_id=contact["id"])
    queued = admin.execute("select id from cortex.jobs where status = 'queued'").fetchone()
    assert queued is not None
    job_id = queued["id"]

    def attempt() -> dict[str, Any]:
        assert worker.run_once(queue_conn, "w1") == 1
        job = admin.execute(
            "select *, run_at - updated_at as delay from cortex.jobs where id = %s", (job_id,)
        ).fetchone()
        assert job is not None
        return job

    first = attempt()
    assert (first["status"], first["attempts"]) == ("queued", 1)
    assert first["delay"] == timedelta(minutes=5)
    assert "HTTP 529" in first["last_error"] and "LLMError" in first["last_error"]
    with as_agent(tenant, "mia") as conn:
        ctx = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert ctx["is_stale"] is True
    assert ctx["context"]["summary"] == CONTEXT_ANSWER["summary"]
    assert ctx["refresh_queued"] is False  # the retry is already queued; no second job
    failures = admin.execute(
        "select failure_count, last_error from cortex.contact_context where contact_id = %s", (contact["id"],)
    ).fetchone()
    assert failures is not None and failures["failure_count"] == 1 and "529" in failures["last_error"]

    admin.execute("update cortex.jobs set run_at = now() where id = %s", (job_id,))
    second = attempt()
    assert (second["status"], second["attempts"], second["delay"]) == ("queued", 2, timedelta(minutes=10))

    admin.execute("update cortex.jobs set run_at = now() where id = %s", (job_id,))
    third = attempt()
    assert (third["status"], third["attempts"]) == ("parked", 3)
    assert "HTTP 529" in third["last_error"] and third["finished_at"] is not None
    alerts = admin.execute("select kind, severity, message, details from cortex.alerts").fetchall()
    assert len(alerts) == 1
    assert (alerts[0]["kind"], alerts[0]["severity"]) == ("job_parked", "critical")
    assert alerts[0]["details"]["job_id"] == job_id and alerts[0]["details"]["kind"] == "generate_context"
    assert "failed 3 times" in alerts[0]["message"]
    assert len(fake_llm.requests) == 4  # one good generation, three failed ones, no hidden retries


def test_a_job_of_unknown_kind_is_parked_after_max_attempts_with_an_alert(
    tenant: Tenant, admin: Admin, queue_conn: psycopg.Connection[Any]
) -> None:
    admin.execute(
        "select cortex.enqueue_job(p_tenant_id => %s, p_kind => 'mystery_chore', p_payload => '{\"x\": 1}',"
        " p_retry_base_seconds => 0)",
        (tenant.id,),
    )
    for attempt in range(1, 5):
        assert worker.run_once(queue_conn, "w1") == 1
        job = job_of(admin, "mystery_chore")
        assert (job["status"], job["attempts"]) == ("queued", attempt)
        assert "UnknownJobKind: no handler for job kind 'mystery_chore'" in job["last_error"]
    assert worker.run_once(queue_conn, "w1") == 1
    job = job_of(admin, "mystery_chore")
    assert (job["status"], job["attempts"]) == ("parked", 5)
    assert worker.run_once(queue_conn, "w1") == 0  # parked jobs are never claimed
    alert = admin.execute("select kind, details from cortex.alerts where tenant_id = %s", (tenant.id,)).fetchall()
    assert [(a["kind"], a["details"]["kind"], a["details"]["payload"]) for a in alert] == [
        ("job_parked", "mystery_chore", {"x": 1})
    ]


# --- leases and concurrency --------------------------------------------------------------------


def test_two_workers_claiming_at_once_run_every_job_exactly_once(
    dsn: str, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Admin
) -> None:
    # The local summariser (no key set): the race is between workers, not with a model.
    ids = [
        log_pending(as_agent, tenant, contact["id"], type="note", raw_content=f"Call note {n}: all fine.")["id"]
        for n in range(24)
    ]
    start = threading.Barrier(2)
    ran: dict[str, int] = {}
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                start.wait(timeout=10)
                total = 0
                while n := worker.run_once(conn, name, batch=3):
                    total += n
                ran[name] = total
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(name,)) for name in ("w1", "w2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    jobs = admin.execute("select kind, status, attempts from cortex.jobs").fetchall()
    assert len(jobs) >= 24
    assert {(j["status"], j["attempts"]) for j in jobs} == {("done", 1)}
    assert sum(ran.values()) == len(jobs)
    assert ran["w1"] > 0 and ran["w2"] > 0
    per_interaction = admin.execute(
        "select interaction_id::text as iid, count(*) as n from cortex.token_usage"
        " where operation = 'summarize' group by 1"
    ).fetchall()
    assert {r["iid"]: r["n"] for r in per_interaction} == dict.fromkeys(ids, 1)


def test_a_long_job_keeps_its_lease_so_another_worker_cannot_take_it(
    dsn: str,
    tenant: Tenant,
    admin: Admin,
    queue_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stolen: list[int] = []
    stop_rival = threading.Event()

    def rival() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop_rival.wait(0.1):
                stolen.extend(r[0] for r in conn.execute("select id from cortex.claim_jobs('rival', 10, 1)"))

    def slow(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        time.sleep(2.5)  # well past the 1 s lease
        return {"slept": 2.5}

    monkeypatch.setitem(worker.HANDLERS, "slow_chore", slow)
    admin.execute("select cortex.enqueue_job(%s, 'slow_chore')", (tenant.id,))
    thread = threading.Thread(target=rival)
    thread.start()
    try:
        assert worker.run_once(queue_conn, "w1", lease_seconds=1) == 1
    finally:
        stop_rival.set()
        thread.join(timeout=10)
    assert stolen == []
    job = job_of(admin, "slow_chore")
    assert (job["status"], job["attempts"], job["result"]) == ("done", 1, {"slept": 2.5})


def test_a_worker_killed_mid_job_loses_nothing_and_the_job_runs_again_once(
    dsn: str,
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Admin,
    fake_llm: FakeAnthropic,
    queue_conn: psycopg.Connection[Any],
    spawn_worker: Callable[[dict[str, str]], WorkerProcess],
) -> None:
    row = log_pending(as_agent, tenant, contact["id"], subject="Late order", raw_content=EMAIL)
    fake_llm.delay_seconds = 30  # the child will be stuck inside the model call
    child = spawn_worker(
        {
            "DATABASE_URL": dsn,
            "CORTEX_JOB_LEASE_SECONDS": "2",
            "ANTHROPIC_API_KEY": "test",
            "ANTHROPIC_BASE_URL": fake_llm.base_url,
        }
    )
    wait_until(lambda: fake_llm.requests, 20, "the child worker to call the model")
    job = job_of(admin, "summarise_interaction")
    assert (job["status"], job["locked_by"], job["attempts"]) == ("running", "child", 1)

    child.proc.send_signal(signal.SIGKILL)
    assert child.proc.wait(timeout=10) == -signal.SIGKILL
    fake_llm.delay_seconds = 0
    # Nothing can be claimed until the dead worker's 2 s lease runs out; then this worker takes it.
    wait_until(lambda: worker.run_once(queue_conn, "rescuer"), 10, "the expired lease to be claimable")

    job = job_of(admin, "summarise_interaction")
    assert (job["status"], job["attempts"], job["locked_by"]) == ("done", 2, None)
    summarised = admin.execute(
        "select summary, analysis_status from cortex.interactions where id = %s", (row["id"],)
    ).fetchone()
    assert summarised == {"summary": ANALYSIS_ANSWER["summary"], "analysis_status": "done"}
    n = admin.execute(
        "select count(*) as n from cortex.token_usage where interaction_id = %s and operation = 'summarize'",
        (row["id"],),
    ).fetchone()
    assert n == {"n": 1}


def test_a_stop_between_jobs_hands_the_unstarted_jobs_back_without_spending_their_attempts(
    tenant: Tenant, admin: Admin, queue_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = threading.Event()
    calls: list[dict[str, Any]] = []

    def chore(conn: psycopg.Connection[Any], tenant_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        calls.append(payload)
        stop.set()  # as SIGTERM would, while this job runs
        return {}

    monkeypatch.setitem(worker.HANDLERS, "probe_chore", chore)
    for n in range(3):
        admin.execute("select cortex.enqueue_job(%s, 'probe_chore', %s)", (tenant.id, Jsonb({"n": n})))

    assert worker.run_once(queue_conn, "w1", batch=10, stop=stop) == 1
    assert len(calls) == 1
    jobs = admin.execute("select status, attempts, locked_by from cortex.jobs order by status").fetchall()
    assert jobs == [
        {"status": "done", "attempts": 1, "locked_by": None},
        {"status": "queued", "attempts": 0, "locked_by": None},
        {"status": "queued", "attempts": 0, "locked_by": None},
    ]
    assert worker.run_once(queue_conn, "w2") == 2  # at once, not after a lease runs out


# --- the loop and the process ------------------------------------------------------------------


def test_run_once_mode_drains_the_queue_including_jobs_that_jobs_queue(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Admin
) -> None:
    # A ticket is significant whatever its sentiment: its summary queues a context refresh.
    log_pending(as_agent, tenant, contact["id"], type="ticket_opened", raw_content=EMAIL)
    assert worker.run("solo", once=True) == 2
    jobs = admin.execute("select kind, status, attempts from cortex.jobs order by id").fetchall()
    assert jobs == [
        {"kind": "summarise_interaction", "status": "done", "attempts": 1},
        {"kind": "generate_context", "status": "done", "attempts": 1},
    ]
    assert worker.run("solo", once=True) == 0


def test_an_idle_worker_starts_a_new_job_on_notify_not_at_the_next_poll_and_stops_when_asked(
    dsn: str,
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CORTEX_WORKER_POLL", "60")  # only a NOTIFY can wake it within this test
    get_settings.cache_clear()
    stop = threading.Event()
    ran: list[int] = []
    thread = threading.Thread(target=lambda: ran.append(worker.run("idler", stop=stop)))
    thread.start()
    try:
        wait_until(
            lambda: admin.execute(
                "select 1 from pg_stat_activity where application_name = 'cortex-worker queue idler'"
                " and state = 'idle' and query like '%%claim_jobs%%'"
            ).fetchone(),
            20,
            "the worker to find the queue empty",
        )
        log_pending(as_agent, tenant, contact["id"], type="note", raw_content="Call note: all fine.")
        wait_until(lambda: job_of(admin, "summarise_interaction")["status"] == "done", 10, "the job to be run")
    finally:
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()
    done = admin.execute("select count(*) as n from cortex.jobs where status = 'done'").fetchone()
    assert done is not None and ran == [done["n"]]


def test_sigterm_stops_an_idle_worker_process_cleanly(
    dsn: str, spawn_worker: Callable[[dict[str, str]], WorkerProcess]
) -> None:
    child = spawn_worker({"DATABASE_URL": dsn})
    child.wait_for_log("worker child started", timeout=20)
    child.proc.send_signal(signal.SIGTERM)
    assert child.proc.wait(timeout=5) == 0
    child.wait_for_log("stopped after 0 job(s)", timeout=5)


def test_sigterm_lets_the_running_job_finish_then_the_worker_exits_without_starting_another(
    dsn: str,
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    admin: Admin,
    fake_llm: FakeAnthropic,
    spawn_worker: Callable[[dict[str, str]], WorkerProcess],
) -> None:
    fake_llm.delay_seconds = 1.5
    child = spawn_worker({"DATABASE_URL": dsn, "ANTHROPIC_API_KEY": "test", "ANTHROPIC_BASE_URL": fake_llm.base_url})
    child.wait_for_log("worker child started", timeout=20)
    # Queued while the child idles: the NOTIFY wakes it at once.
    row = log_pending(as_agent, tenant, contact["id"], subject="Late order", raw_content=EMAIL)
    wait_until(lambda: fake_llm.requests, 10, "the child worker to call the model")
    child.proc.send_signal(signal.SIGTERM)

    assert child.proc.wait(timeout=10) == 0
    line = child.wait_for_log("kind=summarise_interaction", timeout=5)
    assert "outcome=done" in line and f"tenant={tenant.id}" in line
    assert job_of(admin, "summarise_interaction")["status"] == "done"
    status = admin.execute("select analysis_status from cortex.interactions where id = %s", (row["id"],)).fetchone()
    assert status == {"analysis_status": "done"}
    # The summary made the contact's context stale; the stopping worker left that job queued.
    assert job_of(admin, "generate_context")["status"] == "queued"
