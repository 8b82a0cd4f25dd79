"""The scheduled jobs, called directly with a frozen clock (p_now), as pg_cron would call them.

Each job does its work once per window and tenant: a second run in the same window does nothing.
Jobs only enqueue (generate_context jobs, outbox notifications); the worker does the rest. One
test checks the real schedule in cron.job of the database pg_cron serves (cron.database_name).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from cortex.db import call
from cortex.migrate import files_digest, migrate
from tests.conftest import ADMIN_DSN, AsAgent, Tenant, TenantFactory, dsn_for

Admin = psycopg.Connection[dict[str, Any]]

EXPECTED_SCHEDULE = {
    "cortex-nightly-context-refresh": ("0 * * * *", "select cortex.job_nightly_context_refresh()"),
    "cortex-stale-context-sweep": ("0 */6 * * *", "select cortex.job_stale_context_sweep()"),
    "cortex-daily-usage-report": ("0 * * * *", "select cortex.job_daily_usage_report()"),
    "cortex-handoff-reminders": ("0 */2 * * *", "select cortex.job_handoff_reminders()"),
    "cortex-cleanup-cron-history": ("30 3 * * *", "select cortex.job_cleanup_cron_history()"),
    "cortex-retention": ("45 3 * * *", "select cortex.job_retention()"),
    "cortex-fold-memory-access": ("* * * * *", "select cortex.fold_memory_access()"),
    "cortex-fold-graph-changes": ("* * * * *", "select cortex.fold_graph_changes()"),
    "cortex-precompute-briefings": ("*/5 * * * *", "select cortex.job_precompute_briefings()"),
    "cortex-refresh-memory-lexicons": ("17 * * * *", "select cortex.refresh_memory_lexicons()"),
    "cortex-nightly-consolidation": ("15 * * * *", "select cortex.job_consolidation()"),
}


def ts(text: str) -> datetime:
    """A timestamp with time zone, from ISO text."""
    return datetime.fromisoformat(text)


def run(admin: Admin, job: str, now: datetime) -> dict[str, Any]:
    """Runs a job function with a frozen clock and returns its result."""
    row = admin.execute(f"select cortex.{job}(p_now => %s) as r", (now,)).fetchone()
    assert row is not None
    result: dict[str, Any] = row["r"]
    return result


def new_contact(as_agent: AsAgent, tenant: Tenant, email: str) -> str:
    """A contact created through the API; returns its id."""
    with as_agent(tenant, "luna") as conn:
        created: dict[str, Any] = call(conn, "upsert_contact", email=email, name=email.split("@")[0].title())
    return str(created["id"])


def set_contact(admin: Admin, contact_id: str, last_touch_at: datetime | None, interactions: int = 3) -> None:
    """Sets when a contact was last touched and how many interactions it has."""
    admin.execute(
        "update cortex.contacts set last_touch_at = %s, interaction_count = %s where id = %s",
        (last_touch_at, interactions, contact_id),
    )


def set_context(
    admin: Admin, tenant: Tenant, contact_id: str, generated_at: datetime, interactions_at_generation: int = 3
) -> None:
    """Gives a contact a working context generated at `generated_at`."""
    admin.execute(
        "insert into cortex.contact_context (tenant_id, contact_id, summary, generated_at,"
        " interaction_count_at_generation) values (%s, %s, 'Summary.', %s, %s)",
        (tenant.id, contact_id, generated_at, interactions_at_generation),
    )


def queued_refreshes(admin: Admin, tenant: Tenant) -> dict[str, str]:
    """contact id -> reason of the queued generate_context jobs of a tenant."""
    rows = admin.execute(
        "select payload ->> 'contact_id' as contact, payload ->> 'reason' as reason from cortex.jobs"
        " where tenant_id = %s and kind = 'generate_context' and status = 'queued'",
        (tenant.id,),
    ).fetchall()
    return {r["contact"]: r["reason"] for r in rows}


def outbox(admin: Admin, tenant: Tenant, event: str) -> list[dict[str, Any]]:
    """A tenant's outbox messages of one event, oldest first."""
    return admin.execute(
        "select recipient, payload, idempotency_key from cortex.outbox where tenant_id = %s and event = %s order by id",
        (tenant.id, event),
    ).fetchall()


