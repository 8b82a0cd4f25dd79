"""Alerts that reach people: a parked job, a budget refusal and a webhook dead letter each become an
alert row and, in the same transaction, alert.raised messages to the monitor and the admin; agents
list alerts, monitors and admins acknowledge them (HTTP, CLI, and the PostgREST path)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from starlette.testclient import TestClient

from cortex.cli import main
from cortex.config import get_settings
from cortex.db import call
from cortex.errors import CortexError
from cortex.notifications.delivery import DeliveryConfig, deliver_batch
from cortex.queue import worker
from cortex.usage import service as usage
from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import AsAgent, Tenant

Admin = psycopg.Connection[dict[str, Any]]
V1 = "/api/v1"
SERVICE_KEY = "svc_test_service_key_alerts_0123"
# No HELIOS_WEBHOOK_URL fallback: the monitor is reached only through an endpoint the test adds.
DELIVERY = DeliveryConfig(timeout_seconds=5.0, concurrency=4)


@pytest.fixture
def queue_conn(dsn: str) -> Iterator[psycopg.Connection[Any]]:
    """The worker's connection: autocommit, as the database owner."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The operators' service key, configured for the HTTP edge."""
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    get_settings.cache_clear()
    yield SERVICE_KEY
    get_settings.cache_clear()


def as_service(tenant: Tenant) -> dict[str, str]:
    return {**bearer(SERVICE_KEY), "X-Tenant-ID": tenant.id}


def alerts_of(admin: Admin, tenant: Tenant) -> list[dict[str, Any]]:
    """A tenant's alert rows, oldest first."""
    return admin.execute(
        "select id, kind, severity, message, details, notified, acknowledged_at, acknowledged_by, ack_note"
        " from cortex.alerts where tenant_id = %s order by id",
        (tenant.id,),
    ).fetchall()


def messages(admin: Admin, tenant: Tenant, event: str = "alert.raised") -> list[dict[str, Any]]:
    """A tenant's outbox messages of one event, oldest first."""
    return admin.execute(
        "select id, recipient, payload, status, idempotency_key from cortex.outbox"
        " where tenant_id = %s and event = %s order by id",
        (tenant.id, event),
    ).fetchall()


def raise_alert(admin: Admin, tenant: Tenant, kind: str = "job_parked", details: str = "{}") -> int:
    """An alert row written as the database's own functions write them (as the owner)."""
    row = admin.execute(
        "insert into cortex.alerts (tenant_id, kind, severity, message, details)"
        " values (%s, %s, 'warning', 'Something needs a person.', %s::jsonb) returning id",
        (tenant.id, kind, details),
    ).fetchone()
    assert row is not None
    return int(row["id"])


