"""The HTTP API through the real entry point: functions-framework's ASGI app built from
functions/main.py, driven with Starlette's test client against a real database (and, once, the real
`functions-framework` server over a socket)."""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import httpx
import jwt
import psycopg
import pytest
from httpx import Response as HttpResponse
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cortex import app as api
from cortex import auth, health, migrate, routing
from cortex import db as cortex_db
from cortex.config import get_settings
from cortex.contacts.models import Contact, ContactCreated, ContactList, Stage
from cortex.context.models import ContextRefresh, WorkingContext
from cortex.health import HealthDeep, HealthReady
from cortex.interactions.models import InteractionList, InteractionLogged, InteractionType
from cortex.llm import Intent, Sentiment
from tests.api_helpers import bearer, body_of, error_of
from tests.conftest import Tenant, dsn_for, free_port, running_server
from tests.fake_anthropic import FakeAnthropic

ROOT = Path(__file__).resolve().parents[1]
MAIN = ROOT / "functions" / "main.py"
V1 = "/api/v1"
JWT_SECRET = "test-jwt-secret-that-is-long-enough-for-hs256"
SERVICE_KEY = "svc_test_service_key_0123456789"
EMAIL = (
    "Hi Luna, our order #1234 of 500 cups arrived two weeks late and half the lids are cracked. "
    "This is unacceptable, please refund the lids or we will cancel our subscription."
)

Admin = psycopg.Connection[dict[str, Any]]


def counts(admin: Admin) -> dict[str, int]:
    row = admin.execute(
        "select (select count(*) from cortex.contacts) as contacts,"
        " (select count(*) from cortex.interactions) as interactions,"
        " (select count(*) from cortex.token_usage) as token_usage,"
        " (select count(*) from cortex.contact_context) as contexts,"
        " (select count(*) from cortex.handoff_events) as handoffs,"
        " (select count(*) from cortex.outbox) as outbox,"
        " (select count(*) from cortex.jobs) as jobs"
    ).fetchone()
    assert row is not None
    return {k: int(v) for k, v in row.items()}


def create_contact(client: TestClient, key: str, **fields: Any) -> dict[str, Any]:
    payload = {"email": "john@acme.com", "name": "John Smith", "company_name": "Acme Corp", **fields}
    response = client.post(f"{V1}/contacts", json=payload, headers=bearer(key))
    assert response.status_code in (200, 201), response.json()
    result: dict[str, Any] = response.json()
    return result


def log(client: TestClient, key: str, contact_id: str, **fields: Any) -> HttpResponse:
    payload = {
        "contact_id": contact_id,
        "type": "email_received",
        "direction": "inbound",
        "subject": "Late order",
        "raw_content": EMAIL,
        **fields,
    }
    return client.post(f"{V1}/interactions", json=payload, headers=bearer(key))


def make_jwt(claims: dict[str, Any], secret: str = JWT_SECRET, expires_in: int = 600) -> str:
    payload = {"exp": int(time.time()) + expires_in, "role": "authenticated", **claims}
    return jwt.encode(payload, secret, algorithm="HS256")


# --- health and plumbing ----------------------------------------------------------------------


def test_health_answers_without_credentials_at_the_root_and_under_api_v1(client: TestClient) -> None:
    for path in ("/health", f"{V1}/health"):
        response = client.get(path)
        assert response.status_code == 200
        assert body_of(response)["status"] == "ok"


def test_ready_reports_every_migration_applied(client: TestClient) -> None:
    response = client.get("/health/ready")
    body = HealthReady.model_validate(body_of(response))
    assert response.status_code == 200 and body.status == "ok" and body.database == "ok"
    assert body.migrations is not None
    assert body.migrations.pending == []
    assert body.migrations.applied == body.migrations.expected == len(migrate.list_migrations())


