"""Token usage and daily budgets: the usage_daily rollup, budget_check, record_usage's refusals,
concurrent spenders and usage_summary, against the real database."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from cortex.db import agent_claims, as_caller, call
from cortex.errors import CortexError
from cortex.usage import service as usage
from tests.conftest import AsAgent, Tenant, TenantFactory

ROLLUP_VS_RAW = """
    select r.tenant_id, r.day, r.agent, r.model,
           r.input_tokens, r.output_tokens, r.total_tokens, r.cost_usd, r.operations, r.refused, r.refused_tokens
    from cortex.usage_daily r
    where r.operations > 0 or r.refused > 0
    except
    select u.tenant_id, (u.created_at at time zone t.time_zone)::date, u.agent, u.model,
           coalesce(sum(u.input_tokens) filter (where not u.budget_exceeded), 0),
           coalesce(sum(u.output_tokens) filter (where not u.budget_exceeded), 0),
           coalesce(sum(u.total_tokens) filter (where not u.budget_exceeded), 0),
           coalesce(sum(u.cost_usd) filter (where not u.budget_exceeded), 0),
           count(*) filter (where not u.budget_exceeded),
           count(*) filter (where u.budget_exceeded),
           coalesce(sum(u.total_tokens) filter (where u.budget_exceeded), 0)
    from cortex.token_usage u join cortex.tenants t on t.id = u.tenant_id
    group by 1, 2, 3, 4