# --- nightly context refresh ----------------------------------------------------------------------


def test_nightly_refresh_queues_stale_contexts_of_recently_touched_contacts_at_2am_local_once(
    admin: Admin, make_tenant: TenantFactory, as_agent: AsAgent
) -> None:
    ny = make_tenant("nyc", time_zone="America/New_York")
    tokyo = make_tenant("tokyo", time_zone="Asia/Tokyo")
    now = ts("2026-11-23T07:30:00+00:00")  # 02:30 in New York, 16:30 in Tokyo
    changed = new_contact(as_agent, ny, "changed@acme.com")  # context older than the log
    old = new_contact(as_agent, ny, "old@acme.com")  # context generated 30 h ago
    fresh = new_contact(as_agent, ny, "fresh@acme.com")  # up to date
    never = new_contact(as_agent, ny, "never@acme.com")  # no context at all
    dormant = new_contact(as_agent, ny, "dormant@acme.com")  # stale, but untouched for 40 days
    for c in (changed, old, fresh, never):
        set_contact(admin, c, now - timedelta(days=3))
    set_contact(admin, dormant, now - timedelta(days=40))
    set_context(admin, ny, changed, now - timedelta(hours=2), interactions_at_generation=2)
    set_context(admin, ny, old, now - timedelta(hours=30))
    set_context(admin, ny, fresh, now - timedelta(hours=2))
    set_context(admin, ny, dormant, now - timedelta(days=41))
    in_tokyo = new_contact(as_agent, tokyo, "in@tokyo.jp")
    set_contact(admin, in_tokyo, now - timedelta(days=1))

    assert run(admin, "job_nightly_context_refresh", now - timedelta(hours=1)) == {"tenants": 0, "queued": 0}
    assert run(admin, "job_nightly_context_refresh", now) == {"tenants": 1, "queued": 3}

    assert queued_refreshes(admin, ny) == {changed: "nightly_refresh", old: "nightly_refresh", never: "nightly_refresh"}
    assert queued_refreshes(admin, tokyo) == {}  # not 2 AM in Tokyo
    # The worker runs the jobs; a second run the same night (now, or an hour later) does nothing.
    admin.execute("update cortex.jobs set status = 'done'")
    assert run(admin, "job_nightly_context_refresh", now) == {"tenants": 0, "queued": 0}
    assert run(admin, "job_nightly_context_refresh", now + timedelta(hours=1)) == {"tenants": 0, "queued": 0}
    assert queued_refreshes(admin, ny) == {}
    window = admin.execute(
        "select window_start, result from cortex.schedule_runs where job = 'nightly_context_refresh'"
    ).fetchall()
    assert window == [{"window_start": ts("2026-11-23T07:00:00+00:00"), "result": {"queued": 3}}]
    # The next night is a new window.
    assert run(admin, "job_nightly_context_refresh", now + timedelta(days=1))["tenants"] == 1


def test_nightly_refresh_still_runs_on_the_night_daylight_saving_skips_2am(
    admin: Admin, make_tenant: TenantFactory, as_agent: AsAgent
) -> None:
    berlin = make_tenant("berlin", time_zone="Europe/Berlin")
    # 29 March 2026: Berlin's clocks go from 02:00 straight to 03:00. 01:00 UTC is 03:00 CEST.
    now = ts("2026-03-29T01:00:00+00:00")
    contact = new_contact(as_agent, berlin, "dst@acme.de")
    set_contact(admin, contact, now - timedelta(days=1))

    assert run(admin, "job_nightly_context_refresh", now) == {"tenants": 1, "queued": 1}
    assert run(admin, "job_nightly_context_refresh", now + timedelta(hours=1)) == {"tenants": 0, "queued": 0}


# --- stale-context sweep --------------------------------------------------------------------------