def test_ready_and_deep_answer_503_when_the_database_is_unreachable(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    cortex_db.close_pool()
    monkeypatch.setenv("DATABASE_URL", dsn_for(f"cortex_absent_{uuid.uuid4().hex[:8]}"))
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    monkeypatch.setattr(health, "READY_TIMEOUT_SECONDS", 0.5)
    get_settings.cache_clear()
    operator = {**bearer(SERVICE_KEY), "X-Tenant-ID": str(uuid.uuid4())}
    for path, headers in (("/health/ready", {}), ("/health/deep", operator)):
        response = client.get(path, headers=headers)
        assert response.status_code == 503
        body = body_of(response)
        assert body["status"] == "unavailable" and body["database"] == "unreachable"
        assert "error" in body
    # Liveness does not depend on the database.
    assert client.get("/health").status_code == 200


def test_an_unreachable_database_fails_fast_with_503_while_health_still_answers(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://cortex:cortex@127.0.0.1:1/cortex")
    monkeypatch.setenv("CORTEX_POOL_TIMEOUT", "1")
    get_settings.cache_clear()
    client.portal.call(cortex_db.aclose_pool)  # type: ignore[union-attr]
    auth.clear_key_cache()
    response = client.get(f"{V1}/contacts", headers=bearer(tenant.keys["luna"]))
    assert response.status_code == 503
    assert error_of(response)["code"] == "database_unavailable"
    assert client.get("/health").status_code == 200


@pytest.fixture
def operator(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The service key's headers for the first tenant, and an empty deep-check cache."""
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    get_settings.cache_clear()
    health.clear_deep_cache()
    yield {**bearer(SERVICE_KEY), "X-Tenant-ID": tenant.id}
    health.clear_deep_cache()


def test_deep_reports_the_local_model_when_no_claude_key_is_set(client: TestClient, operator: dict[str, str]) -> None:
    response = client.get("/health/deep", headers=operator)
    body = HealthDeep.model_validate(body_of(response))
    assert response.status_code == 200
    assert body.llm == "local" and body.llm_model == "local-summariser-v1"


def test_deep_asks_claude_for_one_token_and_answers_503_when_it_fails(
    client: TestClient, claude: FakeAnthropic, operator: dict[str, str]
) -> None:
    ok = client.get("/health/deep", headers=operator)
    assert ok.status_code == 200
    assert body_of(ok)["llm"] == "ok"
    assert claude.requests[0]["max_tokens"] == 1
    assert claude.requests[0]["model"] == get_settings().summary_model
    claude.always_fail = True
    health.clear_deep_cache()
    failed = client.get("/health/deep", headers=operator)
    assert failed.status_code == 503
    body = body_of(failed)
    assert body["llm"] == "error" and "529" in body["llm_error"]
    assert body["database"] == "ok"


def test_deep_needs_the_service_key_or_an_admin_and_makes_no_model_call_otherwise(
    client: TestClient, claude: FakeAnthropic, tenant: Tenant, operator: dict[str, str]
) -> None:
    anonymous = client.get("/health/deep")
    assert anonymous.status_code == 401
    assert client.get("/api/v1/health/deep").status_code == 401
    agent = client.get("/health/deep", headers=bearer(tenant.keys["luna"]))
    assert agent.status_code == 403 and error_of(agent)["code"] == "insufficient_privilege"
    assert claude.requests == []


def test_deep_records_its_call_for_the_caller_and_answers_from_a_cache_for_a_minute(
    client: TestClient, claude: FakeAnthropic, tenant: Tenant, operator: dict[str, str], admin: Admin
) -> None:
    for _ in range(3):
        response = client.get("/health/deep", headers=operator)
        assert response.status_code == 200 and body_of(response)["llm"] == "ok"
    assert len(claude.requests) == 1
    assert body_of(response)["llm_cached"] is True
    rows = admin.execute(
        "select agent, model, operation, input_tokens, output_tokens from cortex.token_usage where tenant_id = %s",
        (tenant.id,),
    ).fetchall()
    assert len(rows) == 1
    assert rows[0]["agent"] == "system" and rows[0]["operation"] == "health_check"
    assert rows[0]["model"] == get_settings().summary_model and rows[0]["output_tokens"] >= 1


def test_request_id_is_echoed_when_given_and_generated_otherwise(client: TestClient) -> None:
    echoed = client.get("/health", headers={"X-Request-ID": "req-42"})
    assert echoed.headers["X-Request-ID"] == "req-42"
    generated = client.get("/health", headers={"X-Request-ID": "bad id with spaces"})
    assert generated.headers["X-Request-ID"] != "bad id with spaces"
    assert len(generated.headers["X-Request-ID"]) == 32
    err = client.get(f"{V1}/contacts", headers={"X-Request-ID": "req-43"})
    assert error_of(err)["request_id"] == "req-43"


def test_unknown_route_is_404_and_wrong_method_is_405_both_json(client: TestClient, tenant: Tenant) -> None:
    missing = client.get(f"{V1}/nothing-here", headers=bearer(tenant.keys["luna"]))
    assert missing.status_code == 404
    assert error_of(missing)["code"] == "route_not_found"
    wrong = client.delete(f"{V1}/contacts", headers=bearer(tenant.keys["luna"]))
    assert wrong.status_code == 405
    assert error_of(wrong)["code"] == "method_not_allowed"
    assert wrong.headers["Allow"] == "GET, POST"


def test_an_unexpected_failure_is_a_generic_500_and_is_logged(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def explode(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(cortex_db, "_acall_once", explode)
    response = client.get(f"{V1}/contacts/{uuid.uuid4()}", headers=bearer(tenant.keys["luna"]))
    assert response.status_code == 500
    error = error_of(response)
    assert error["code"] == "internal_error" and "secret" not in response.text
    assert any(r.exc_info and "secret internals" in str(r.exc_info[1]) for r in caplog.records)


# --- the five-minute tour ---------------------------------------------------------------------


def test_five_minute_tour_create_log_read_context_and_refresh(client: TestClient, tenant: Tenant, admin: Admin) -> None:
    key = bearer(tenant.keys["luna"])
    created = client.post(
        f"{V1}/contacts",
        headers=key,
        json={
            "email": "John@Acme.com",
            "name": "John Smith",
            "company_name": "Acme Corp",
            "stage": "customer",
            "source": "anna_outbound",
            "tags": ["manufacturing", "midwest"],
            "custom_fields": {"industry": "manufacturing", "company_size": "50-200"},
        },
    )
    assert created.status_code == 201
    contact = ContactCreated.model_validate(body_of(created))
    assert contact.created is True and contact.email == "john@acme.com"
    cid = str(contact.id)

    logged = log(client, tenant.keys["luna"], cid, external_id="email-5678")
    assert logged.status_code == 201
    interaction = InteractionLogged.model_validate(body_of(logged))
    assert interaction.summary and interaction.key_points
    assert interaction.sentiment in ("negative", "escalation")
    assert interaction.intent in ("complaint", "churn_risk")
    assert interaction.token_usage is not None and interaction.token_usage.input_tokens > 0
    assert interaction.token_usage.model == "local-summariser-v1"
    assert interaction.context_refresh_triggered is True
    assert admin.execute("select count(*) as n from cortex.token_usage").fetchone() == {"n": 1}

    for level in (0, 1, 2, 3):
        response = client.get(f"{V1}/context/{cid}?level={level}", headers=key)
        assert response.status_code == 200
        ctx = WorkingContext.model_validate(body_of(response))
        assert ctx.level == level and ctx.token_count <= ctx.token_budget
        assert (ctx.context is not None) == (level >= 1)
        assert (ctx.recent_interactions is not None) == (level >= 2)
    assert ctx.recent_interactions and ctx.recent_interactions[0].id == interaction.id

    refreshed = client.post(f"{V1}/context/{cid}/refresh", headers=key)
    assert refreshed.status_code == 200
    refresh = ContextRefresh.model_validate(body_of(refreshed))
    assert refresh.regenerated is True and refresh.new_generated_at is not None
    assert refresh.token_count is not None and refresh.token_count > 0

    fresh = WorkingContext.model_validate(body_of(client.get(f"{V1}/context/{cid}", headers=key)))
    assert fresh.is_stale is False and fresh.context is not None and fresh.context.summary
    assert fresh.header.name == "John Smith" and fresh.header.stage == "customer"


def test_get_context_with_refresh_true_regenerates_before_answering(client: TestClient, tenant: Tenant) -> None:
    key = tenant.keys["mia"]
    cid = create_contact(client, key)["id"]
    assert log(client, key, cid).status_code == 201
    response = client.get(f"{V1}/context/{cid}?level=1&refresh=true", headers=bearer(key))
    ctx = WorkingContext.model_validate(body_of(response))
    assert response.status_code == 200
    assert ctx.is_stale is False and ctx.generated_at is not None


# --- contacts and interactions ----------------------------------------------------------------


def test_posting_the_same_email_again_updates_with_200(client: TestClient, tenant: Tenant) -> None:
    first = create_contact(client, tenant.keys["luna"], tags=["a"])
    again = client.post(
        f"{V1}/contacts",
        headers=bearer(tenant.keys["luna"]),
        json={"email": "JOHN@acme.com ", "stage": "qualified", "tags": ["b"]},
    )
    assert again.status_code == 200
    body = ContactCreated.model_validate(body_of(again))
    assert body.created is False and str(body.id) == first["id"]
    assert body.tags == ["a", "b"] and body.stage == "qualified" and body.name == "John Smith"


def test_get_list_and_patch_contacts(client: TestClient, tenant: Tenant) -> None:
    key = bearer(tenant.keys["luna"])
    john = create_contact(client, tenant.keys["luna"], stage="customer", tags=["vip"], owner_agent="luna")
    create_contact(
        client,
        tenant.keys["luna"],
        email="jane@globex.com",
        name="Jane Doe",
        company_name="Globex",
        stage="prospect",
    )

    got = client.get(f"{V1}/contacts/{john['id']}", headers=key)
    assert got.status_code == 200
    assert Contact.model_validate(body_of(got)).email == "john@acme.com"

    by_stage = ContactList.model_validate(body_of(client.get(f"{V1}/contacts?stage=customer", headers=key)))
    assert [c.email for c in by_stage.items] == ["john@acme.com"]
    by_tag = ContactList.model_validate(body_of(client.get(f"{V1}/contacts?tag=vip&owner_agent=luna", headers=key)))
    assert [c.email for c in by_tag.items] == ["john@acme.com"]
    fuzzy = ContactList.model_validate(body_of(client.get(f"{V1}/contacts?search=jhon%20smith", headers=key)))
    assert fuzzy.items and fuzzy.items[0].email == "john@acme.com" and fuzzy.items[0].score is not None
    page = ContactList.model_validate(body_of(client.get(f"{V1}/contacts?limit=1&offset=1", headers=key)))
    assert len(page.items) == 1 and page.limit == 1 and page.offset == 1

    patched = client.patch(
        f"{V1}/contacts/{john['id']}",
        headers=key,
        json={"phone": "+1 (612) 555-0100", "company_name": None, "tags": ["vip", "cups"]},
    )
    assert patched.status_code == 200
    after = Contact.model_validate(body_of(patched))
    assert after.phone == "+16125550100" and after.company_name is None  # stored as E.164
    assert after.name == "John Smith" and sorted(after.tags) == ["cups", "vip"]


def test_patching_to_an_email_already_taken_is_409(client: TestClient, tenant: Tenant) -> None:
    john = create_contact(client, tenant.keys["luna"])
    create_contact(client, tenant.keys["luna"], email="jane@acme.com")
    response = client.patch(
        f"{V1}/contacts/{john['id']}", headers=bearer(tenant.keys["luna"]), json={"email": "jane@acme.com"}
    )
    assert response.status_code == 409
    assert error_of(response)["sqlstate"] == "23505"


def test_list_interactions_filters_and_hides_raw_content_unless_asked(client: TestClient, tenant: Tenant) -> None:
    key = tenant.keys["luna"]
    cid = create_contact(client, key)["id"]
    assert log(client, key, cid).status_code == 201
    assert (
        log(
            client,
            key,
            cid,
            type="note",
            summary="Called back, all fine",
            sentiment="positive",
            raw_content=None,
        ).status_code
        == 201
    )

    everything = client.get(f"{V1}/interactions?contact_id={cid}", headers=bearer(key))
    listed = InteractionList.model_validate(body_of(everything))
    assert [i.type for i in listed.items] == ["note", "email_received"]
    assert all("raw_content" not in i.model_dump(exclude_unset=True) for i in listed.items)

    notes = InteractionList.model_validate(
        body_of(client.get(f"{V1}/interactions?contact_id={cid}&type=note&agent=luna&limit=5", headers=bearer(key)))
    )
    assert [i.summary for i in notes.items] == ["Called back, all fine"] and notes.limit == 5

    raw = InteractionList.model_validate(
        body_of(
            client.get(
                f"{V1}/interactions?contact_id={cid}&type=email_received&include_raw=true",
                headers=bearer(key),
            )
        )
    )
    assert raw.items[0].raw_content == EMAIL

    future = InteractionList.model_validate(
        body_of(client.get(f"{V1}/interactions?contact_id={cid}&since=2999-01-01T00:00:00Z", headers=bearer(key)))
    )
    assert future.items == []


def test_logging_the_same_external_id_twice_answers_200_with_the_first_row(
    client: TestClient, tenant: Tenant, admin: Admin
) -> None:
    key = tenant.keys["luna"]
    cid = create_contact(client, key)["id"]
    first = log(client, key, cid, external_id="email-1")
    second = log(client, key, cid, external_id="email-1")
    assert first.status_code == 201 and second.status_code == 200
    assert body_of(second)["duplicate"] is True and body_of(second)["id"] == body_of(first)["id"]
    assert counts(admin)["interactions"] == 1


def test_an_unknown_contact_is_404_with_a_hint_to_create_it(client: TestClient, tenant: Tenant) -> None:
    response = client.get(f"{V1}/context/{uuid.uuid4()}", headers=bearer(tenant.keys["luna"]))
    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "not_found" and error["field"] == "contact_id"
    assert "POST /api/v1/contacts" in error["hint"]


# --- authentication ---------------------------------------------------------------------------


def test_a_jwt_with_top_level_or_app_metadata_claims_authenticates(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_JWT_SECRET", JWT_SECRET)
    get_settings.cache_clear()
    top = make_jwt({"tenant_id": tenant.id, "agent": "luna", "aud": "authenticated"})
    created = client.post(f"{V1}/contacts", headers=bearer(top), json={"email": "jwt@acme.com"})
    assert created.status_code == 201
    nested = make_jwt({"sub": "user-1", "app_metadata": {"tenant_id": tenant.id, "agent": "mia"}})
    got = client.get(f"{V1}/contacts/{body_of(created)['id']}", headers=bearer(nested))
    assert got.status_code == 200 and body_of(got)["email"] == "jwt@acme.com"


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("expired", "expired"),
        ("wrong_secret", "invalid JWT"),
        ("wrong_audience", "audience"),
        ("no_tenant", "tenant_id"),
        ("no_agent", "agent"),
        ("no_expiry", "exp"),
        ("anon_role", "role 'anon'"),
        ("service_role", "role 'service_role'"),
        ("no_role", "no role claim"),
    ],
)
def test_a_bad_jwt_is_401_saying_why(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, case: str, message: str
) -> None:
    monkeypatch.setenv("CORTEX_JWT_SECRET", JWT_SECRET)
    get_settings.cache_clear()
    claims: dict[str, Any] = {"tenant_id": tenant.id, "agent": "luna"}
    token = {
        "expired": lambda: make_jwt(claims, expires_in=-60),
        "wrong_secret": lambda: make_jwt(claims, secret="another-secret-that-is-also-long-enough"),
        "wrong_audience": lambda: make_jwt({**claims, "aud": "anon"}),
        "no_tenant": lambda: make_jwt({"agent": "luna"}),
        "no_agent": lambda: make_jwt({"tenant_id": tenant.id}),
        "no_expiry": lambda: jwt.encode(claims, JWT_SECRET, algorithm="HS256"),
        "anon_role": lambda: make_jwt({**claims, "role": "anon"}),
        "service_role": lambda: make_jwt({**claims, "role": "service_role"}),
        "no_role": lambda: jwt.encode({**claims, "exp": int(time.time()) + 600}, JWT_SECRET, algorithm="HS256"),
    }[case]()
    response = client.get(f"{V1}/contacts", headers=bearer(token))
    assert response.status_code == 401
    error = error_of(response)
    assert error["code"] == "unauthorized" and message in error["message"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_jwt_is_refused_when_no_secret_is_configured(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CORTEX_JWT_SECRET", raising=False)
    monkeypatch.delenv("SUPABASE_JWT_SECRET", raising=False)
    get_settings.cache_clear()
    response = client.get(f"{V1}/contacts", headers=bearer(make_jwt({"tenant_id": tenant.id, "agent": "luna"})))
    assert response.status_code == 401
    assert "not configured" in error_of(response)["message"]


def test_the_service_key_acts_in_the_tenant_named_by_x_tenant_id(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    get_settings.cache_clear()
    headers = {**bearer(SERVICE_KEY), "X-Tenant-ID": tenant.id}
    created = client.post(f"{V1}/contacts", headers=headers, json={"email": "ops@acme.com"})
    assert created.status_code == 201
    cid = body_of(created)["id"]
    as_system = client.post(
        f"{V1}/interactions", headers=headers, json={"contact_id": cid, "type": "note", "summary": "Imported"}
    )
    assert as_system.status_code == 201 and body_of(as_system)["agent"] == "system"
    as_luna = client.post(
        f"{V1}/interactions",
        headers={**headers, "X-Agent": "luna"},
        json={"contact_id": cid, "type": "note", "summary": "Imported for Luna"},
    )
    assert body_of(as_luna)["agent"] == "luna"
    owner = admin.execute("select tenant_id::text as t from cortex.contacts where id = %s", (cid,)).fetchone()
    assert owner == {"t": tenant.id}
    elsewhere = client.get(f"{V1}/contacts/{cid}", headers={**bearer(SERVICE_KEY), "X-Tenant-ID": other_tenant.id})
    assert elsewhere.status_code == 404


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({}, "X-Tenant-ID"),
        ({"X-Tenant-ID": "acme"}, "X-Tenant-ID"),
        ({"X-Tenant-ID": "00000000-0000-0000-0000-000000000001", "X-Agent": "Not An Agent"}, "X-Agent"),
    ],
)
def test_the_service_key_needs_a_uuid_x_tenant_id_and_a_valid_x_agent(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, extra: dict[str, str], field: str
) -> None:
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    get_settings.cache_clear()
    response = client.get(f"{V1}/contacts", headers={**bearer(SERVICE_KEY), **extra})
    assert response.status_code == 422
    assert error_of(response)["field"] == field


def test_x_tenant_id_with_anything_but_the_service_key_is_401(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_SERVICE_KEY", SERVICE_KEY)
    get_settings.cache_clear()
    for headers in (
        {**bearer(tenant.keys["luna"]), "X-Tenant-ID": other_tenant.id},
        {"X-Tenant-ID": tenant.id},
    ):
        response = client.get(f"{V1}/contacts", headers=headers)
        assert response.status_code == 401
        assert error_of(response)["message"] == "X-Tenant-ID is accepted only with the service key"


@pytest.mark.parametrize(
    "authorization",
    ["", "Basic dXNlcjpwYXNz", "Bearer ", "Bearer ctx_000000000000_not-a-real-key", "Bearer something-else"],
)
def test_missing_malformed_or_unknown_credentials_are_401(client: TestClient, authorization: str) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = client.get(f"{V1}/contacts", headers=headers)
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthorized"


def test_a_revoked_key_is_401_once_its_cache_entry_expires(
    client: TestClient, tenant: Tenant, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tenant.keys["jasper"]
    assert client.get(f"{V1}/contacts", headers=bearer(key)).status_code == 200
    prefix = key.split("_")[1]
    assert admin.execute("select cortex.revoke_agent_key(%s) as r", (prefix,)).fetchone() == {"r": True}
    # Documented: a positive lookup is cached for 30 s, so revocation takes effect within that.
    assert client.get(f"{V1}/contacts", headers=bearer(key)).status_code == 200
    start = time.monotonic()
    monkeypatch.setattr(auth, "_now", lambda: start + auth.KEY_CACHE_SECONDS + 1)
    response = client.get(f"{V1}/contacts", headers=bearer(key))
    assert response.status_code == 401
    assert "revoked" in error_of(response)["message"]


def test_a_key_revoked_before_use_is_401_at_once(client: TestClient, tenant: Tenant, admin: Admin) -> None:
    key = tenant.keys["anna"]
    admin.execute("select cortex.revoke_agent_key(%s)", (key.split("_")[1],))
    assert client.get(f"{V1}/contacts", headers=bearer(key)).status_code == 401


def test_agent_key_lookups_are_cached_so_a_hot_path_costs_no_extra_round_trip(
    client: TestClient, tenant: Tenant, admin: Admin
) -> None:
    key = tenant.keys["luna"]
    assert client.get(f"{V1}/contacts", headers=bearer(key)).status_code == 200
    admin.execute("update cortex.agent_keys set last_used_at = null")
    assert client.get(f"{V1}/contacts", headers=bearer(key)).status_code == 200
    # A second lookup would have stamped last_used_at again.
    assert admin.execute("select count(*) as n from cortex.agent_keys where last_used_at is not null").fetchone() == {
        "n": 0
    }


# --- authorisation and isolation --------------------------------------------------------------


def test_read_only_helios_can_read_but_not_write(client: TestClient, tenant: Tenant, admin: Admin) -> None:
    cid = create_contact(client, tenant.keys["luna"])["id"]
    helios = bearer(tenant.keys["helios"])
    before = counts(admin)
    writes = [
        client.post(f"{V1}/contacts", headers=helios, json={"email": "new@acme.com"}),
        client.patch(f"{V1}/contacts/{cid}", headers=helios, json={"phone": "+16125550100"}),
        client.post(
            f"{V1}/interactions",
            headers=helios,
            json={"contact_id": cid, "type": "note", "raw_content": "hello"},
        ),
        client.post(f"{V1}/context/{cid}/refresh", headers=helios),
    ]
    for response in writes:
        assert response.status_code == 403, response.json()
        assert error_of(response)["sqlstate"] == "42501"
    assert counts(admin) == before
    for path in (
        f"/contacts/{cid}",
        "/contacts",
        f"/interactions?contact_id={cid}",
        f"/context/{cid}?level=2",
    ):
        assert client.get(f"{V1}{path}", headers=helios).status_code == 200


def test_another_tenants_key_cannot_see_or_touch_a_contact(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, admin: Admin
) -> None:
    cid = create_contact(client, tenant.keys["luna"])["id"]
    intruder = bearer(other_tenant.keys["luna"])
    before = counts(admin)
    attempts = [
        client.get(f"{V1}/contacts/{cid}", headers=intruder),
        client.patch(f"{V1}/contacts/{cid}", headers=intruder, json={"name": "Hijacked"}),
        client.post(
            f"{V1}/interactions",
            headers=intruder,
            json={"contact_id": cid, "type": "note", "raw_content": "sneaky"},
        ),
        client.get(f"{V1}/interactions?contact_id={cid}", headers=intruder),
        client.get(f"{V1}/context/{cid}", headers=intruder),
        client.post(f"{V1}/context/{cid}/refresh", headers=intruder),
    ]
    for response in attempts:
        assert response.status_code == 404, response.json()
        assert error_of(response)["code"] == "not_found"
    listed = body_of(client.get(f"{V1}/contacts", headers=intruder))
    assert listed["items"] == []
    assert counts(admin) == before
    name = admin.execute("select name from cortex.contacts where id = %s", (cid,)).fetchone()
    assert name == {"name": "John Smith"}


# --- bad input --------------------------------------------------------------------------------

CONTACT = "{contact}"
BAD_REQUESTS: list[tuple[str, str, str, Any, int, str]] = [
    # (name, method, path, json body or raw bytes, status, field)
    ("malformed json", "POST", "/contacts", b'{"email": "a@b.co",', 400, "body"),
    ("empty body", "POST", "/contacts", b"", 400, "body"),
    (
        "NaN is not json",
        "POST",
        "/contacts",
        b'{"email": "a@b.co", "custom_fields": {"x": NaN}}',
        400,
        "body",
    ),
    ("body not an object", "POST", "/contacts", ["a@b.co"], 422, "body"),
    ("email missing", "POST", "/contacts", {"name": "No Email"}, 422, "email"),
    ("email invalid", "POST", "/contacts", {"email": "not-an-email"}, 422, "email"),
    ("email wrong type", "POST", "/contacts", {"email": 42}, 422, "email"),
    ("stage unknown", "POST", "/contacts", {"email": "a@b.co", "stage": "alien"}, 422, "stage"),
    ("unknown field", "POST", "/contacts", {"email": "a@b.co", "nickname": "J"}, 422, "nickname"),
    (
        "owner not an agent",
        "POST",
        "/contacts",
        {"email": "a@b.co", "owner_agent": "nobody"},
        422,
        "owner_agent",
    ),
    ("name too long", "POST", "/contacts", {"email": "a@b.co", "name": "x" * 501}, 422, "name"),
    ("phone too long", "POST", "/contacts", {"email": "a@b.co", "phone": "1" * 51}, 422, "phone"),
    ("tag not a string", "POST", "/contacts", {"email": "a@b.co", "tags": ["ok", 3]}, 422, "tags.1"),
    (
        "too many tags",
        "POST",
        "/contacts",
        {"email": "a@b.co", "tags": [str(i) for i in range(101)]},
        422,
        "tags",
    ),
    (
        "custom_fields list",
        "POST",
        "/contacts",
        {"email": "a@b.co", "custom_fields": ["x"]},
        422,
        "custom_fields",
    ),
    ("patch unknown key", "PATCH", f"/contacts/{CONTACT}", {"nickname": "J"}, 422, "nickname"),
    ("patch stage null", "PATCH", f"/contacts/{CONTACT}", {"stage": None}, 422, "stage"),
    ("patch email invalid", "PATCH", f"/contacts/{CONTACT}", {"email": "nope"}, 422, "email"),
    ("patch malformed", "PATCH", f"/contacts/{CONTACT}", b"{nope", 400, "body"),
    ("patch bad id", "PATCH", "/contacts/123", {"name": "x"}, 422, "id"),
    ("get bad id", "GET", "/contacts/not-a-uuid", None, 422, "id"),
    ("list limit", "GET", "/contacts?limit=500", None, 422, "limit"),
    ("list offset", "GET", "/contacts?offset=-1", None, 422, "offset"),
    ("list stage", "GET", "/contacts?stage=alien", None, 422, "stage"),
    ("list unknown param", "GET", "/contacts?colour=red", None, 422, "colour"),
    ("log contact_id", "POST", "/interactions", {"contact_id": "nope", "type": "note"}, 422, "contact_id"),
    ("log type missing", "POST", "/interactions", {"contact_id": CONTACT}, 422, "type"),
    ("log type unknown", "POST", "/interactions", {"contact_id": CONTACT, "type": "fax"}, 422, "type"),
    (
        "log direction",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "call", "direction": "up"},
        422,
        "direction",
    ),
    (
        "log sentiment",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "summary": "s", "sentiment": "angry"},
        422,
        "sentiment",
    ),
    (
        "log metadata",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "metadata": [1]},
        422,
        "metadata",
    ),
    (
        "log subject too long",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "subject": "s" * 1001},
        422,
        "subject",
    ),
    (
        "log as another agent",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "agent": "mia", "raw_content": "hi"},
        422,
        "agent",
    ),
    (
        "log human without id",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "agent": "human", "raw_content": "hi"},
        422,
        "human_id",
    ),
    (
        "log unknown contact",
        "POST",
        "/interactions",
        {"contact_id": str(uuid.UUID(int=7)), "type": "note", "raw_content": "hi"},
        404,
        "contact_id",
    ),
    ("interactions no contact", "GET", "/interactions", None, 422, "contact_id"),
    ("interactions limit", "GET", f"/interactions?contact_id={CONTACT}&limit=500", None, 422, "limit"),
    ("interactions since", "GET", f"/interactions?contact_id={CONTACT}&since=yesterday", None, 422, "since"),
    ("interactions type", "GET", f"/interactions?contact_id={CONTACT}&type=fax", None, 422, "type"),
    (
        "interactions include_raw",
        "GET",
        f"/interactions?contact_id={CONTACT}&include_raw=maybe",
        None,
        422,
        "include_raw",
    ),
    ("context level 7", "GET", f"/context/{CONTACT}?level=7", None, 422, "level"),
    ("context level text", "GET", f"/context/{CONTACT}?level=high", None, 422, "level"),
    ("context refresh flag", "GET", f"/context/{CONTACT}?refresh=perhaps", None, 422, "refresh"),
    ("context bad id", "GET", "/context/42", None, 422, "contact_id"),
    ("refresh bad id", "POST", "/context/42/refresh", None, 422, "contact_id"),
    ("refresh unknown contact", "POST", f"/context/{uuid.UUID(int=9)}/refresh", None, 404, "contact_id"),
    # NUL (U+0000) anywhere: Postgres text cannot hold it, so the edge refuses it naming the field.
    ("nul in a name", "POST", "/contacts", {"email": "a@b.co", "name": "Jo\x00hn"}, 422, "name"),
    ("nul in an email", "POST", "/contacts", {"email": "a\x00@b.co"}, 422, "email"),
    ("nul in a tag", "POST", "/contacts", {"email": "a@b.co", "tags": ["ok", "b\x00d"]}, 422, "tags.1"),
    (
        "nul in a json key",
        "POST",
        "/contacts",
        {"email": "a@b.co", "custom_fields": {"a\x00b": 1}},
        422,
        "custom_fields.a\\u0000b",
    ),
    (
        "nul deep in a json value",
        "POST",
        "/contacts",
        {"email": "a@b.co", "custom_fields": {"x": [{"y": "ok"}, {"y": "b\x00d"}]}},
        422,
        "custom_fields.x.1.y",
    ),
    ("nul in a patch", "PATCH", f"/contacts/{CONTACT}", {"company_name": "\x00"}, 422, "company_name"),
    ("nul in a body key", "POST", "/contacts", {"email": "a@b.co", "\x00": 1}, 422, "\\u0000"),
    ("nul in search", "GET", "/contacts?search=jo%00hn", None, 422, "search"),
    ("nul in tag filter", "GET", "/contacts?tag=%00", None, 422, "tag"),
    ("nul in a query name", "GET", "/contacts?a%00=1", None, 422, "a\\u0000"),
    ("nul in since", "GET", f"/interactions?contact_id={CONTACT}&since=2026%00", None, 422, "since"),
    ("nul in pending human", "GET", "/handoffs/pending?human_id=rep%00", None, 422, "human_id"),
    ("nul in budget agent", "GET", "/usage/budget-check/lu%00na", None, 422, "agent"),
    (
        "nul in raw_content",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "raw_content": "hi\x00there"},
        422,
        "raw_content",
    ),
    (
        "nul in a key point",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "summary": "s", "key_points": ["a\x00"]},
        422,
        "key_points.0",
    ),
    (
        "nul in interaction metadata",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "summary": "s", "metadata": {"k": "\x00"}},
        422,
        "metadata.k",
    ),
    (
        "nul in a handoff summary",
        "POST",
        "/handoffs",
        {"contact_id": CONTACT, "to_agent": "mia", "reason": "other", "context_summary": "x\x00"},
        422,
        "context_summary",
    ),
    (
        "nul in a handoff note",
        "PATCH",
        f"/handoffs/{uuid.UUID(int=5)}",
        {"status": "accepted", "note": "\x00"},
        422,
        "note",
    ),
    (
        "nul in a usage model",
        "POST",
        "/usage",
        {"model": "m\x00", "operation": "op", "input_tokens": 1, "output_tokens": 1},
        422,
        "model",
    ),
    # Nesting and size: deeper than the parser takes is `body`, deeper than a JSON value takes is its field.
    (
        "body 3000 deep",
        "POST",
        "/contacts",
        b'{"email": "a@b.co", "custom_fields": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}",
        422,
        "body",
    ),
    ("array body 3000 deep", "POST", "/interactions", b"[" * 3000 + b"]" * 3000, 422, "body"),
    (
        "custom_fields 35 deep",
        "POST",
        "/contacts",
        {"email": "a@b.co", "custom_fields": {"a": json.loads("[" * 34 + "]" * 34)}},
        422,
        "custom_fields",
    ),
    (
        "metadata 35 deep",
        "POST",
        "/interactions",
        {"contact_id": CONTACT, "type": "note", "summary": "s", "metadata": {"a": json.loads("[" * 34 + "]" * 34)}},
        422,
        "metadata",
    ),
    (
        "handoff metadata 35 deep",
        "POST",
        "/handoffs",
        {
            "contact_id": CONTACT,
            "to_agent": "mia",
            "reason": "other",
            "metadata": {"a": json.loads("[" * 34 + "]" * 34)},
        },
        422,
        "metadata",
    ),
    (
        "custom_fields over 64 KiB",
        "POST",
        "/contacts",
        {"email": "a@b.co", "custom_fields": {"blob": "x" * 70_000}},
        422,
        "custom_fields",
    ),
    # Tags: a high-entropy tag of ~2.7 KB broke the GIN index; each tag is at most 100 characters.
    ("tag of 101 characters", "POST", "/contacts", {"email": "a@b.co", "tags": ["x" * 101]}, 422, "tags.0"),
    (
        "high-entropy tag",
        "POST",
        "/contacts",
        {"email": "a@b.co", "tags": [uuid.uuid4().hex * 100]},
        422,
        "tags.0",
    ),
    ("patch tag too long", "PATCH", f"/contacts/{CONTACT}", {"tags": ["ok", "y" * 101]}, 422, "tags.1"),
    ("tag filter too long", "GET", f"/contacts?tag={'t' * 101}", None, 422, "tag"),
    # Integers within their SQL type; instants any offset of which Python can convert to UTC.
    ("offset over int", "GET", f"/contacts?offset={2**31}", None, 422, "offset"),
    (
        "since offset +99:00",
        "GET",
        f"/interactions?contact_id={CONTACT}&since=2026-01-01T00:00:00%2B99:00",
        None,
        422,
        "since",
    ),
    ("since before year 1 in UTC", "GET", "/handoffs?since=0001-01-01T00:00:00%2B23:00", None, 422, "since"),
    ("since after 9999 in UTC", "GET", "/handoffs?since=9999-12-31T23:59:59-23:00", None, 422, "since"),
    # Emails: invisible and bidi characters would make one person two contacts.
    ("email zero-width space", "POST", "/contacts", {"email": "jo\u200bhn@acme.com"}, 422, "email"),
    ("email right-to-left override", "POST", "/contacts", {"email": "john@\u202emoc.emca"}, 422, "email"),
    ("email no-break space", "POST", "/contacts", {"email": "john\u00a0@acme.com"}, 422, "email"),
    ("email tag character", "POST", "/contacts", {"email": "john@acme.com\U000e0001"}, 422, "email"),
    ("patch email soft hyphen", "PATCH", f"/contacts/{CONTACT}", {"email": "jo\u00adhn@acme.com"}, 422, "email"),
]


