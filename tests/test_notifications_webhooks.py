"""Webhook endpoints configured without SQL: admin HTTP routes, `cortex webhooks`, and the SQL
functions behind both (admins only, validated, tenant-isolated, secrets shown once)."""

from __future__ import annotations

import json
import uuid
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
from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import AsAgent, Tenant

Admin = psycopg.Connection[dict[str, Any]]
V1 = "/api/v1"
SERVICE_KEY = "svc_test_service_key_webhooks_01"
HOOK = "https://hooks.example.com/cortex"


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The operators' service key, configured for the HTTP edge."""
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    get_settings.cache_clear()
    yield SERVICE_KEY
    get_settings.cache_clear()


def as_service(tenant: Tenant, agent: str | None = None) -> dict[str, str]:
    return {**bearer(SERVICE_KEY), "X-Tenant-ID": tenant.id, **({"X-Agent": agent} if agent else {})}


def stored(admin: Admin, tenant: Tenant) -> list[dict[str, Any]]:
    return admin.execute(
        "select id, recipient, url, secret, enabled from cortex.webhook_endpoints"
        " where tenant_id = %s order by recipient",
        (tenant.id,),
    ).fetchall()


def test_an_admin_adds_lists_and_removes_endpoints_and_sees_the_secret_once(
    client: TestClient, tenant: Tenant, admin: Admin, service: str
) -> None:
    headers = as_service(tenant)
    created = client.post(f"{V1}/webhooks", json={"recipient": "monitor", "url": HOOK}, headers=headers)
    assert created.status_code == 201
    monitor = body_of(created)
    assert (monitor["recipient"], monitor["url"], monitor["enabled"]) == ("monitor", HOOK, True)
    assert len(monitor["secret"]) == 64
    chosen = client.post(
        f"{V1}/webhooks",
        json={"recipient": "agent:jasper", "url": "http://10.0.0.5:9000/in?x=1", "secret": "s" * 20, "enabled": False},
        headers=headers,
    )
    assert chosen.status_code == 201 and body_of(chosen)["secret"] == "s" * 20
    rows = stored(admin, tenant)
    assert [(r["recipient"], r["secret"], r["enabled"]) for r in rows] == [
        ("agent:jasper", "s" * 20, False),
        ("monitor", monitor["secret"], True),
    ]

    listed = client.get(f"{V1}/webhooks", headers=headers)
    assert listed.status_code == 200
    items = body_of(listed)["items"]
    assert [(w["recipient"], w["id"]) for w in items] == [
        ("agent:jasper", body_of(chosen)["id"]),
        ("monitor", monitor["id"]),
    ]
    assert all("secret" not in w for w in items) and monitor["secret"] not in listed.text
    one = body_of(client.get(f"{V1}/webhooks?recipient=monitor", headers=headers))["items"]
    assert [w["id"] for w in one] == [monitor["id"]]

    # The delivery worker uses what was added: the monitor's messages go to the new URL, signed with its secret.
    admin.execute("select cortex.notify(%s, 'usage.daily_report', 'monitor', '{}'::jsonb)", (tenant.id,))
    claimed = admin.execute("select url, secret from cortex.claim_outbox('w1')").fetchall()
    assert claimed == [{"url": HOOK, "secret": monitor["secret"]}]

    removed = client.delete(f"{V1}/webhooks/{monitor['id']}", headers=headers)
    assert removed.status_code == 200
    assert body_of(removed) == {"id": monitor["id"], "recipient": "monitor", "removed": True}
    assert [r["recipient"] for r in stored(admin, tenant)] == ["agent:jasper"]
    again = client.delete(f"{V1}/webhooks/{monitor['id']}", headers=headers)
    assert again.status_code == 404 and error_of(again)["field"] == "webhook_id"


def test_a_recipient_has_one_endpoint_409_until_it_is_removed(client: TestClient, tenant: Tenant, service: str) -> None:
    headers = as_service(tenant)
    assert client.post(f"{V1}/webhooks", json={"recipient": "admin", "url": HOOK}, headers=headers).status_code == 201
    twice = client.post(f"{V1}/webhooks", json={"recipient": "admin", "url": HOOK + "/2"}, headers=headers)
    assert twice.status_code == 409
    assert error_of(twice)["field"] == "recipient" and "remove it first" in error_of(twice)["hint"]