"""


def set_budget(admin: Any, tenant: Tenant, agent: str, budget: int) -> None:
    admin.execute(
        "update cortex.agent_config set daily_token_budget = %s where tenant_id = %s and agent = %s",
        (budget, tenant.id, agent),
    )


def insert_usage(
    admin: Any,
    tenant: Tenant,
    agent: str,
    input_tokens: int,
    output_tokens: int = 0,
    *,
    model: str = "haiku",
    at: datetime | None = None,
    budget_exceeded: bool = False,
) -> None:
    """A usage row written as the owner, with an explicit time when given (as a backfill would)."""
    admin.execute(
        "insert into cortex.token_usage (tenant_id, agent, model, operation, input_tokens, output_tokens,"
        " cost_usd, budget_exceeded, created_at)"
        " values (%(t)s, %(a)s, %(m)s, 'summarize', %(i)s, %(o)s, cortex.model_cost(%(t)s, %(m)s, %(i)s, %(o)s),"
        " %(b)s, coalesce(%(at)s, now()))",
        {"t": tenant.id, "a": agent, "m": model, "i": input_tokens, "o": output_tokens, "b": budget_exceeded, "at": at},
    )


def counts(admin: Any) -> dict[str, int]:
    row = admin.execute(
        "select (select count(*) from cortex.token_usage) as usage,"
        " (select count(*) from cortex.usage_daily) as daily,"
        " (select count(*) from cortex.outbox) as outbox"
    ).fetchone()
    return dict(row)


def local_midnight(tz: ZoneInfo, day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=tz)


# --- the rollup --------------------------------------------------------------------------------


def test_rollup_equals_the_sums_of_raw_rows_after_inserts_updates_and_deletes(tenant: Tenant, admin: Any) -> None:
    luna, mia = agent_claims(tenant.id, "luna"), agent_claims(tenant.id, "mia")
    for i in range(15):
        usage.record_usage(luna, model="haiku", operation="summarize", input_tokens=100 + i, output_tokens=20)
        usage.record_usage(mia, model="sonnet", operation="write_email", input_tokens=300, output_tokens=90 + i)
    # The system agent (an admin) may meter a call on an agent's behalf.
    usage.record_usage(
        agent_claims(tenant.id, "system"),
        model="haiku",
        operation="summarize",
        input_tokens=7,
        output_tokens=3,
        agent="luna",
    )
    # One statement, many rows for the same keys (the statement trigger aggregates them), some refused.
    admin.execute(
        "insert into cortex.token_usage (tenant_id, agent, model, operation, input_tokens, output_tokens,"
        " cost_usd, budget_exceeded, created_at)"
        " select %s, (array['luna', 'mia'])[1 + g %% 2], (array['haiku', 'sonnet', 'opus'])[1 + g %% 3],"
        " 'bulk', g, 2 * g, g / 1000.0, g %% 7 = 0, now() - (g %% 3) * interval '1 day'"
        " from generate_series(1, 200) g",
        (tenant.id,),
    )
    assert admin.execute(ROLLUP_VS_RAW).fetchall() == []

    admin.execute(
        "update cortex.token_usage set input_tokens = input_tokens + 1 where operation = 'bulk' and agent = 'mia'"
    )
    admin.execute("delete from cortex.token_usage where operation = 'summarize' and input_tokens < 105")
    assert admin.execute(ROLLUP_VS_RAW).fetchall() == []

    today = admin.execute(
        "select sum(total_tokens) as spent, sum(refused) as refused from cortex.usage_daily"
        " where agent = 'luna' and day = (now() at time zone 'UTC')::date"
    ).fetchone()
    raw = admin.execute(
        "select sum(total_tokens) filter (where not budget_exceeded) as spent,"
        " count(*) filter (where budget_exceeded) as refused from cortex.token_usage"
        " where agent = 'luna' and created_at::date = (now() at time zone 'UTC')::date"
    ).fetchone()
    assert today == raw and today["refused"] > 0


def test_usage_days_are_local_days_of_the_tenant_time_zone(make_tenant: TenantFactory, admin: Any) -> None:
    la = make_tenant(time_zone="America/Los_Angeles")
    # Both on 2026-01-15 in UTC, but one second before and at midnight in Los Angeles (UTC-8).
    insert_usage(admin, la, "luna", 10, at=datetime(2026, 1, 15, 7, 59, 59, tzinfo=UTC))
    insert_usage(admin, la, "luna", 20, at=datetime(2026, 1, 15, 8, 0, 0, tzinfo=UTC))
    days = admin.execute("select day, total_tokens from cortex.usage_daily order by day").fetchall()
    assert days == [{"day": date(2026, 1, 14), "total_tokens": 10}, {"day": date(2026, 1, 15), "total_tokens": 20}]

    # Moving the tenant to another zone recomputes its local days.
    admin.execute("update cortex.tenants set time_zone = 'UTC' where id = %s", (la.id,))
    days = admin.execute("select day, total_tokens from cortex.usage_daily where operations > 0").fetchall()
    assert days == [{"day": date(2026, 1, 15), "total_tokens": 30}]


def test_budget_check_counts_only_usage_since_the_tenant_local_midnight(make_tenant: TenantFactory, admin: Any) -> None:
    tz = ZoneInfo("America/Los_Angeles")
    la = make_tenant(time_zone="America/Los_Angeles")
    midnight = local_midnight(tz, datetime.now(tz).date())
    insert_usage(admin, la, "luna", 400, at=midnight - timedelta(seconds=1))
    insert_usage(admin, la, "luna", 250, at=midnight + timedelta(seconds=1))

    check = usage.budget_check(agent_claims(la.id, "helios"), "luna", 100)

    assert check["used_today"] == 250
    assert check["time_zone"] == "America/Los_Angeles"
    next_midnight = local_midnight(tz, midnight.date() + timedelta(days=1))
    assert datetime.fromisoformat(check["resets_at"]) == next_midnight
    assert check["resets_at"][-6:] in ("-08:00", "-07:00")
    expected = (next_midnight - datetime.now(tz)).total_seconds()
    assert abs(check["retry_after_seconds"] - expected) <= 5


# --- budget_check ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("used", "estimated", "recommendation", "within"),
    [
        (0, 0, "proceed", True),
        (500, 300, "proceed", True),  # exactly 80 % after the operation
        (500, 301, "use_haiku", True),
        (900, 50, "use_haiku", True),  # exactly 95 %
        (900, 51, "defer", True),
        (900, 100, "defer", True),  # exactly 100 %
        (900, 101, "alert_human", False),
        (1200, 0, "alert_human", False),  # already over through Cortex's own metered calls
    ],
)
def test_budget_check_recommends_by_the_share_used_after_the_operation(
    tenant: Tenant, admin: Any, used: int, estimated: int, recommendation: str, within: bool
) -> None:
    set_budget(admin, tenant, "luna", 1000)
    if used:
        insert_usage(admin, tenant, "luna", used - 100, 100)
    check = usage.budget_check(agent_claims(tenant.id, "luna"), "luna", estimated)
    assert check["recommendation"] == recommendation
    assert check["within_budget"] is within
    assert check["daily_budget"] == 1000
    assert check["used_today"] == used
    assert check["remaining"] == max(1000 - used, 0)
    assert check["estimated_tokens"] == estimated
    assert Decimal(str(check["budget_percentage_used"])) == Decimal(used) / 10
    # A check writes nothing.
    assert admin.execute("select count(*) as n from cortex.token_usage").fetchone()["n"] == (1 if used else 0)


def test_budget_check_defaults_to_the_calling_agent(tenant: Tenant, admin: Any, as_agent: AsAgent) -> None:
    set_budget(admin, tenant, "anna", 5000)
    with as_agent(tenant, "anna") as conn:
        check = call(conn, "budget_check")
    assert check["agent"] == "anna" and check["daily_budget"] == 5000 and check["estimated_tokens"] == 0


# --- refusals -----------------------------------------------------------------------------------------


def test_an_operation_over_the_budget_is_refused_recorded_and_reported_to_the_monitor(
    make_tenant: TenantFactory, admin: Any
) -> None:
    tz = ZoneInfo("America/Los_Angeles")
    la = make_tenant(time_zone="America/Los_Angeles")
    set_budget(admin, la, "luna", 1000)
    luna = agent_claims(la.id, "luna")
    ok = usage.record_usage(luna, model="haiku", operation="summarize", input_tokens=800, output_tokens=100)
    assert ok["refused"] is False and ok["total_tokens"] == 900
    assert ok["budget"]["used_today"] == 900 and ok["budget"]["recommendation"] == "use_haiku"

    with pytest.raises(usage.BudgetExceeded) as err:
        usage.record_usage(luna, model="sonnet", operation="write_email", input_tokens=150, output_tokens=50)

    refusal = err.value
    assert refusal.status == 429 and refusal.code == "budget_exceeded"
    assert refusal.recommendation == "alert_human"
    next_midnight = local_midnight(tz, datetime.now(tz).date() + timedelta(days=1))
    assert abs(refusal.retry_after_seconds - (next_midnight - datetime.now(tz)).total_seconds()) <= 5
    body = refusal.to_json()["error"]
    assert body["recommendation"] == "alert_human"
    assert body["retry_after_seconds"] == refusal.retry_after_seconds
    assert body["remaining"] == 100

    # Committed although refused: the row, the rollup's refusal count and the monitor's alert.
    rows = admin.execute(
        "select model, total_tokens, budget_exceeded from cortex.token_usage order by created_at, budget_exceeded"
    ).fetchall()
    assert rows == [
        {"model": "haiku", "total_tokens": 900, "budget_exceeded": False},
        {"model": "sonnet", "total_tokens": 200, "budget_exceeded": True},
    ]
    spent = admin.execute(
        "select sum(total_tokens) as spent, sum(refused) as refused, sum(refused_tokens) as rt from cortex.usage_daily"
    ).fetchone()
    assert spent == {"spent": 900, "refused": 1, "rt": 200}
    alerts = admin.execute(
        "select event, recipient, payload from cortex.outbox where event = 'budget.exceeded'"
    ).fetchall()
    assert len(alerts) == 1
    assert alerts[0]["event"] == "budget.exceeded" and alerts[0]["recipient"] == "monitor"
    assert alerts[0]["payload"]["agent"] == "luna"
    assert alerts[0]["payload"]["requested_tokens"] == 200
    assert alerts[0]["payload"]["daily_budget"] == 1000

    # A second refusal the same day is recorded too, but the monitor is alerted once per agent and day.
    with pytest.raises(usage.BudgetExceeded):
        usage.record_usage(luna, model="haiku", operation="summarize", input_tokens=101, output_tokens=0)
    assert admin.execute("select sum(refused) as n from cortex.usage_daily").fetchone()["n"] == 2
    assert admin.execute("select count(*) as n from cortex.outbox where event = 'budget.exceeded'").fetchone()["n"] == 1
    # What still fits is accepted.
    assert (
        usage.record_usage(luna, model="haiku", operation="summarize", input_tokens=100, output_tokens=0)["budget"][
            "remaining"
        ]
        == 0
    )


def test_enforce_budget_gates_model_work_before_it_starts(tenant: Tenant, admin: Any) -> None:
    set_budget(admin, tenant, "mia", 500)
    mia = agent_claims(tenant.id, "mia")
    fits = usage.enforce_budget(mia, 400, model="haiku", operation="generate_context")
    assert fits["refused"] is False and fits["recommendation"] == "proceed"
    assert counts(admin)["usage"] == 0  # a pre-flight check reserves nothing

    with pytest.raises(usage.BudgetExceeded) as err:
        usage.enforce_budget(mia, 501, model="sonnet", operation="generate_context")
    assert err.value.recommendation == "alert_human"
    row = admin.execute(
        "select agent, model, operation, input_tokens, budget_exceeded from cortex.token_usage"
    ).fetchone()
    assert row == {
        "agent": "mia",
        "model": "sonnet",
        "operation": "generate_context",
        "input_tokens": 501,
        "budget_exceeded": True,
    }
    assert admin.execute("select event from cortex.outbox").fetchone()["event"] == "budget.exceeded"


def test_concurrent_spenders_cannot_overshoot_the_daily_budget(tenant: Tenant, admin: Any, dsn: str) -> None:
    budget, cost, threads, attempts = 1000, 150, 8, 3
    set_budget(admin, tenant, "luna", budget)
    claims = agent_claims(tenant.id, "luna")
    start = threading.Barrier(threads)
    outcomes: list[bool] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def spend() -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                start.wait()
                for _ in range(attempts):
                    with as_caller(claims, conn) as c:
                        result = call(
                            c,
                            "record_usage",
                            model="haiku",
                            operation="summarize",
                            input_tokens=100,
                            output_tokens=cost - 100,
                        )
                    with lock:
                        outcomes.append(bool(result["refused"]))
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    workers = [threading.Thread(target=spend) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []

    accepted = outcomes.count(False)
    spent = admin.execute(
        "select coalesce(sum(total_tokens), 0) as n from cortex.token_usage where not budget_exceeded"
    ).fetchone()["n"]
    # The guarantee: at most one operation over; with the per-agent lock it is in fact none,
    # and the budget is used up to the last operation that fits.
    assert spent <= budget + cost
    assert spent <= budget
    assert accepted == budget // cost and spent == accepted * cost
    assert outcomes.count(True) == threads * attempts - accepted
    rollup = admin.execute("select total_tokens, operations, refused from cortex.usage_daily").fetchone()
    assert rollup == {"total_tokens": spent, "operations": accepted, "refused": threads * attempts - accepted}
    assert admin.execute("select count(*) as n from cortex.outbox where event = 'budget.exceeded'").fetchone()["n"] == 1


# --- usage_summary -------------------------------------------------------------------------------------


def test_usage_summary_sums_the_day_week_and_month_in_the_tenant_time_zone(
    make_tenant: TenantFactory, admin: Any
) -> None:
    tz = ZoneInfo("Asia/Kolkata")  # +05:30: the offset must be rendered, not assumed whole hours
    t = make_tenant(time_zone="Asia/Kolkata")
    today = datetime.now(tz).date()
    starts = {
        "day": today,
        "week": today - timedelta(days=today.weekday()),
        "month": today.replace(day=1),
    }
    ends = {
        "day": starts["day"] + timedelta(days=1),
        "week": starts["week"] + timedelta(days=7),
        "month": (starts["month"] + timedelta(days=32)).replace(day=1),
    }
    rows: list[tuple[str, str, int, int, datetime]] = []
    for n, start in enumerate(starts.values()):
        boundary = local_midnight(tz, start)
        rows.append(("luna", "haiku", 1000 + n, 10, boundary - timedelta(seconds=1)))
        rows.append(("luna", "sonnet", 2000 + n, 20, boundary + timedelta(seconds=1)))
    rows.append(("mia", "haiku", 500, 50, datetime.now(tz)))
    for agent, model, i, o, at in rows:
        insert_usage(admin, t, agent, i, o, model=model, at=at)
    insert_usage(admin, t, "mia", 999, model="haiku", budget_exceeded=True)

    helios = agent_claims(t.id, "helios")
    for period in ("day", "week", "month"):
        summary = usage.usage_summary(helios, period)
        start, end = local_midnight(tz, starts[period]), local_midnight(tz, ends[period])
        inside = [r for r in rows if start <= r[4] < end]
        assert summary["period"] == period and summary["time_zone"] == "Asia/Kolkata"
        assert datetime.fromisoformat(summary["start"]) == start and summary["start"].endswith("+05:30")
        assert datetime.fromisoformat(summary["end"]) == end
        totals = summary["totals"]
        assert totals["input_tokens"] == sum(r[2] for r in inside)
        assert totals["output_tokens"] == sum(r[3] for r in inside)
        assert totals["total_tokens"] == sum(r[2] + r[3] for r in inside)
        assert totals["operations"] == len(inside)
        assert totals["refused"] == 1
        raw_cost = admin.execute(
            "select coalesce(sum(cost_usd), 0) as c from cortex.token_usage"
            " where not budget_exceeded and created_at >= %s and created_at < %s",
            (start, end),
        ).fetchone()["c"]
        assert Decimal(str(totals["cost_usd"])) == raw_cost > 0
        luna_rows = [r for r in inside if r[0] == "luna"]
        assert summary["by_agent"]["luna"]["total_tokens"] == sum(r[2] + r[3] for r in luna_rows)
        assert summary["by_agent"]["luna"]["operations"] == len(luna_rows)
        assert summary["by_agent"]["luna"]["avg_tokens_per_operation"] == (
            # Postgres rounds half away from zero (Python's round() would go to even).
            (2 * sum(r[2] + r[3] for r in luna_rows) + len(luna_rows)) // (2 * len(luna_rows))
        )
        assert summary["by_agent"]["mia"] == {
            "input_tokens": 500,
            "output_tokens": 50,
            "total_tokens": 550,
            "operations": 1,
            "refused": 1,
            "avg_tokens_per_operation": 550,
            "cost_usd": summary["by_agent"]["mia"]["cost_usd"],
        }
        for model in ("haiku", "sonnet"):
            assert summary["by_model"][model]["tokens"] == sum(r[2] + r[3] for r in inside if r[1] == model)
        # Budgets are daily, whatever the period.
        day_rows = [r for r in rows if local_midnight(tz, today) <= r[4]]
        assert summary["budget_status"]["luna"] == {
            "used": sum(r[2] + r[3] for r in day_rows if r[0] == "luna"),
            "budget": 100000,
            "remaining": 100000 - sum(r[2] + r[3] for r in day_rows if r[0] == "luna"),
        }
        assert set(summary["budget_status"]) == {"luna", "mia", "anna", "jasper", "helios", "system"}


def test_usage_summary_for_one_agent_leaves_the_others_out(tenant: Tenant, admin: Any) -> None:
    insert_usage(admin, tenant, "luna", 100, 10)
    insert_usage(admin, tenant, "mia", 200, 20, model="sonnet")
    summary = usage.usage_summary(agent_claims(tenant.id, "luna"), "month", "mia")
    assert summary["agent"] == "mia"
    assert list(summary["by_agent"]) == ["mia"] and list(summary["by_model"]) == ["sonnet"]
    assert list(summary["budget_status"]) == ["mia"]
    assert summary["totals"]["total_tokens"] == 220
    assert usage.usage_summary(agent_claims(tenant.id, "luna"))["period"] == "day"


# --- bad input ------------------------------------------------------------------------------------------

GOOD = {"model": "haiku", "operation": "summarize", "input_tokens": 10, "output_tokens": 5}


@pytest.mark.parametrize(
    ("function", "args", "field", "status"),
    [
        ("budget_check", {"agent": "nobody"}, "agent", 422),
        ("budget_check", {"agent": "luna", "estimated_tokens": -1}, "estimated_tokens", 422),
        ("usage_summary", {"period": "year"}, "period", 422),
        ("usage_summary", {"period": "day", "agent": "nobody"}, "agent", 422),
        ("record_usage", {**GOOD, "agent": "nobody"}, "agent", 422),
        ("record_usage", {**GOOD, "agent": "mia"}, "agent", 403),  # luna is not an admin agent
        ("record_usage", {**GOOD, "model": None}, "model", 422),
        ("record_usage", {**GOOD, "operation": " "}, "operation", 422),
        ("record_usage", {**GOOD, "input_tokens": -1}, "input_tokens", 422),
        ("record_usage", {**GOOD, "output_tokens": -5}, "output_tokens", 422),
        ("record_usage", {**GOOD, "contact_id": str(uuid.uuid4())}, "contact_id", 404),
        ("record_usage", {**GOOD, "interaction_id": str(uuid.uuid4())}, "interaction_id", 404),
    ],
)
def test_bad_input_is_a_4xx_naming_the_field_and_writes_nothing(
    tenant: Tenant, as_agent: AsAgent, admin: Any, function: str, args: dict[str, Any], field: str, status: int
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, function, **args)
    assert err.value.field == field
    assert err.value.status == status
    assert counts(admin) == {"usage": 0, "daily": 0, "outbox": 0}


def test_enforce_budget_rejects_a_negative_estimate_and_writes_nothing(tenant: Tenant, admin: Any) -> None:
    with pytest.raises(CortexError) as err:
        usage.enforce_budget(agent_claims(tenant.id, "luna"), -10)
    assert err.value.field == "estimated_tokens" and err.value.status == 422
    assert counts(admin) == {"usage": 0, "daily": 0, "outbox": 0}


# --- isolation ------------------------------------------------------------------------------------------


def test_a_tenant_never_sees_another_tenants_usage(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, admin: Any
) -> None:
    usage.record_usage(
        agent_claims(tenant.id, "luna"), model="haiku", operation="summarize", input_tokens=700, output_tokens=30
    )

    summary = usage.usage_summary(agent_claims(other_tenant.id, "helios"), "month")
    assert summary["totals"]["total_tokens"] == 0
    assert summary["by_agent"] == {} and summary["by_model"] == {}
    assert summary["budget_status"]["luna"]["used"] == 0
    assert usage.budget_check(agent_claims(other_tenant.id, "helios"), "luna")["used_today"] == 0
    with as_agent(other_tenant, "luna") as conn:
        assert conn.execute("select count(*) from cortex.usage_daily").fetchone() == (0,)
        assert conn.execute("select count(*) from cortex.token_usage").fetchone() == (0,)
    # Another tenant's id is refused outright, not silently read.
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(other_tenant, "luna") as conn:
        conn.execute("select cortex.enforce_budget(%s, 'luna', 10)", (tenant.id,))
    assert usage.usage_summary(agent_claims(tenant.id, "helios"))["totals"]["total_tokens"] == 730


def test_deleting_a_tenant_removes_its_usage_and_rollup(tenant: Tenant, other_tenant: Tenant, admin: Any) -> None:
    insert_usage(admin, tenant, "luna", 10, 5)
    insert_usage(admin, other_tenant, "luna", 20, 5)
    admin.execute("delete from cortex.tenants where id = %s", (tenant.id,))
    left = admin.execute("select tenant_id::text as t, total_tokens from cortex.usage_daily").fetchall()
    assert left == [{"t": other_tenant.id, "total_tokens": 25}]