@pytest.mark.parametrize(
    ("name", "method", "path", "payload", "status", "field"), BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS]
)
def test_bad_input_is_a_4xx_json_error_naming_the_field_and_writes_nothing(
    client: TestClient,
    tenant: Tenant,
    admin: Admin,
    name: str,
    method: str,
    path: str,
    payload: Any,
    status: int,
    field: str,
) -> None:
    cid = create_contact(client, tenant.keys["luna"])["id"]
    before = counts(admin)
    path = path.replace(CONTACT, cid)
    kwargs: dict[str, Any] = {"headers": bearer(tenant.keys["luna"])}
    if isinstance(payload, bytes):
        kwargs["content"] = payload
        kwargs["headers"] = {**kwargs["headers"], "Content-Type": "application/json"}
    elif payload is not None:
        kwargs["json"] = _fill(payload, cid)
    response = client.request(method, f"{V1}{path}", **kwargs)
    assert response.status_code == status, response.json()
    error = error_of(response)
    assert error["field"] == field, error
    assert error["message"]
    if status == 422 and error["code"] == "validation_error":
        assert error["errors"][0]["field"] == field
    assert counts(admin) == before


def _fill(payload: Any, cid: str) -> Any:
    if isinstance(payload, dict):
        return {k: (cid if v == CONTACT else v) for k, v in payload.items()}
    return payload