def test_only_admins_manage_endpoints_403_otherwise(
    client: TestClient, tenant: Tenant, admin: Admin, service: str
) -> None:
    existing = body_of(
        client.post(f"{V1}/webhooks", json={"recipient": "monitor", "url": HOOK}, headers=as_service(tenant))
    )
    callers = [bearer(tenant.keys["luna"]), bearer(tenant.keys["helios"]), as_service(tenant, "mia")]
    for headers in callers:
        for method, path, body in (
            ("GET", "/webhooks", None),
            ("POST", "/webhooks", {"recipient": "agent:luna", "url": HOOK}),
            ("DELETE", f"/webhooks/{existing['id']}", None),
        ):
            response = client.request(method, f"{V1}{path}", json=body, headers=headers)
            assert response.status_code == 403, (method, path, headers)
            assert error_of(response)["sqlstate"] == "42501"
    assert [r["recipient"] for r in stored(admin, tenant)] == ["monitor"]


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/x",
        "javascript:alert(1)",
        "hooks.example.com/cortex",
        "https://",
        "https:///path",
        "http://exa mple.com/",
        "https://user:pass@hooks.example.com/",
        "https://hooks.example.com/\x01",
        "https://hooks.example.com/" + "a" * 2000,
    ],
)
def test_a_bad_url_is_422_naming_the_field_over_http_and_in_sql(
    client: TestClient, tenant: Tenant, admin: Admin, service: str, as_agent: AsAgent, url: str
) -> None:
    response = client.post(f"{V1}/webhooks", json={"recipient": "monitor", "url": url}, headers=as_service(tenant))
    assert response.status_code == 422
    assert error_of(response)["field"] == "url"
    with pytest.raises(CortexError) as err, as_agent(tenant, "system") as conn:
        call(conn, "add_webhook", recipient="monitor", url=url)
    assert (err.value.status, err.value.field) == (422, "url")
    assert stored(admin, tenant) == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"recipient": "everyone", "url": HOOK}, "recipient"),
        ({"recipient": "agent:Luna", "url": HOOK}, "recipient"),
        ({"recipient": "agent:ghost", "url": HOOK}, "recipient"),  # no such agent (checked in SQL)
        ({"recipient": "human:", "url": HOOK}, "recipient"),
        ({"recipient": "monitor", "url": HOOK, "secret": "short"}, "secret"),
        ({"recipient": "monitor", "url": HOOK, "extra": 1}, "extra"),
        ({"url": HOOK}, "recipient"),
    ],
)
def test_bad_recipients_and_secrets_are_422_naming_the_field(
    client: TestClient, tenant: Tenant, admin: Admin, service: str, body: dict[str, Any], field: str
) -> None:
    response = client.post(f"{V1}/webhooks", json=body, headers=as_service(tenant))
    assert response.status_code == 422, body
    assert error_of(response)["field"] == field
    assert stored(admin, tenant) == []


def test_unknown_or_malformed_ids_are_404_and_422(client: TestClient, tenant: Tenant, service: str) -> None:
    unknown = client.delete(f"{V1}/webhooks/{uuid.uuid4()}", headers=as_service(tenant))
    assert unknown.status_code == 404
    malformed = client.delete(f"{V1}/webhooks/not-a-uuid", headers=as_service(tenant))
    assert malformed.status_code == 422 and error_of(malformed)["field"] == "id"


def test_another_tenant_sees_and_removes_none_of_the_endpoints(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, admin: Admin, service: str, as_agent: AsAgent
) -> None:
    mine = body_of(
        client.post(f"{V1}/webhooks", json={"recipient": "monitor", "url": HOOK}, headers=as_service(tenant))
    )
    assert body_of(client.get(f"{V1}/webhooks", headers=as_service(other_tenant)))["items"] == []
    assert client.delete(f"{V1}/webhooks/{mine['id']}", headers=as_service(other_tenant)).status_code == 404
    # The other tenant may add its own monitor endpoint: recipients are per tenant.
    theirs = client.post(f"{V1}/webhooks", json={"recipient": "monitor", "url": HOOK}, headers=as_service(other_tenant))
    assert theirs.status_code == 201
    assert [r["id"] for r in stored(admin, tenant)] == [uuid.UUID(mine["id"])]
    # The PostgREST path: the table shows another tenant nothing, and an admin never the secret column.
    with as_agent(other_tenant, "system") as conn:
        rows = conn.execute("select id, recipient from cortex.webhook_endpoints").fetchall()
        assert rows == [(uuid.UUID(body_of(theirs)["id"]), "monitor")]
        assert conn.execute("delete from cortex.webhook_endpoints where id = %s", (mine["id"],)).rowcount == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "system") as conn:
        conn.execute("select secret from cortex.webhook_endpoints")
    with as_agent(tenant, "luna") as conn:  # not an admin: no rows at all
        assert conn.execute("select count(*) from cortex.webhook_endpoints").fetchone() == (0,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute(
            "insert into cortex.webhook_endpoints (tenant_id, recipient, url) values (%s, 'agent:luna', %s)",
            (tenant.id, HOOK),
        )


# --- the command line --------------------------------------------------------------------------------


def cortex(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.output}"
    return result


def test_cortex_webhooks_add_list_remove(dsn: str, tenant: Tenant, admin: Admin) -> None:
    t = ("--tenant", tenant.slug)
    added = cortex(*t, "webhooks", "add", "monitor", HOOK).stdout
    [row] = stored(admin, tenant)
    assert f"signing secret (shown once): {row['secret']}" in added and str(row["id"]) in added
    created = json.loads(cortex("--json", *t, "webhooks", "add", "agent:mia", HOOK + "/mia", "--disabled").stdout)
    assert created["enabled"] is False and len(created["secret"]) == 64

    listed = cortex(*t, "webhooks", "list").stdout
    assert "agent:mia" in listed and "monitor" in listed and row["secret"] not in listed
    as_list = json.loads(cortex("--json", *t, "webhooks", "list", "--recipient", "monitor").stdout)
    assert [w["recipient"] for w in as_list["items"]] == ["monitor"]

    refused = cortex(*t, "--agent", "luna", "webhooks", "add", "admin", HOOK, code=1)
    assert "may not manage webhook endpoints" in refused.stderr
    bad = cortex(*t, "webhooks", "add", "admin", "ftp://x", code=1)
    assert "field: url" in bad.stderr

    assert "removed webhook" in cortex(*t, "webhooks", "remove", str(row["id"])).stdout
    assert "not found" in cortex(*t, "webhooks", "remove", str(row["id"]), code=1).stderr
    assert [r["recipient"] for r in stored(admin, tenant)] == ["agent:mia"]
