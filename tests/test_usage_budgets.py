"""Budgets on Cortex's own model calls (reserve before, settle after), the recommendation followed,
model choice from agent_config, no model call before the checks, and unknown agents refused."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import psycopg
import pytest
from starlette.testclient import TestClient

from cortex import db as cortex_db
from cortex.config import get_settings
from cortex.context import service as context
from cortex.db import agent_claims
from cortex.errors import CortexError
from cortex.handoffs import service as handoffs
from cortex.interactions import service as interactions
from cortex.queue import worker
from cortex.usage import budget
from tests.api_helpers import bearer, error_of
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import FakeAnthropic

Admin = psycopg.Connection[dict[str, Any]]
LUNA_SAYS = "Hi, my order #1234 is late again. When will it arrive? I am getting annoyed."


def _config(admin: Admin, tenant: Tenant, agent: str, **values: Any) -> None:
    sets = ", ".join(f"{k} = %({k})s" for k in values)
    admin.execute(
        f"update cortex.agent_config set {sets} where tenant_id = %(t)s and agent = %(a)s",
        {**values, "t": tenant.id, "a": agent},
    )


def _spend(admin: Admin, tenant: Tenant, agent: str, tokens: int) -> None:
    """Usage already counted today (as if earlier calls had made it)."""
    admin.execute(
        "select cortex.record_token_usage(%s, %s, 'claude-earlier', 'earlier', %s, 0)", (tenant.id, agent, tokens)
    )


def _estimate(raw: str = LUNA_SAYS, kind: str = "email_received", max_out: int = 500) -> int:
    from cortex.llm import prompts

    return budget.estimate(prompts.interaction_summary_prompt(kind, None, raw)) + max_out


def _usage(admin: Admin, tenant: Tenant, agent: str = "luna") -> list[dict[str, Any]]:
    return admin.execute(
        "select model, operation, input_tokens, output_tokens, total_tokens, budget_exceeded, metadata "
        "from cortex.token_usage where tenant_id = %s and agent = %s and operation <> 'earlier' order by created_at",
        (tenant.id, agent),
    ).fetchall()


def _log(tenant: Tenant, contact: dict[str, Any], agent: str = "luna", **fields: Any) -> dict[str, Any]:
    return interactions.log_interaction(
        agent_claims(tenant.id, agent), contact_id=contact["id"], type="email_received", raw_content=LUNA_SAYS, **fields
    )


def _midnight_utc() -> datetime:
    return datetime.combine(datetime.now(UTC).date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)


# --- reservations -----------------------------------------------------------------------------------


def test_concurrent_summaries_of_one_agent_never_overshoot_its_budget_and_lose_no_write(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    # Room for about three remote summaries; twelve threads ask at once.
    daily = 3 * _estimate() + 50
    _config(admin, tenant, "luna", daily_token_budget=daily)
    claude.delay_seconds = 0.2  # calls overlap: reservations, not luck, keep the budget
    errors: list[BaseException] = []

    def log(i: int) -> None:
        try:
            _log(tenant, contact, external_id=f"e-{i}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=log, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    spent = admin.execute(
        "select coalesce(sum(total_tokens), 0) as n from cortex.token_usage "
        "where tenant_id = %s and agent = 'luna' and not budget_exceeded",
        (tenant.id,),
    ).fetchone()
    assert spent is not None and 0 < spent["n"] <= daily
    remote = [u for u in _usage(admin, tenant) if u["model"] != "local-summariser-v1"]
    assert len(remote) == len(claude.requests) >= 2
    # Every interaction is written: summarised now (remote or local) or queued for midnight.
    rows = admin.execute(
        "select i.analysis_status, i.analysis_model, j.run_at from cortex.interactions i "
        "left join cortex.jobs j on j.tenant_id = i.tenant_id and j.dedup_key = i.id::text "
        "and j.kind = 'summarise_interaction' where i.tenant_id = %s",
        (tenant.id,),
    ).fetchall()
    assert len(rows) == 12
    for row in rows:
        assert row["analysis_status"] == "done" or row["run_at"] >= _midnight_utc() - timedelta(seconds=1)
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone() == {"n": 0}


def test_an_open_reservation_counts_until_settled_or_expired(
    tenant: Tenant, admin: Admin, as_agent: AsAgent, dsn: str
) -> None:
    _config(admin, tenant, "luna", daily_token_budget=10_000)
    with psycopg.connect(dsn, autocommit=True) as conn:
        plan = budget.reserve(conn, tenant.id, "luna", "summarize", 1_500)
    assert plan.action == "proceed" and plan.max_tokens == 500
    with as_agent(tenant, "luna") as conn:
        status = cortex_db.call(conn, "budget_check", estimated_tokens=0)
    assert status["reserved_tokens"] == 2_000 and status["remaining"] == 8_000
    # A caller that died: its reservation expires and stops counting.
    admin.execute("update cortex.token_reservations set expires_at = now() - interval '1 second'")
    with as_agent(tenant, "luna") as conn:
        assert cortex_db.call(conn, "budget_check")["reserved_tokens"] == 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        budget.reserve(conn, tenant.id, "luna", "summarize", 10)
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone() == {"n": 1}


def test_an_agent_cannot_reserve_or_settle_for_another(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(CortexError) as refused, as_agent(tenant, "luna") as conn:
        budget.reserve(conn, tenant.id, "mia", "summarize", 10)
    assert refused.value.status == 403
    with pytest.raises(CortexError) as read_only, as_agent(tenant, "helios") as conn:
        budget.reserve(conn, tenant.id, "helios", "summarize", 10)
    assert read_only.value.status == 403


# --- the recommendation followed ---------------------------------------------------------------------


def test_use_haiku_switches_to_the_cheaper_model(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    _config(admin, tenant, "luna", default_model="sonnet", daily_token_budget=10_000)
    _log(tenant, contact, external_id="first")
    assert claude.requests[-1]["model"] == get_settings().complex_model  # proceed: the agent's model
    _spend(admin, tenant, "luna", 8_200)  # the next call lands between 80 % and 95 %
    _log(tenant, contact, external_id="second")
    assert claude.requests[-1]["model"] == get_settings().summary_model
    usage = _usage(admin, tenant)
    assert [u["metadata"]["budget_action"] for u in usage] == ["proceed", "use_haiku"]
    assert usage[1]["model"] == get_settings().summary_model and not usage[1]["budget_exceeded"]


def test_defer_writes_the_interaction_and_queues_its_summary_for_midnight(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic, dsn: str
) -> None:
    _config(admin, tenant, "luna", daily_token_budget=10_000)
    _spend(admin, tenant, "luna", 10_000 - _estimate() - 100)  # after the call: over 95 %, within 100 %
    logged = _log(tenant, contact)
    assert claude.requests == []
    assert logged["analysis_status"] == "pending" and logged["summary"] is None
    assert datetime.fromisoformat(logged["summary_deferred_until"]) == _midnight_utc()
    job = admin.execute(
        "select run_at, status from cortex.jobs where tenant_id = %s and kind = 'summarise_interaction'", (tenant.id,)
    ).fetchone()
    assert job is not None and job["status"] == "queued" and job["run_at"] == _midnight_utc()
    assert _usage(admin, tenant) == []


def test_the_worker_defers_a_summary_job_to_midnight_with_its_attempt_refunded(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, as_agent: AsAgent, claude: FakeAnthropic, dsn: str
) -> None:
    _config(admin, tenant, "luna", daily_token_budget=10_000)
    with as_agent(tenant, "luna") as conn:  # the PostgREST path: the worker summarises
        cortex_db.call(conn, "log_interaction", contact_id=contact["id"], type="email_received", raw_content=LUNA_SAYS)
    _spend(admin, tenant, "luna", 10_000 - _estimate() - 100)
    with psycopg.connect(dsn, autocommit=True) as queue:
        assert worker.run_once(queue, "w1") == 1
    job = admin.execute(
        "select run_at, status, attempts from cortex.jobs where tenant_id = %s and kind = 'summarise_interaction'",
        (tenant.id,),
    ).fetchone()
    assert job == {"run_at": _midnight_utc(), "status": "queued", "attempts": 0}
    assert claude.requests == [] and _usage(admin, tenant) == []


def test_over_budget_the_local_generator_stands_in_marked_and_the_monitor_hears_once(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    _config(admin, tenant, "luna", daily_token_budget=10_000)
    _spend(admin, tenant, "luna", 10_000)
    first = _log(tenant, contact, external_id="a")
    second = _log(tenant, contact, external_id="b")
    assert claude.requests == []
    for logged in (first, second):
        assert logged["analysis_status"] == "done" and logged["summary"]
    models = admin.execute("select analysis_model from cortex.interactions where tenant_id = %s", (tenant.id,))
    assert [r["analysis_model"] for r in models.fetchall()] == ["local-summariser-v1"] * 2
    usage = _usage(admin, tenant)
    assert [(u["model"], u["budget_exceeded"], u["metadata"]["budget_action"]) for u in usage] == [
        ("local-summariser-v1", True, "local")
    ] * 2
    # Spent stays at the budget: the stand-in's calls count as refused.
    spent = admin.execute(
        "select sum(total_tokens) as n, sum(refused) as refused from cortex.usage_daily where tenant_id = %s "
        "and agent = 'luna'",
        (tenant.id,),
    ).fetchone()
    assert spent is not None and spent["n"] == 10_000 and spent["refused"] == 2
    notes = admin.execute(
        "select recipient, payload from cortex.outbox where tenant_id = %s and event = 'budget.exceeded'", (tenant.id,)
    ).fetchall()
    assert len(notes) == 1 and notes[0]["recipient"] == "monitor" and notes[0]["payload"]["agent"] == "luna"


def test_over_budget_context_generation_and_handoff_briefings_are_local_and_marked(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    _config(admin, tenant, "luna", daily_token_budget=1_000)
    _spend(admin, tenant, "luna", 1_000)
    luna = agent_claims(tenant.id, "luna")
    refreshed = context.refresh_context(luna, contact["id"])
    assert refreshed["regenerated"] is True
    handed = handoffs.create_handoff(luna, contact_id=contact["id"], to_agent="mia", reason="escalation")
    assert claude.requests == []
    assert handed["context_summary"]
    stored = admin.execute("select model from cortex.contact_context where tenant_id = %s", (tenant.id,)).fetchone()
    assert stored == {"model": "local-summariser-v1"}
    meta = admin.execute("select metadata from cortex.handoff_events where tenant_id = %s", (tenant.id,)).fetchone()
    assert meta is not None and meta["metadata"]["briefing"]["generated_by"] == "local"
    assert {(u["operation"], u["budget_exceeded"]) for u in _usage(admin, tenant)} == {
        ("generate_context", True),
        ("handoff_summary", True),
    }


def test_a_failed_remote_call_is_recorded_and_its_reservation_released(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    claude.reply = lambda request: "no JSON here, sorry"  # an answer that costs tokens and is useless
    logged = _log(tenant, contact)
    assert logged["analysis_status"] == "pending"  # written; the worker tries again
    usage = _usage(admin, tenant)
    assert len(usage) == 1 and usage[0]["input_tokens"] > 0 and "schema" in usage[0]["metadata"]["error"]
    claude.always_fail = True  # nothing answered: a zero-token row says the call was made
    _log(tenant, contact, external_id="x")
    usage = _usage(admin, tenant)
    assert len(usage) == 2 and usage[1]["total_tokens"] == 0 and "529" in usage[1]["metadata"]["error"]
    assert admin.execute("select count(*) as n from cortex.token_reservations").fetchone() == {"n": 0}


# --- model choice -----------------------------------------------------------------------------------


def test_summaries_and_briefings_use_the_agents_default_model_and_output_cap(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    _log(tenant, contact, external_id="defaults")
    assert claude.requests[-1]["model"] == get_settings().summary_model  # 'haiku', the seed's default
    assert claude.requests[-1]["max_tokens"] == 500
    _config(admin, tenant, "luna", default_model="claude-custom-1", max_output_tokens=321)
    _log(tenant, contact, external_id="custom")
    assert (claude.requests[-1]["model"], claude.requests[-1]["max_tokens"]) == ("claude-custom-1", 321)
    handoffs.create_handoff(agent_claims(tenant.id, "luna"), contact_id=contact["id"], to_agent="mia", reason="other")
    assert (claude.requests[-1]["model"], claude.requests[-1]["max_tokens"]) == ("claude-custom-1", 321)


def test_context_generation_uses_the_complex_model_for_long_histories(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, as_agent: AsAgent, claude: FakeAnthropic
) -> None:
    luna = agent_claims(tenant.id, "luna")
    context.refresh_context(luna, contact["id"])
    assert claude.requests[-1]["model"] == get_settings().summary_model  # short: default_model (haiku)
    with as_agent(tenant, "luna") as conn:
        for i in range(context.LONG_HISTORY_INTERACTIONS + 1):
            cortex_db.call(conn, "log_interaction", contact_id=contact["id"], type="note", summary=f"Note {i}")
    context.refresh_context(luna, contact["id"])
    assert claude.requests[-1]["model"] == get_settings().complex_model == "claude-sonnet-4-6"
    _config(admin, tenant, "luna", complex_task_model="claude-deep-2")
    context.refresh_context(luna, contact["id"])
    assert claude.requests[-1]["model"] == "claude-deep-2"


def test_worker_context_generation_reads_the_system_agents_config(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic, dsn: str
) -> None:
    _config(admin, tenant, "system", default_model="claude-system-3", max_output_tokens=444)
    with psycopg.connect(dsn, autocommit=True) as conn:
        context.generate_for_job(conn, tenant.id, contact["id"])
    assert (claude.requests[-1]["model"], claude.requests[-1]["max_tokens"]) == ("claude-system-3", 444)
    assert [u["metadata"]["budget_action"] for u in _usage(admin, tenant, "system")] == ["proceed"]


# --- no model call before the checks ---------------------------------------------------------------


def test_no_model_call_for_a_read_only_caller_a_repeated_external_id_or_bad_input(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, claude: FakeAnthropic
) -> None:
    with pytest.raises(CortexError) as read_only:
        _log(tenant, contact, agent="helios")
    assert read_only.value.status == 403
    first = _log(tenant, contact, external_id="once")
    assert len(claude.requests) == 1
    again = _log(tenant, contact, external_id="once")
    assert again["duplicate"] is True and again["id"] == first["id"]
    luna = agent_claims(tenant.id, "luna")
    for bad in ({"direction": "sideways"}, {"metadata": [1, 2]}, {"agent": "mia"}, {"raw_content": "a\x00b"}):
        with pytest.raises((CortexError, ValueError)):
            interactions.log_interaction(luna, contact_id=contact["id"], type="email_received", **bad)
    with pytest.raises(CortexError) as unknown:
        interactions.log_interaction(
            agent_claims(tenant.id, "luna"), contact_id="00000000-0000-0000-0000-000000000000", type="email_received"
        )
    assert unknown.value.status == 404
    with pytest.raises(CortexError) as refresh:
        context.refresh_context(agent_claims(tenant.id, "helios"), contact["id"])
    assert refresh.value.status == 403
    with pytest.raises(CortexError) as handoff:
        handoffs.create_handoff(
            agent_claims(tenant.id, "luna"), contact_id=contact["id"], to_agent="nobody", reason="escalation"
        )
    assert handoff.value.status == 422
    assert len(claude.requests) == 1
    assert len(_usage(admin, tenant)) == 1


def test_no_model_call_over_http_for_a_read_only_caller(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], claude: FakeAnthropic
) -> None:
    response = client.post(
        "/api/v1/interactions",
        headers=bearer(tenant.keys["helios"]),
        json={"contact_id": contact["id"], "type": "email_received", "raw_content": LUNA_SAYS},
    )
    assert response.status_code == 403, response.text
    assert claude.requests == []


# --- unknown agents ---------------------------------------------------------------------------------


def test_sql_refuses_a_caller_whose_agent_is_unknown_or_disabled(
    tenant: Tenant, contact: dict[str, Any], admin: Admin, as_agent: AsAgent
) -> None:
    for call in (
        lambda c: cortex_db.call(c, "get_context", contact_id=contact["id"], level=1),
        lambda c: cortex_db.call(c, "get_context", contact_id=contact["id"], level=3),
        lambda c: cortex_db.call(c, "get_contact", contact_id=contact["id"]),
        lambda c: cortex_db.call(c, "search_contacts", search="john"),
        lambda c: cortex_db.call(c, "budget_check"),
    ):
        with pytest.raises(CortexError) as refused, as_agent(tenant, "ghost") as conn:
            call(conn)
        assert refused.value.status == 401 and refused.value.sqlstate == "28000"
    admin.execute("update cortex.agents set enabled = false where tenant_id = %s and name = 'mia'", (tenant.id,))
    with pytest.raises(CortexError) as disabled, as_agent(tenant, "mia") as conn:
        cortex_db.call(conn, "get_context", contact_id=contact["id"], level=0)
    assert disabled.value.status == 401
    with as_agent(tenant, "luna") as conn:  # a known agent still reads
        assert cortex_db.call(conn, "get_context", contact_id=contact["id"], level=1)["contact_id"] == contact["id"]


def test_the_http_edge_refuses_a_jwt_naming_an_unknown_agent(
    client: TestClient, tenant: Tenant, contact: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "test-jwt-secret-that-is-long-enough-for-hs256"
    monkeypatch.setenv("CORTEX_JWT_SECRET", secret)
    get_settings.cache_clear()
    claims = {"role": "authenticated", "tenant_id": tenant.id, "exp": int(time.time()) + 600}
    ghost = jwt.encode({**claims, "agent": "ghost"}, secret, algorithm="HS256")
    for path in (f"/api/v1/context/{contact['id']}?level=1", f"/api/v1/contacts/{contact['id']}", "/api/v1/contacts"):
        response = client.get(path, headers=bearer(ghost))
        assert response.status_code == 401, path
        assert "unknown or disabled agent" in error_of(response)["message"]
    luna = jwt.encode({**claims, "agent": "luna"}, secret, algorithm="HS256")
    assert client.get(f"/api/v1/contacts/{contact['id']}", headers=bearer(luna)).status_code == 200