def test_stale_sweep_expires_inactive_and_queues_active_contexts_once_per_six_hours(
    admin: Admin, tenant: Tenant, as_agent: AsAgent
) -> None:
    now = ts("2026-11-23T12:10:00+00:00")
    inactive = new_contact(as_agent, tenant, "inactive@acme.com")
    active = new_contact(as_agent, tenant, "active@acme.com")
    recent = new_contact(as_agent, tenant, "recent@acme.com")
    set_contact(admin, inactive, now - timedelta(days=45))
    set_contact(admin, active, now - timedelta(days=2))
    set_contact(admin, recent, now - timedelta(days=2))
    set_context(admin, tenant, inactive, now - timedelta(days=8))
    set_context(admin, tenant, active, now - timedelta(days=8))
    set_context(admin, tenant, recent, now - timedelta(days=1))

    assert run(admin, "job_stale_context_sweep", now) == {"tenants": 1, "expired": 1, "queued": 1}

    contexts = {
        str(r["contact_id"]): r
        for r in admin.execute("select contact_id, expires_at, stale_since from cortex.contact_context").fetchall()
    }
    assert contexts[inactive]["expires_at"] == now and contexts[inactive]["stale_since"] == now
    assert contexts[active]["expires_at"] is None and contexts[recent]["expires_at"] is None
    assert queued_refreshes(admin, tenant) == {active: "stale_sweep"}  # expired ones are not regenerated
    # Again within the same 6-hour slot (12:00-18:00 UTC): nothing, even after the worker ran.
    admin.execute("update cortex.jobs set status = 'done'")
    assert run(admin, "job_stale_context_sweep", now + timedelta(hours=5)) == {"tenants": 0, "expired": 0, "queued": 0}
    assert queued_refreshes(admin, tenant) == {}
    # The next slot runs, and finds the expired context already expired.
    assert run(admin, "job_stale_context_sweep", now + timedelta(hours=6))["expired"] == 0


# --- daily usage report ---------------------------------------------------------------------------


def add_usage(
    admin: Admin, tenant: Tenant, agent: str, at: datetime, tokens: tuple[int, int], refused: bool = False
) -> None:
    """A model call recorded at `at` (as the worker records them)."""
    admin.execute(
        "insert into cortex.token_usage (tenant_id, agent, model, operation, input_tokens, output_tokens,"
        " cost_usd, budget_exceeded, created_at) values (%s, %s, 'claude-haiku-4-5', 'summarize', %s, %s, %s, %s, %s)",
        (tenant.id, agent, tokens[0], tokens[1], (tokens[0] + 5 * tokens[1]) / 1e6, refused, at),
    )


def test_daily_usage_report_goes_to_the_monitor_once_at_the_tenants_midnight(
    admin: Admin, make_tenant: TenantFactory
) -> None:
    tokyo = make_tenant("tokyo", time_zone="Asia/Tokyo")
    utc = make_tenant("utc")
    now = ts("2026-11-22T15:30:00+00:00")  # 00:30 on 23 November in Tokyo: report 22 November
    add_usage(admin, tokyo, "luna", ts("2026-11-21T15:00:00+00:00"), (1000, 200))  # 00:00 on the 22nd, Tokyo
    add_usage(admin, tokyo, "luna", ts("2026-11-22T14:59:00+00:00"), (500, 100))  # 23:59 on the 22nd
    add_usage(admin, tokyo, "mia", ts("2026-11-22T03:00:00+00:00"), (300, 0))
    add_usage(admin, tokyo, "mia", ts("2026-11-22T04:00:00+00:00"), (9000, 0), refused=True)
    add_usage(admin, tokyo, "luna", ts("2026-11-21T14:59:00+00:00"), (7777, 0))  # the 21st: not included
    add_usage(admin, tokyo, "luna", ts("2026-11-22T15:00:00+00:00"), (8888, 0))  # the 23rd: not included

    assert run(admin, "job_daily_usage_report", now - timedelta(hours=1)) == {"reports": 0}  # 23:30 in Tokyo
    assert run(admin, "job_daily_usage_report", now) == {"reports": 1}

    [report] = outbox(admin, tokyo, "usage.daily_report")
    assert report["recipient"] == "monitor"
    assert report["idempotency_key"] == "usage.daily_report:2026-11-22"
    data = report["payload"]
    assert (data["date"], data["time_zone"]) == ("2026-11-22", "Asia/Tokyo")
    assert data["totals"] == {
        "calls": 3,
        "input_tokens": 1800,
        "output_tokens": 300,
        "total_tokens": 2100,
        "cost_usd": pytest.approx(0.0033),
        "refused": 1,
    }
    agents = {a["agent"]: a for a in data["agents"]}
    assert (agents["luna"]["calls"], agents["luna"]["total_tokens"]) == (2, 1800)
    assert (agents["mia"]["total_tokens"], agents["mia"]["refused"]) == (300, 1)
    assert agents["luna"]["daily_token_budget"] == 100000 and agents["luna"]["budget_used_pct"] == 1.8
    assert outbox(admin, utc, "usage.daily_report") == []  # 15:30 in UTC: not its midnight
    # Again at 00:30 or 01:30 Tokyo time: no second report.
    assert run(admin, "job_daily_usage_report", now) == {"reports": 0}
    assert run(admin, "job_daily_usage_report", now + timedelta(hours=1)) == {"reports": 0}
    assert len(outbox(admin, tokyo, "usage.daily_report")) == 1


