"""get_context / refresh_context: levels, budgets, staleness, regeneration and its failure path."""

from __future__ import annotations

import json
import math
import re
import uuid
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cortex.context import service as context_service
from cortex.db import agent_claims, as_caller, call
from cortex.errors import CortexError
from cortex.queue import worker
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import FakeAnthropic

BUDGETS = {0: 60, 1: 350, 2: 900}
CONTENT_KEYS = ("header", "context", "last_handoff", "recent_interactions")
WS = re.compile(r"[ \t\n\r\f\v]")

GENERATED = {
    "summary": "John is the procurement manager at Acme Corp, a customer since January. Ordered 500 units.",
    "key_facts": ["Procurement manager", "Price-conscious", "Values sustainability", "Ordered 500 units"],
    "current_status": "Active customer, no open tickets",
    "recommended_tone": "Professional, emphasise value",
    "signals": {
        "churn_risk": 0.15,
        "upsell_potential": 0.72,
        "risk_factors": [],
        "opportunity_factors": ["Mentioned scaling up"],
    },
}


def content_tokens(result: dict[str, Any]) -> int:
    """The budgeted size: ceil(chars / 4) of the content fields' JSON (Postgres' jsonb text form)."""
    content = {k: result[k] for k in CONTENT_KEYS if k in result}
    return math.ceil(len(json.dumps(content, ensure_ascii=False)) / 4)


def store(as_agent: AsAgent, tenant: Tenant, contact_id: str, ctx: dict[str, Any] | None = None) -> dict[str, Any]:
    with as_agent(tenant, "luna") as conn:
        count = conn.execute("select interaction_count from cortex.contacts where id = %s", (contact_id,)).fetchone()
        assert count is not None
        result: dict[str, Any] = call(
            conn,
            "refresh_context",
            contact_id=contact_id,
            context=ctx or GENERATED,
            interaction_count=count[0],
        )
    return result


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_get_context_levels_have_their_parts_and_stay_within_budget(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], level: int
) -> None:
    with as_agent(tenant, "luna") as conn:
        for n in range(15):
            call(
                conn,
                "log_interaction",
                contact_id=contact["id"],
                type="note",
                summary=f"Note number {n} logged.",
            )
    store(as_agent, tenant, contact["id"])
    with as_agent(tenant, "luna") as conn:
        result = call(conn, "get_context", contact_id=contact["id"], level=level)
    assert result["header"]["name"] == "John Smith" and result["header"]["stage"] == "customer"
    assert ("context" in result) == (level >= 1)
    assert ("recent_interactions" in result) == (level >= 2)
    assert result["token_budget"] == BUDGETS.get(level, 2000)
    assert result["token_count"] <= result["token_budget"]
    assert result["is_stale"] is False
    if level >= 1:
        assert result["context"]["summary"].startswith("John is the procurement manager")
        assert result["context"]["signals"]["upsell_potential"] == 0.72
    if level == 2:
        assert len(result["recent_interactions"]) == 10
    if level == 3:
        assert len(result["recent_interactions"]) == 15