def test_a_body_over_the_size_limit_is_413(client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routing, "MAX_BODY_BYTES", 100)
    response = client.post(
        f"{V1}/contacts", headers=bearer(tenant.keys["luna"]), json={"email": "a@b.co", "name": "x" * 200}
    )
    assert response.status_code == 413
    assert error_of(response)["field"] == "body"


def test_unicode_is_returned_as_is(client: TestClient, tenant: Tenant) -> None:
    create_contact(client, tenant.keys["luna"], name="Zoë Ångström 山田")
    response = client.get(f"{V1}/contacts", headers=bearer(tenant.keys["luna"]))
    assert "Zoë Ångström 山田".encode() in response.content


# --- models and OpenAPI -----------------------------------------------------------------------


def test_request_enums_are_the_sql_check_constraint_lists(admin: Admin) -> None:
    row = admin.execute(
        "select cortex.contact_stages() as stages, cortex.interaction_types() as types,"
        " cortex.sentiments() as sentiments, cortex.intents() as intents"
    ).fetchone()
    assert row is not None
    assert list(get_args(Stage)) == row["stages"]
    assert list(get_args(InteractionType)) == row["types"]
    assert list(get_args(Sentiment)) == row["sentiments"]
    assert list(get_args(Intent)) == row["intents"]


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def test_openapi_lists_every_route_with_schemas_parameters_errors_and_security(client: TestClient) -> None:
    response = client.get(f"{V1}/openapi.json")
    assert response.status_code == 200
    doc = body_of(response)
    assert doc["openapi"].startswith("3.1")
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        **doc["components"]["securitySchemes"]["bearerAuth"],
        "type": "http",
        "scheme": "bearer",
    }
    for route in api.ROUTES:
        for rule in route.paths:
            templated = re.sub(r"<(\w+)>", r"{\1}", rule)
            op = doc["paths"][templated][route.method.lower()]
            assert op["security"] == ([{"bearerAuth": []}] if route.auth else [])
            names = {p.get("name") for p in op["parameters"]}
            for model in (route.path, route.query):
                if model is not None:
                    assert set(model.model_fields) <= names
            if route.body is not None:
                ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith(f"/{route.body.__name__}")
            for status, model in route.responses.items():
                if route.media_type != "application/json" and status == 200:
                    continue  # a page or a stream: text (the next test)
                ref = op["responses"][str(status)]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith(f"/{model.__name__}")
            if route.auth:
                assert op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith(
                    "/ErrorResponse"
                )
    operation_ids = [op["operationId"] for item in doc["paths"].values() for op in item.values()]
    assert len(operation_ids) == len(set(operation_ids))
    for ref in set(_refs(doc)):
        assert _resolve(doc, ref) is not None
    level = next(
        p for p in doc["paths"]["/api/v1/context/{contact_id}"]["get"]["parameters"] if p.get("name") == "level"
    )
    assert level["schema"]["minimum"] == 0 and level["schema"]["maximum"] == 3
    create = doc["components"]["schemas"]["ContactCreate"]
    # email or phone: neither is required by the schema on its own (SQL names email when both are missing).
    assert create["additionalProperties"] is False and "required" not in create
    assert {"email", "phone"} <= set(create["properties"])


