"""HTTP routes of token usage and budgets: summary, budget check, and the 429 refusal."""

from __future__ import annotations

import time
from typing import Any

from starlette.testclient import TestClient

from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import Tenant


def record(client: TestClient, key: str, **fields: Any) -> Any:
    body = {"model": "claude-haiku-4-5", "operation": "write_email", "input_tokens": 400, "output_tokens": 100}
    return client.post("/api/v1/usage", json={**body, **fields}, headers=bearer(key))


def test_budget_check_recommends_by_share_of_the_daily_budget(client: TestClient, tenant: Tenant, admin: Any) -> None:
    admin.execute(
        "update cortex.agent_config set daily_token_budget = 1000 where tenant_id = %s and agent = 'anna'", (tenant.id,)
    )
    assert record(client, tenant.keys["anna"]).status_code == 201  # 500 used
    fresh = body_of(
        client.get("/api/v1/usage/budget-check/anna?estimated_tokens=100", headers=bearer(tenant.keys["anna"]))
    )
    tight = body_of(
        client.get("/api/v1/usage/budget-check/anna?estimated_tokens=400", headers=bearer(tenant.keys["anna"]))
    )
    over = body_of(
        client.get("/api/v1/usage/budget-check/anna?estimated_tokens=600", headers=bearer(tenant.keys["anna"]))
    )
    assert (fresh["used_today"], fresh["remaining"], fresh["recommendation"]) == (500, 500, "proceed")
    assert tight["recommendation"] == "use_haiku" and tight["within_budget"] is True
    assert over["recommendation"] == "alert_human" and over["within_budget"] is False


def test_a_call_over_budget_is_429_with_retry_after_recorded_and_reported_to_the_monitor(
    client: TestClient, tenant: Tenant, admin: Any
) -> None:
    admin.execute(
        "update cortex.agent_config set daily_token_budget = 600 where tenant_id = %s and agent = 'anna'", (tenant.id,)
    )
    assert record(client, tenant.keys["anna"]).status_code == 201
    refused = record(client, tenant.keys["anna"])
    assert refused.status_code == 429
    retry_after = int(refused.headers["Retry-After"])
    assert 0 < retry_after <= 86400
    err = error_of(refused)
    assert err["recommendation"] == "alert_human"
    rows = admin.execute("select budget_exceeded from cortex.token_usage order by created_at").fetchall()
    assert [r["budget_exceeded"] for r in rows] == [False, True]
    assert (
        admin.execute(
            "select count(*) as n from cortex.outbox where event = 'budget.exceeded' and recipient = 'monitor'"
        ).fetchone()["n"]
        == 1
    )


def test_usage_summary_has_totals_by_agent_and_model_and_the_monitor_may_read_it(
    client: TestClient, tenant: Tenant
) -> None:
    record(client, tenant.keys["anna"])
    record(client, tenant.keys["luna"], model="claude-sonnet-4-5", input_tokens=1000, output_tokens=0)
    time.sleep(0)  # both calls are committed already: each request is one transaction
    summary = body_of(client.get("/api/v1/usage/summary?period=week", headers=bearer(tenant.keys["helios"])))
    assert summary["period"] == "week"
    assert summary["totals"]["total_tokens"] == 1500
    assert summary["by_agent"]["anna"]["total_tokens"] == 500
    assert set(summary["by_model"]) == {"claude-haiku-4-5", "claude-sonnet-4-5"}
    assert summary["budget_status"]["luna"]["used"] == 1000


def test_usage_routes_reject_bad_input_naming_the_field(client: TestClient, tenant: Tenant, admin: Any) -> None:
    key = tenant.keys["anna"]
    cases = [
        (client.get("/api/v1/usage/summary?period=year", headers=bearer(key)), "period"),
        (client.get("/api/v1/usage/budget-check/anna?estimated_tokens=-5", headers=bearer(key)), "estimated_tokens"),
        (client.get("/api/v1/usage/budget-check/nobody", headers=bearer(key)), "agent"),
        (record(client, key, input_tokens=-1), "input_tokens"),
        (record(client, key, model=""), "model"),
    ]
    for response, field in cases:
        assert 400 <= response.status_code < 500
        assert error_of(response)["field"] == field
    assert admin.execute("select count(*) as n from cortex.token_usage").fetchone()["n"] == 0


def test_another_tenants_usage_never_shows_over_http(client: TestClient, tenant: Tenant, other_tenant: Tenant) -> None:
    assert record(client, tenant.keys["anna"]).status_code == 201
    other = bearer(other_tenant.keys["helios"])
    summary = body_of(client.get("/api/v1/usage/summary?period=month", headers=other))
    check = body_of(client.get("/api/v1/usage/budget-check/anna", headers=other))
    assert summary["totals"]["total_tokens"] == 0
    assert check["used_today"] == 0
    mine = body_of(client.get("/api/v1/usage/budget-check/anna", headers=bearer(tenant.keys["helios"])))
    assert mine["used_today"] == 500