def test_a_day_without_usage_still_gets_a_zero_report(admin: Admin, tenant: Tenant) -> None:
    assert run(admin, "job_daily_usage_report", ts("2026-11-23T00:05:00+00:00")) == {"reports": 1}
    [report] = outbox(admin, tenant, "usage.daily_report")
    assert report["payload"]["totals"]["calls"] == 0 and report["payload"]["agents"] == []


# --- handoff reminders ----------------------------------------------------------------------------


def hand_off(as_agent: AsAgent, tenant: Tenant, contact_id: str, urgency: str, **to: str) -> str:
    """Luna hands a contact to someone; returns the handoff id."""
    with as_agent(tenant, "luna") as conn:
        result: dict[str, Any] = call(
            conn,
            "create_handoff",
            contact_id=contact_id,
            reason="escalation",
            context_summary="Needs attention.",
            urgency=urgency,
            **to,
        )
    return str(result["id"])


def test_handoff_reminders_nudge_urgent_after_4h_and_escalate_normal_after_24h(
    admin: Admin, tenant: Tenant, as_agent: AsAgent
) -> None:
    contacts = [new_contact(as_agent, tenant, f"c{i}@acme.com") for i in range(6)]
    high = hand_off(as_agent, tenant, contacts[0], "high", to_agent="jasper")
    urgent = hand_off(as_agent, tenant, contacts[1], "urgent", to_human_id="sarah")
    normal = hand_off(as_agent, tenant, contacts[2], "normal", to_agent="mia")
    hand_off(as_agent, tenant, contacts[3], "low", to_agent="mia")
    accepted = hand_off(as_agent, tenant, contacts[4], "urgent", to_agent="anna")
    with as_agent(tenant, "anna") as conn:
        call(conn, "update_handoff_status", handoff_id=accepted, status="accepted")
    created = admin.execute("select max(created_at) as t from cortex.handoff_events").fetchone()
    assert created is not None
    start: datetime = created["t"]

    assert run(admin, "job_handoff_reminders", start + timedelta(hours=3)) == {"reminders": 0, "escalations": 0}
    later = start + timedelta(hours=5)
    assert run(admin, "job_handoff_reminders", later) == {"reminders": 4, "escalations": 0}

    reminders = outbox(admin, tenant, "handoff.reminder")
    assert sorted((r["payload"]["id"], r["recipient"]) for r in reminders) == sorted(
        [(high, "agent:jasper"), (high, "monitor"), (urgent, "human:sarah"), (urgent, "monitor")]
    )
    first = next(r for r in reminders if r["payload"]["id"] == high)
    assert first["payload"]["urgency"] == "high" and first["payload"]["status"] == "pending"
    assert first["payload"]["contact"]["email"] == "c0@acme.com"
    assert first["payload"]["pending_hours"] >= 5
    # Again in the same 2-hour window: no second reminder.
    assert run(admin, "job_handoff_reminders", later) == {"reminders": 0, "escalations": 0}

    # A day later the high and urgent ones are still reminded; the normal one is escalated, once.
    day_later = start + timedelta(hours=25)
    assert run(admin, "job_handoff_reminders", day_later) == {"reminders": 4, "escalations": 1}
    [escalation] = outbox(admin, tenant, "handoff.escalated")
    assert (escalation["recipient"], escalation["payload"]["id"]) == ("admin", normal)
    assert run(admin, "job_handoff_reminders", day_later + timedelta(hours=2)) == {"reminders": 4, "escalations": 0}
    assert len(outbox(admin, tenant, "handoff.escalated")) == 1
    assert len(outbox(admin, tenant, "handoff.reminder")) == 12