def test_every_documented_response_model_validates_what_the_api_returns(client: TestClient, tenant: Tenant) -> None:
    # The response models allow extra keys; this proves the documented ones are all there.
    key = tenant.keys["luna"]
    cid = create_contact(client, key)["id"]
    checks: list[tuple[type[BaseModel], HttpResponse]] = [
        (InteractionLogged, log(client, key, cid)),
        (InteractionList, client.get(f"{V1}/interactions?contact_id={cid}", headers=bearer(key))),
        (ContactList, client.get(f"{V1}/contacts?search=john", headers=bearer(key))),
        (WorkingContext, client.get(f"{V1}/context/{cid}?level=3", headers=bearer(key))),
    ]
    for model, response in checks:
        assert response.status_code in (200, 201)
        model.model_validate(body_of(response))


# --- the real server --------------------------------------------------------------------------


@pytest.mark.slow
def test_functions_framework_serves_the_api_over_http(dsn: str, tenant: Tenant, tmp_path: Path) -> None:
    # The framework's own command in its ASGI mode, as a deployment without `cortex serve` runs it.
    port = free_port()
    binary = Path(sys.executable).parent / "functions-framework"
    env = {**os.environ, "DATABASE_URL": dsn}
    env.pop("ANTHROPIC_API_KEY", None)
    command = [
        str(binary),
        "--asgi",
        "--source",
        str(MAIN),
        "--target",
        "api",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    with running_server(command, port, env, tmp_path / "server.log") as base:
        ready = httpx.get(f"{base}/health/ready", timeout=10)
        assert ready.status_code == 200 and ready.json()["migrations"]["pending"] == []
        key = bearer(tenant.keys["luna"])
        created = httpx.post(f"{base}{V1}/contacts", headers=key, json={"email": "wire@acme.com"}, timeout=10)
        assert created.status_code == 201
        got = httpx.get(f"{base}{V1}/contacts/{created.json()['id']}", headers=key, timeout=10)
        assert got.status_code == 200 and got.json()["email"] == "wire@acme.com"
        assert httpx.get(f"{base}{V1}/nowhere", timeout=10).json()["error"]["code"] == "route_not_found"


def test_the_entry_point_exports_the_dispatcher(app: Starlette) -> None:
    # functions-framework registers the loaded source as module "main".
    assert sys.modules["main"].api is api.handle


def test_openapi_documents_pages_as_html_and_streams_as_event_streams(client: TestClient) -> None:
    """What is not JSON is not documented as JSON: each page's 200 is text/html, each stream's text/event-stream."""
    document = client.get("/api/v1/openapi.json").json()
    media = {
        (method.upper(), path): list(op["responses"]["200"]["content"])
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if "200" in op["responses"]
    }
    assert media[("GET", "/chat/customers/{customer_id}")] == ["text/html"]
    assert media[("GET", "/dashboard")] == ["text/html"]
    assert media[("POST", "/api/v1/customers/{customer_id}/chat/stream")] == ["text/event-stream"]
    assert media[("GET", "/api/v1/dashboard/events")] == ["text/event-stream"]
    assert media[("GET", "/api/v1/contacts/{id}")] == ["application/json"]
    served = client.get("/dashboard/sign-in")
    assert served.status_code == 200 and served.headers["content-type"].startswith("text/html")