def test_level_three_is_capped_at_the_agents_max_input_tokens(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    admin.execute(
        "update cortex.agent_config set max_input_tokens = 400 where tenant_id = %s and agent = 'mia'",
        (tenant.id,),
    )
    with as_agent(tenant, "luna") as conn:
        for n in range(60):
            call(
                conn,
                "log_interaction",
                contact_id=contact["id"],
                type="email_sent",
                summary=f"Followed up on quote {n} about reusable cups and bulk pricing for the spring season.",
            )
    with as_agent(tenant, "mia") as conn:
        mia = call(conn, "get_context", contact_id=contact["id"], level=3)
    with as_agent(tenant, "luna") as conn:
        luna = call(conn, "get_context", contact_id=contact["id"], level=3)
    assert mia["token_budget"] == 400 and mia["token_count"] <= 400 and mia["truncated"] is True
    assert luna["token_budget"] == 2000 and luna["token_count"] <= 2000
    assert len(luna["recent_interactions"]) > len(mia["recent_interactions"]) > 0
    # The newest interactions are the ones kept.
    assert mia["recent_interactions"][0]["summary"].startswith("Followed up on quote 59")
    assert mia["interactions_total"] == 60


def test_context_is_stale_until_generated_and_again_after_new_interactions(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    with as_agent(tenant, "luna") as conn:
        first = call(conn, "get_context", contact_id=contact["id"], level=1)
        again = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert first["is_stale"] is True and first["generated_at"] is None
    assert "John Smith" in first["context"]["summary"]
    assert first["refresh_queued"] is True and again["refresh_queued"] is False
    assert admin.execute("select count(*) as n from cortex.jobs where kind = 'generate_context'").fetchone()["n"] == 1

    store(as_agent, tenant, contact["id"])
    with as_agent(tenant, "luna") as conn:
        fresh = call(conn, "get_context", contact_id=contact["id"], level=1)
        call(conn, "log_interaction", contact_id=contact["id"], type="note", summary="Something new")
        changed = call(conn, "get_context", contact_id=contact["id"], level=1)
    assert fresh["is_stale"] is False and fresh["generated_at"] is not None
    assert changed["is_stale"] is True


@pytest.mark.parametrize(
    "change",
    [
        "generated_at = now() - interval '25 hours'",
        "expires_at = now() - interval '1 second'",
        "stale_since = now()",
    ],
)
def test_context_goes_stale_by_age_expiry_or_mark(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any, change: str
) -> None:
    store(as_agent, tenant, contact["id"])
    admin.execute(f"update cortex.contact_context set {change}")
    with as_agent(tenant, "luna") as conn:
        assert call(conn, "get_context", contact_id=contact["id"], level=0)["is_stale"] is True


def test_refresh_context_without_a_body_queues_the_worker(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        queued = call(conn, "refresh_context", contact_id=contact["id"])
    assert queued["regenerated"] is False and queued["queued"] is True and queued["job_id"] is not None


def test_python_refresh_generates_locally_and_records_usage(
    tenant: Tenant, contact: dict[str, Any], admin: Any
) -> None:
    claims = agent_claims(tenant.id, "luna")
    first = context_service.refresh_context(claims, contact["id"])
    second = context_service.refresh_context(claims, contact["id"])
    assert first["regenerated"] is True and first["previous_generated_at"] is None
    assert second["previous_generated_at"] == first["new_generated_at"]
    got = context_service.get_context(claims, contact["id"], level=1)
    assert got["is_stale"] is False and "John Smith" in got["context"]["summary"]
    ops = admin.execute("select operation, model from cortex.token_usage order by created_at").fetchall()
    assert ops == [{"operation": "generate_context", "model": "local-summariser-v1"}] * 2


def test_a_failed_regeneration_serves_the_cached_context_as_stale_and_retries_in_five_minutes(
    tenant: Tenant, contact: dict[str, Any], admin: Any, claude: FakeAnthropic
) -> None:
    claims = agent_claims(tenant.id, "luna")
    context_service.refresh_context(claims, contact["id"])  # a good cached context, from Claude
    claude.always_fail = True
    served = context_service.get_context(claims, contact["id"], level=1, refresh=True)
    assert served["is_stale"] is True
    assert served["context"]["summary"]  # the cached one, still there
    job = admin.execute(
        "select status, round(extract(epoch from run_at - now()) / 60) as minutes "
        "from cortex.jobs where kind = 'generate_context'"
    ).fetchone()
    assert job == {"status": "queued", "minutes": 5}
    failures = admin.execute("select failure_count, last_error is not null as e from cortex.contact_context").fetchone()
    assert failures == {"failure_count": 1, "e": True}


@pytest.mark.parametrize(("level", "field"), [(4, "level"), (-1, "level")])
def test_get_context_rejects_unknown_levels(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], level: int, field: str
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "get_context", contact_id=contact["id"], level=level)
    assert err.value.field == field and err.value.status == 422


# --- property: huge and odd inputs never break the caps or cut a word -------------------------

ODD = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=3000)
WORDY = st.lists(
    st.sampled_from(
        ["cup", "lid", "über", "🙂", "x" * 400, '"quoted"', "back\\slash", "\t", "\n", "a", "renewal", "ḁ̶͉͗"]
    ),
    max_size=1500,
).map(" ".join)
TEXT = st.one_of(ODD, WORDY, st.just(""), st.just("word " * 5000))


def whole_word_prefix(value: str, sources: list[str]) -> bool:
    """A fitted value is a source string itself, or a prefix of one ending at a word boundary, plus '…'."""
    if value in sources:
        return True
    if not value.endswith("…"):
        return any(value == s for s in sources)
    stem = value[:-1]
    return any(s.startswith(stem) and (len(s) == len(stem) or WS.match(s[len(stem)]) is not None) for s in sources)


def strings_in(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in strings_in(v)]
    if isinstance(node, list):
        return [s for v in node for s in strings_in(v)]
    return []


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(
    name=TEXT,
    company=TEXT,
    summary=TEXT,
    facts=st.lists(TEXT, max_size=8),
    interactions=st.lists(TEXT, max_size=25),
    max_input=st.integers(100, 5000),
)
def test_property_get_context_never_exceeds_budget_nor_cuts_a_word(
    tenant: Tenant,
    as_agent: AsAgent,
    admin: Any,
    name: str,
    company: str,
    summary: str,
    facts: list[str],
    interactions: list[str],
    max_input: int,
) -> None:
    admin.execute(
        "update cortex.agent_config set max_input_tokens = %s where tenant_id = %s and agent = 'luna'",
        (max_input, tenant.id),
    )
    row = admin.execute(
        "insert into cortex.contacts (tenant_id, email, name, company_name) values (%s, %s, %s, %s) returning id",
        (tenant.id, f"p{uuid.uuid4().hex}@example.com", name[:500], company[:500]),
    ).fetchone()
    cid = str(row["id"])
    for text in interactions:
        admin.execute(
            "insert into cortex.interactions (tenant_id, contact_id, agent, type, summary, "
            "analysis_status) values (%s, %s, 'luna', 'note', %s, 'done')",
            (tenant.id, cid, text or "x"),
        )
    admin.execute("update cortex.contacts set interaction_count = %s where id = %s", (len(interactions), cid))
    ctx = {
        "summary": summary or "s",
        "key_facts": facts,
        "current_status": summary[:300],
        "recommended_tone": company[:300],
        "signals": {"risk_factors": facts[:3], "opportunity_factors": []},
    }
    admin.execute(
        "select cortex.store_context(%s, %s, %s::jsonb, null, %s)",
        (tenant.id, cid, json.dumps(ctx), len(interactions)),
    )
    sources = [
        name,
        company,
        summary or "s",
        summary[:300],
        company[:300],
        *facts,
        *(t or "x" for t in interactions),
    ]
    for level in (0, 1, 2, 3):
        with as_agent(tenant, "luna") as conn:
            result = call(conn, "get_context", contact_id=cid, level=level)
        budget = BUDGETS.get(level, max_input)
        assert result["token_budget"] == budget
        assert result["token_count"] <= budget
        # The reported count is the real size of what was returned (Python's JSON of it can only be
        # the same length as Postgres' jsonb text for these separators).
        assert content_tokens(result) <= budget
        for key in ("name", "company"):
            if key in result["header"]:
                assert whole_word_prefix(result["header"][key], sources), (key, result["header"][key])
        if level >= 1:
            for text in strings_in({k: v for k, v in result["context"].items() if k != "signals"}):
                assert whole_word_prefix(text, sources) or text == "Working context is being generated"
        if level >= 2:
            for item in result["recent_interactions"]:
                if "summary" in item:
                    assert whole_word_prefix(item["summary"], sources)


# --- precomputed reads: levels 0-2 are rendered at write time ---------------------------------

ENVELOPE = ("contact_id", "level", "token_budget", "generated_at", "is_stale", "refresh_queued")


def fresh_assembly(admin: Any, tenant: Tenant, contact_id: str, level: int) -> dict[str, Any]:
    """What get_context would assemble now (content, staleness, generated_at), straight from the tables."""
    row = admin.execute(
        "select cortex.context_content(c, x, %(l)s, cortex.context_budget(c.tenant_id, null, %(l)s)) as content,"
        " cortex.context_is_stale(x, c.interaction_count) as stale, cortex.iso(x.generated_at) as generated_at"
        " from cortex.contacts c"
        " left join cortex.contact_context x on x.tenant_id = c.tenant_id and x.contact_id = c.id"
        " where c.tenant_id = %(t)s and c.id = %(c)s",
        {"l": level, "t": tenant.id, "c": contact_id},
    ).fetchone()
    assert row is not None
    return dict(row)


def assert_rendered_is_fresh(admin: Any, as_agent: AsAgent, tenant: Tenant, contact_id: str, after: str) -> None:
    """get_context at levels 0-2 (read from context_levels) equals a fresh assembly."""
    for level in (0, 1, 2):
        rendered = admin.execute(
            "select count(*) as n from cortex.context_levels where tenant_id = %s and contact_id = %s",
            (tenant.id, contact_id),
        ).fetchone()
        assert rendered["n"] == 1, f"no rendered row after {after}"
        with as_agent(tenant, "mia") as conn:
            got = call(conn, "get_context", contact_id=contact_id, level=level)
        fresh = fresh_assembly(admin, tenant, contact_id, level)
        assert {k: v for k, v in got.items() if k not in ENVELOPE} == fresh["content"], (after, level)
        assert (got["is_stale"], got["generated_at"]) == (fresh["stale"], fresh["generated_at"]), (after, level)
        assert (got["level"], got["contact_id"], got["token_budget"]) == (level, contact_id, BUDGETS[level])


def test_rendered_levels_equal_a_fresh_assembly_after_every_kind_of_change(
    tenant: Tenant, as_agent: AsAgent, admin: Any, dsn: str, contact: dict[str, Any]
) -> None:
    cid = contact["id"]
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "contact created")
    with as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=cid, type="note", summary="Asked about reusable cups.")
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "interaction with summary")
    with as_agent(tenant, "luna") as conn:
        call(
            conn,
            "log_interaction",
            contact_id=cid,
            type="email_received",
            subject="Late order",
            raw_content="Our order is late again and we are frustrated. Please call us back.",
        )
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "interaction pending analysis")
    with psycopg.connect(dsn, autocommit=True) as queue:
        while worker.run_once(queue, "w1"):  # the summary, then the context it made stale
            pass
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "worker: analysis and regeneration")
    with as_agent(tenant, "luna") as conn:
        call(conn, "update_contact", contact_id=cid, patch={"name": "John Q. Smith", "stage": "churning"})
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "contact patch")
    with as_agent(tenant, "luna") as conn:
        call(conn, "upsert_contact", email="john@acme.com", company_name="Acme Holdings")
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "contact upsert")
    store(as_agent, tenant, cid)
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "regeneration (refresh_context)")
    with as_agent(tenant, "anna") as conn:
        call(
            conn,
            "create_handoff",
            contact_id=cid,
            to_agent="jasper",
            reason="escalation",
            reason_detail="Wants a call about the late order",
        )
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "handoff")
    got = admin.execute(
        "select level_1 -> 'last_handoff' ->> 'to' as to from cortex.context_levels where contact_id = %s", (cid,)
    ).fetchone()
    assert got["to"] == "jasper"
    store(as_agent, tenant, cid)
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "regeneration after the handoff")
    admin.execute("select cortex.record_context_failure(%s, %s, 'model down')", (tenant.id, cid))
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "failed regeneration")
    admin.execute("update cortex.contact_context set generated_at = now() - interval '25 hours'")
    assert_rendered_is_fresh(admin, as_agent, tenant, cid, "aged context")

    admin.execute("delete from cortex.contacts where id = %s", (cid,))
    assert admin.execute("select count(*) as n from cortex.context_levels").fetchone()["n"] == 0
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "get_context", contact_id=cid, level=1)
    assert err.value.status == 404