def closed_port_url() -> str:
    """A URL on which nothing listens: every delivery attempt is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def add_endpoint(admin: Admin, tenant: Tenant, recipient: str, url: str) -> None:
    admin.execute(
        "insert into cortex.webhook_endpoints (tenant_id, recipient, url) values (%s, %s, %s)",
        (tenant.id, recipient, url),
    )


# --- the three causes ------------------------------------------------------------------------------


def test_a_parked_job_raises_an_alert_and_messages_the_monitor_and_admin(
    tenant: Tenant, admin: Admin, queue_conn: psycopg.Connection[Any]
) -> None:
    admin.execute(
        "select cortex.enqueue_job(p_tenant_id => %s, p_kind => 'mystery_chore', p_max_attempts => 1)", (tenant.id,)
    )
    assert worker.run_once(queue_conn, "w1") == 1

    [alert] = alerts_of(admin, tenant)
    assert (alert["kind"], alert["severity"]) == ("job_parked", "critical")
    assert alert["notified"] == ["monitor", "admin"]
    sent = messages(admin, tenant)
    assert [m["recipient"] for m in sent] == ["monitor", "admin"]
    payload = sent[0]["payload"]
    assert (payload["id"], payload["kind"], payload["status"]) == (alert["id"], "job_parked", "open")
    assert payload["details"]["kind"] == "mystery_chore" and "parked" in payload["message"]
    assert {m["idempotency_key"] for m in sent} == {
        f"alert.raised:{alert['id']}:monitor",
        f"alert.raised:{alert['id']}:admin",
    }


def test_a_budget_refusal_raises_one_alert_per_agent_and_day(tenant: Tenant, admin: Admin) -> None:
    admin.execute(
        "update cortex.agent_config set daily_token_budget = 100 where tenant_id = %s and agent in ('luna', 'mia')",
        (tenant.id,),
    )
    for agent in ("luna", "luna", "mia"):
        with pytest.raises(usage.BudgetExceeded):
            usage.record_usage(
                {"role": "authenticated", "tenant_id": tenant.id, "agent": agent},
                model="haiku",
                operation="summarize",
                input_tokens=150,
                output_tokens=0,
            )

    alerts = alerts_of(admin, tenant)
    assert [(a["kind"], a["details"]["agent"]) for a in alerts] == [
        ("budget_exceeded", "luna"),
        ("budget_exceeded", "mia"),
    ]
    first = alerts[0]
    assert first["details"]["daily_budget"] == 100 and first["details"]["requested_tokens"] == 150
    assert "luna exceeded its daily budget of 100 tokens" in first["message"]
    # The monitor's own budget.exceeded notification stays, once per agent and day, as before.
    assert [m["payload"]["agent"] for m in messages(admin, tenant, "budget.exceeded")] == ["luna", "mia"]
    assert [(m["payload"]["id"], m["recipient"]) for m in messages(admin, tenant)] == [
        (alerts[0]["id"], "monitor"),
        (alerts[0]["id"], "admin"),
        (alerts[1]["id"], "monitor"),
        (alerts[1]["id"], "admin"),
    ]


def test_a_dead_letter_raises_an_alert_but_a_dead_alert_message_raises_no_other(
    tenant: Tenant, admin: Admin, queue_conn: psycopg.Connection[Any]
) -> None:
    add_endpoint(admin, tenant, "agent:jasper", closed_port_url())
    admin.execute("select cortex.notify(%s, 'handoff.created', 'agent:jasper', '{}'::jsonb, 'handoff-1')", (tenant.id,))
    admin.execute("update cortex.outbox set max_attempts = 1 where tenant_id = %s", (tenant.id,))

    stats = deliver_batch(queue_conn, "w1", config=DELIVERY)
    assert (stats.claimed, stats.dead) == (1, 1)
    [alert] = alerts_of(admin, tenant)
    assert alert["kind"] == "webhook_dead_letter" and alert["details"]["event"] == "handoff.created"
    assert alert["notified"] == ["monitor", "admin"]
    assert [m["recipient"] for m in messages(admin, tenant)] == ["monitor", "admin"]

    # The monitor's endpoint is down too: its alert.raised message dies in turn. That is recorded
    # as an alert, and nobody is messaged about it (it would only die again, forever).
    add_endpoint(admin, tenant, "monitor", closed_port_url())
    admin.execute("update cortex.outbox set max_attempts = 1 where tenant_id = %s and status = 'pending'", (tenant.id,))
    stats = deliver_batch(queue_conn, "w1", config=DELIVERY)
    assert (stats.claimed, stats.dead) == (1, 1)  # the admin's was skipped: no endpoint
    assert [m["status"] for m in messages(admin, tenant)] == ["dead", "skipped"]
    guarded = alerts_of(admin, tenant)[-1]
    assert guarded["kind"] == "webhook_dead_letter" and guarded["details"]["event"] == "alert.raised"
    assert guarded["notified"] == []
    assert len(messages(admin, tenant)) == 2
    assert deliver_batch(queue_conn, "w1", config=DELIVERY).claimed == 0


def test_monitor_and_admin_agents_with_their_own_endpoint_are_messaged_too_but_never_system_without_one(
    make_tenant: Any, admin: Admin
) -> None:
    tenant = make_tenant("initech")
    admin.execute("select cortex.create_agent(%s, 'ops', 'Ops', 'admin')", (tenant.id,))
    admin.execute("select cortex.create_agent(%s, 'watch', 'Watch', 'monitor')", (tenant.id,))
    admin.execute("select cortex.create_agent(%s, 'idle', 'Idle', 'admin')", (tenant.id,))
    for recipient in ("agent:ops", "agent:watch", "agent:luna"):
        add_endpoint(admin, tenant, recipient, f"https://hooks.example.com/{recipient}")
    admin.execute("select cortex.create_agent(%s, 'retired', 'Retired', 'monitor')", (tenant.id,))
    add_endpoint(admin, tenant, "agent:retired", "https://hooks.example.com/retired")
    admin.execute("update cortex.agents set enabled = false where tenant_id = %s and name = 'retired'", (tenant.id,))

    alert_id = raise_alert(admin, tenant)

    expected = ["monitor", "admin", "agent:ops", "agent:watch"]
    assert alerts_of(admin, tenant)[0]["notified"] == expected
    assert [m["recipient"] for m in messages(admin, tenant)] == expected
    assert {m["payload"]["id"] for m in messages(admin, tenant)} == {alert_id}


def test_an_alert_and_its_messages_are_one_transaction(tenant: Tenant, dsn: str, admin: Admin) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "insert into cortex.alerts (tenant_id, kind, message) values (%s, 'job_parked', 'x')", (tenant.id,)
        )
        assert conn.execute("select count(*) from cortex.outbox").fetchone() == (2,)
        conn.rollback()
    assert alerts_of(admin, tenant) == [] and messages(admin, tenant) == []


# --- list and acknowledge over HTTP ----------------------------------------------------------------


def test_any_agent_lists_alerts_newest_first_with_filters(client: TestClient, tenant: Tenant, admin: Admin) -> None:
    parked = raise_alert(admin, tenant, "job_parked")
    dead = raise_alert(admin, tenant, "webhook_dead_letter")
    admin.execute(
        "update cortex.alerts set acknowledged_at = now(), acknowledged_by = 'system' where id = %s", (parked,)
    )

    for agent in ("luna", "helios"):
        response = client.get(f"{V1}/alerts", headers=bearer(tenant.keys[agent]))
        assert response.status_code == 200
        listed = body_of(response)
        assert [a["id"] for a in listed["items"]] == [dead, parked]
        assert (listed["open"], listed["limit"]) == (1, 20)

    key = bearer(tenant.keys["luna"])
    open_only = body_of(client.get(f"{V1}/alerts?status=open", headers=key))
    assert [(a["id"], a["status"]) for a in open_only["items"]] == [(dead, "open")]
    acked = body_of(client.get(f"{V1}/alerts?status=acknowledged", headers=key))
    assert [(a["id"], a["acknowledged_by"]) for a in acked["items"]] == [(parked, "system")]
    by_kind = body_of(client.get(f"{V1}/alerts?kind=job_parked", headers=key))
    assert [a["id"] for a in by_kind["items"]] == [parked]
    assert [a["id"] for a in body_of(client.get(f"{V1}/alerts?limit=1", headers=key))["items"]] == [dead]

    for query, field in (("status=closed", "status"), ("limit=0", "limit"), ("limit=101", "limit"), ("kind=", "kind")):
        response = client.get(f"{V1}/alerts?{query}", headers=key)
        assert response.status_code == 422, query
        assert error_of(response)["field"] == field


def test_monitors_and_admins_acknowledge_others_get_403_and_unknown_ids_404(
    client: TestClient, tenant: Tenant, admin: Admin, service: str
) -> None:
    alert_id = raise_alert(admin, tenant)
    admin.execute("select cortex.create_agent(%s, 'watch', 'Watch', 'monitor')", (tenant.id,))
    watch_key = admin.execute("select cortex.create_agent_key(%s, 'watch') as k", (tenant.id,)).fetchone()["k"]

    # An ordinary agent, and a read-only monitor (read-only agents write nothing, acknowledgements included).
    for agent in ("luna", "helios"):
        response = client.post(f"{V1}/alerts/{alert_id}/ack", json={}, headers=bearer(tenant.keys[agent]))
        assert response.status_code == 403, agent
        assert error_of(response)["message"] in (
            'agent "luna" may not acknowledge alerts',
            'agent "helios" is read-only',
        )
    assert alerts_of(admin, tenant)[0]["acknowledged_at"] is None

    response = client.post(f"{V1}/alerts/{alert_id}/ack", json={"note": "Retried by hand."}, headers=bearer(watch_key))
    assert response.status_code == 200
    acked = body_of(response)
    assert (acked["status"], acked["acknowledged_by"], acked["ack_note"]) == (
        "acknowledged",
        "watch",
        "Retried by hand.",
    )
    # Again, as the admin (the service key acts as system): the first acknowledgement stands.
    again = client.post(f"{V1}/alerts/{alert_id}/ack", json={"note": "Me too."}, headers=as_service(tenant))
    assert again.status_code == 200
    assert (body_of(again)["acknowledged_by"], body_of(again)["ack_note"]) == ("watch", "Retried by hand.")
    listed = body_of(client.get(f"{V1}/alerts", headers=bearer(tenant.keys["luna"])))
    assert listed["open"] == 0

    # The admin acknowledges another one.
    second = raise_alert(admin, tenant)
    response = client.post(f"{V1}/alerts/{second}/ack", json={}, headers=as_service(tenant))
    assert response.status_code == 200 and body_of(response)["acknowledged_by"] == "system"

    unknown = client.post(f"{V1}/alerts/999999/ack", json={}, headers=as_service(tenant))
    assert unknown.status_code == 404 and error_of(unknown)["field"] == "alert_id"
    for path, field in (("/alerts/abc/ack", "id"), ("/alerts/0/ack", "id")):
        response = client.post(f"{V1}{path}", json={}, headers=as_service(tenant))
        assert response.status_code == 422 and error_of(response)["field"] == field
    too_long = client.post(f"{V1}/alerts/{second}/ack", json={"note": "x" * 2001}, headers=as_service(tenant))
    assert too_long.status_code == 422 and error_of(too_long)["field"] == "note"


def test_another_tenant_sees_and_acknowledges_none_of_the_alerts(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, admin: Admin, service: str, as_agent: AsAgent
) -> None:
    alert_id = raise_alert(admin, tenant)
    listed = body_of(client.get(f"{V1}/alerts", headers=bearer(other_tenant.keys["luna"])))
    assert (listed["items"], listed["open"]) == ([], 0)
    response = client.post(f"{V1}/alerts/{alert_id}/ack", json={}, headers=as_service(other_tenant))
    assert response.status_code == 404
    assert alerts_of(admin, tenant)[0]["acknowledged_at"] is None
    # The PostgREST path: the table itself shows another tenant nothing.
    with as_agent(other_tenant, "system") as conn:
        assert conn.execute("select count(*) from cortex.alerts").fetchone() == (0,)


def test_a_direct_update_can_only_acknowledge_now_as_oneself_once(
    tenant: Tenant, admin: Admin, as_agent: AsAgent
) -> None:
    alert_id = raise_alert(admin, tenant)
    with as_agent(tenant, "luna") as conn:  # not a monitor or admin: RLS finds no row to update
        assert conn.execute("update cortex.alerts set ack_note = 'x' where id = %s", (alert_id,)).rowcount == 0
    with as_agent(tenant, "system") as conn:
        conn.execute(
            "update cortex.alerts set acknowledged_by = 'helios', acknowledged_at = '2000-01-01', ack_note = 'n'"
            " where id = %s",
            (alert_id,),
        )
    row = alerts_of(admin, tenant)[0]
    assert row["acknowledged_by"] == "system" and row["acknowledged_at"].year > 2000
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState), as_agent(tenant, "system") as conn:
        conn.execute("update cortex.alerts set acknowledged_at = null where id = %s", (alert_id,))
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "system") as conn:
        conn.execute("update cortex.alerts set message = 'rewritten' where id = %s", (alert_id,))


def test_the_sql_functions_answer_the_postgrest_path_alike(tenant: Tenant, admin: Admin, as_agent: AsAgent) -> None:
    alert_id = raise_alert(admin, tenant)
    with as_agent(tenant, "helios") as conn:
        assert [a["id"] for a in call(conn, "list_alerts")["items"]] == [alert_id]
    with pytest.raises(CortexError) as err, as_agent(tenant, "mia") as conn:
        call(conn, "ack_alert", alert_id=alert_id)
    assert err.value.status == 403
    with as_agent(tenant, "system") as conn:
        assert call(conn, "ack_alert", alert_id=alert_id, note="  ")["ack_note"] is None


# --- the command line --------------------------------------------------------------------------------


def cortex(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.output}"
    return result


def test_cortex_alerts_list_and_ack(dsn: str, tenant: Tenant, admin: Admin) -> None:
    first = raise_alert(admin, tenant, "job_parked")
    second = raise_alert(admin, tenant, "budget_exceeded")
    t = ("--tenant", tenant.slug)

    text = cortex(*t, "alerts", "list").stdout
    assert "budget_exceeded" in text and "job_parked" in text and "2 open" in text

    cortex(*t, "--agent", "luna", "alerts", "ack", str(first), code=1)
    acked = json.loads(cortex("--json", *t, "alerts", "ack", str(first), "--note", "Looked into it").stdout)
    assert (acked["acknowledged_by"], acked["ack_note"]) == ("system", "Looked into it")
    assert "acknowledged" in cortex(*t, "alerts", "ack", str(second)).stdout

    assert "no open alerts" in cortex(*t, "alerts", "list").stdout
    everything = json.loads(cortex("--json", *t, "alerts", "list", "--status", "all", "--kind", "job_parked").stdout)
    assert [a["id"] for a in everything["items"]] == [first]
    missing = cortex(*t, "alerts", "ack", "999999", code=1)
    assert "not found" in missing.stderr