def test_handoff_reminders_repeat_every_2h_while_pending_and_not_more_often(
    admin: Admin, tenant: Tenant, as_agent: AsAgent
) -> None:
    contact = new_contact(as_agent, tenant, "c@acme.com")
    urgent = hand_off(as_agent, tenant, contact, "urgent", to_agent="jasper")
    row = admin.execute(
        "select created_at, cortex.slot_start(created_at + interval '6 hours', interval '2 hours') as slot"
        " from cortex.handoff_events where id = %s",
        (urgent,),
    ).fetchone()
    assert row is not None
    # The first 2-hour window that starts more than 4 h after the handoff (pg_cron fires at its start).
    slot: datetime = row["slot"]
    assert slot - row["created_at"] > timedelta(hours=4)

    def reminded_at(minutes: int) -> int:
        result = run(admin, "job_handoff_reminders", slot + timedelta(minutes=minutes))
        assert result["escalations"] == 0
        return int(result["reminders"])

    # Two messages (receiver and monitor) at the first run, at +2 h and at +4 h; none between.
    assert [reminded_at(m) for m in (1, 60, 119, 120, 150, 239, 240)] == [2, 0, 0, 2, 0, 0, 2]
    reminders = outbox(admin, tenant, "handoff.reminder")
    assert [r["recipient"] for r in reminders] == ["agent:jasper", "monitor"] * 3
    # Each reminder is a message of its own for receivers that deduplicate on the key.
    assert len({r["idempotency_key"] for r in reminders}) == 6
    hours = [r["payload"]["pending_hours"] for r in reminders[::2]]
    # pending_hours has one decimal: 239 minutes apart reads as 3.9 to 4.1 hours.
    assert hours == sorted(hours) and hours[0] > 4 and round(hours[2] - hours[0], 1) >= 3.9

    # Once the handoff is accepted, the reminders stop.
    with as_agent(tenant, "jasper") as conn:
        call(conn, "update_handoff_status", handoff_id=urgent, status="accepted")
    assert reminded_at(360) == 0
    assert len(outbox(admin, tenant, "handoff.reminder")) == 6


# --- cleanup --------------------------------------------------------------------------------------


def test_cleanup_trims_cron_history_and_old_schedule_windows(admin: Admin, tenant: Tenant) -> None:
    now = ts("2026-11-23T03:30:00+00:00")
    # pg_cron's run log, as pg_cron 1.4 defines the columns the job reads (test databases have no pg_cron).
    admin.execute(
        "create schema cron; create table cron.job_run_details (runid bigint primary key, jobid bigint,"
        " status text, start_time timestamptz, end_time timestamptz)"
    )
    admin.execute(
        "insert into cron.job_run_details values (1, 1, 'succeeded', %s, %s), (2, 1, 'succeeded', %s, %s),"
        " (3, 1, 'running', %s, null)",
        (
            now - timedelta(days=9),
            now - timedelta(days=9),
            now - timedelta(days=1),
            now - timedelta(days=1),
            now - timedelta(days=8),
        ),
    )
    admin.execute(
        "insert into cortex.schedule_runs (tenant_id, job, window_start) values (%s, 'handoff_reminders', %s),"
        " (%s, 'handoff_reminders', %s)",
        (tenant.id, now - timedelta(days=40), tenant.id, now - timedelta(days=3)),
    )

    assert run(admin, "job_cleanup_cron_history", now) == {"cron_run_details": 2, "schedule_runs": 1}
    assert [r["runid"] for r in admin.execute("select runid from cron.job_run_details").fetchall()] == [2]
    assert run(admin, "job_cleanup_cron_history", now) == {"cron_run_details": 0, "schedule_runs": 0}


def test_cleanup_without_pg_cron_only_trims_schedule_windows(admin: Admin) -> None:
    assert admin.execute("select to_regnamespace('cron') is null as absent").fetchone() == {"absent": True}
    assert run(admin, "job_cleanup_cron_history", ts("2026-11-23T03:30:00+00:00")) == {
        "cron_run_details": 0,
        "schedule_runs": 0,
    }