def test_a_read_of_levels_0_to_2_uses_the_rendered_row_and_assembles_nothing(
    tenant: Tenant, as_agent: AsAgent, admin: Any, dsn: str, contact: dict[str, Any]
) -> None:
    store(as_agent, tenant, contact["id"])
    # A marker written into the rendered row is what the read returns: the row is used as is.
    admin.execute(
        "update cortex.context_levels set level_1 = jsonb_set(level_1, '{header,name}', '\"from the row\"')"
        " where contact_id = %s",
        (contact["id"],),
    )
    with as_agent(tenant, "luna") as conn:
        assert call(conn, "get_context", contact_id=contact["id"], level=1)["header"]["name"] == "from the row"
    # And no assembly runs (function call counts of this transaction); level 3 still assembles.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set track_functions = 'pl'")
        for level, assemblies in ((0, 0), (1, 0), (2, 0), (3, 1)):
            with as_caller(agent_claims(tenant.id, "luna"), conn) as c:
                out = call(c, "get_context", contact_id=contact["id"], level=level)
                calls = c.execute(
                    "select coalesce(sum(calls), 0) from pg_stat_xact_user_functions"
                    " where schemaname = 'cortex' and funcname = 'context_content'"
                ).fetchone()
            assert out["level"] == level and out["is_stale"] is False
            assert calls is not None and calls[0] == assemblies, level


def test_a_read_in_the_writing_transaction_sees_its_own_write(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    store(as_agent, tenant, contact["id"])
    with as_agent(tenant, "luna") as conn:
        call(conn, "update_contact", contact_id=contact["id"], patch={"name": "Johanna Smith"})
        inside = call(conn, "get_context", contact_id=contact["id"], level=0)
    assert inside["header"]["name"] == "Johanna Smith"