def test_retention_deletes_old_finished_jobs_and_messages_but_keeps_parked_and_dead(
    admin: Admin, tenant: Tenant
) -> None:
    now = ts("2026-11-23T03:45:00+00:00")
    old, recent = now - timedelta(days=31), now - timedelta(days=2)
    for status, finished in (("done", old), ("done", recent), ("parked", old)):
        admin.execute(
            "insert into cortex.jobs (tenant_id, kind, status, finished_at)"
            " values (%s, 'summarise_interaction', %s, %s)",
            (tenant.id, status, finished),
        )
    for status in ("delivered", "skipped", "dead", "pending"):
        admin.execute(
            "insert into cortex.outbox (tenant_id, event, recipient, status)"
            " values (%s, 'handoff.created', 'monitor', %s)",
            (tenant.id, status),
        )
    # updated_at follows every update (trigger), so age the rows with the trigger off.
    admin.execute("alter table cortex.outbox disable trigger outbox_updated_at")
    admin.execute("update cortex.outbox set updated_at = %s", (old,))
    admin.execute("alter table cortex.outbox enable trigger outbox_updated_at")

    assert run(admin, "job_retention", now) == {"jobs": 1, "outbox": 2}
    left_jobs = admin.execute("select status from cortex.jobs order by status, finished_at").fetchall()
    assert [r["status"] for r in left_jobs] == ["done", "parked"]
    left = admin.execute("select status from cortex.outbox order by status").fetchall()
    assert [r["status"] for r in left] == ["dead", "pending"]
    assert run(admin, "job_retention", now) == {"jobs": 0, "outbox": 0}


# --- the schedule ---------------------------------------------------------------------------------


def test_a_database_without_pg_cron_gets_the_job_functions_but_no_schedule(admin: Admin) -> None:
    functions = admin.execute(
        "select p.proname from pg_proc p where p.pronamespace = 'cortex'::regnamespace and p.proname like 'job\\_%'"
        " order by 1"
    ).fetchall()
    assert [f["proname"] for f in functions] == [
        "job_cleanup_cron_history",
        "job_consolidation",
        "job_daily_usage_report",
        "job_handoff_reminders",
        "job_nightly_context_refresh",
        "job_precompute_briefings",
        "job_retention",
        "job_stale_context_sweep",
    ]
    assert admin.execute("select to_regnamespace('cron') as s").fetchone() == {"s": None}


@pytest.fixture
def cron_database() -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """The database pg_cron serves (cron.database_name, `cortex`), migrated as `cortex migrate` does."""
    with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
        row = c.execute("select current_setting('cron.database_name') as db").fetchone()
        assert row is not None
    name = row[0]
    url = dsn_for(name)
    # A local database built from older versions of the migration files (edited in place before
    # the first release) cannot be migrated forward: scripts/dev makes it again, and so does this.
    built_from = f"cortex-migrations:{files_digest()}"
    with psycopg.connect(url, autocommit=True) as c:
        comment = c.execute("select shobj_description(oid, 'pg_database') from pg_database where datname = %s", (name,))
        current = comment.fetchone()
        applied = c.execute("select to_regclass('supabase_migrations.schema_migrations') is not null").fetchone()
    if applied and applied[0] and (current is None or current[0] != built_from):
        with psycopg.connect(ADMIN_DSN, autocommit=True) as c:
            c.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))
            c.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    migrate(url)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(sql.SQL("comment on database {} is {}").format(sql.Identifier(name), sql.Literal(built_from)))
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        yield conn


def test_pg_cron_schedules_every_job_in_the_cron_database(cron_database: Admin) -> None:
    jobs = cron_database.execute(
        "select jobname, schedule, command, database, active from cron.job where jobname like 'cortex-%%'"
    ).fetchall()
    assert {j["jobname"]: (j["schedule"], j["command"]) for j in jobs} == EXPECTED_SCHEDULE
    database = cron_database.execute("select current_database() as d").fetchone()
    assert database is not None
    assert all(j["database"] == database["d"] and j["active"] for j in jobs)
    # Each command names a function that exists there.
    for _, command in EXPECTED_SCHEDULE.values():
        name = command.removeprefix("select ").removesuffix("()")
        assert cron_database.execute("select to_regproc(%s) is not null as ok", (name,)).fetchone() == {"ok": True}
