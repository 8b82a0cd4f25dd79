"""Voice (issue 9, seed 004): two-tier caller memory, on the HTTP path and the PostgREST path.

The seed's scenario runs end to end: Stefan calls Margaret (a memoir agent), then Dr. Sarah (a
health agent); each agent's greeting and state stay its own, the name is shared and never
overwritten by a call. The webhooks are driven with the platform's own formats, signed as it signs;
the worker runs the real jobs; the agents API and Claude are local stand-ins, never the network.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from cortex.cli import main
from cortex.config import get_settings
from cortex.db import call
from cortex.errors import CortexError
from cortex.queue.worker import load_handlers, run_once
from cortex.schemas import e164
from cortex.voice import routes as voice_routes
from cortex.voice import service
from cortex.voice.service import DEFAULT_CLIENT_DATA, extract_name, signature_header
from tests.api_helpers import bearer, error_of
from tests.conftest import AsAgent, Tenant
from tests.fake_anthropic import VOICE_ANSWER, FakeAnthropic
from tests.fake_elevenlabs import FakeElevenLabs

V1 = "/api/v1/voice"
STEFAN = "+16125551234"
POST_CALL_SECRET = "wsec_post_call_test_secret"
MARGARET = "agent_margaret01"
SARAH = "agent_drsarah01"

MEMOIR_CALL = [
    ("agent", "Hello, I'm Margaret, your memoir interviewer. Who am I speaking with?"),
    ("user", "Hi, my name is Stefan. I want to tell you how I founded Arbez."),
    ("agent", "Wonderful, Stefan. How did Arbez start?"),
    ("user", "Arbez started in my garage. The founding was hard, my childhood taught me to keep going."),
    ("user", "My childhood in the mountains, and the founding of Arbez with my brother, those matter most."),
]
HEALTH_CALL = [
    ("agent", "Hello, this is Dr. Sarah. How are you feeling today?"),
    ("user", "I'm Steve. I worry about my medication, the blood pressure medication makes me dizzy."),
    ("agent", "Dizziness can come from the dose. When do you take the medication?"),
    ("user", "In the morning. The medication and the dizziness, and my sleep is bad too."),
]


# --- helpers ------------------------------------------------------------------------------------------


def event(conversation_id: str, agent_id: str, turns: list[tuple[str, str]], phone: str = STEFAN) -> dict[str, Any]:
    """A post_call_transcription event as the platform sends it."""
    return {
        "type": "post_call_transcription",
        "event_timestamp": int(time.time()),
        "data": {
            "agent_id": agent_id,
            "conversation_id": conversation_id,
            "status": "done",
            "transcript": [{"role": r, "message": m, "time_in_call_secs": i} for i, (r, m) in enumerate(turns)],
            "metadata": {
                "start_time_unix_secs": int(time.time()) - 120,
                "call_duration_secs": 118,
                "phone_call": {"direction": "inbound", "external_number": phone, "agent_number": "+14155550100"},
            },
            "analysis": {"transcript_summary": "..."},
            "conversation_initiation_client_data": {"dynamic_variables": {"system__caller_id": phone}},
        },
    }


def post_call(client: TestClient, body: dict[str, Any] | bytes, secret: str = POST_CALL_SECRET, **kw: Any) -> Any:
    """POSTs a post-call webhook signed as the platform signs (`t` may be given)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    header = signature_header(secret, raw, kw.pop("t", None))
    headers = {"ElevenLabs-Signature": header, "Content-Type": "application/json", **kw.pop("headers", {})}
    return client.post(f"{V1}/post-call", content=raw, headers=headers)


def client_data(client: TestClient, voice: dict[str, Any], agent_id: str, caller: str = STEFAN, **kw: Any) -> Any:
    """POSTs the client-data webhook as the platform would, with the tenant's voice secret."""
    body = {"caller_id": caller, "agent_id": agent_id, "called_number": "+14155550100", "call_sid": "CA123"}
    headers = kw.pop("headers", {"X-Voice-Secret": voice["secret"]})
    return client.post(f"{V1}/client-data", json=kw.pop("json", body), headers=headers)


def work(dsn: str) -> int:
    """Runs the worker until no job is due; how many jobs ran."""
    load_handlers()
    total = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        while n := run_once(conn, "test-worker", 20):
            total += n
    return total


def one(admin: Any, query: str, params: tuple[Any, ...] = ()) -> Any:
    row = admin.execute(query, params).fetchone()
    assert row is not None
    return row


@pytest.fixture
def voice(tenant: Tenant, admin: Any, as_agent: AsAgent) -> dict[str, Any]:
    """The seed's world: agents margaret and dr-sarah mapped to two platform agents (profiles
    registered by hand), the tenant's client-data secret and post-call secret set."""
    for name in ("margaret", "dr-sarah"):
        admin.execute("select cortex.create_agent(%s, %s)", (tenant.id, name))
        tenant.keys[name] = one(admin, "select cortex.create_agent_key(%s, %s) as k", (tenant.id, name))["k"]
    with as_agent(tenant, "system") as conn:
        secrets = call(conn, "set_voice_secrets", rotate_webhook_secret=True, post_call_secret=POST_CALL_SECRET)
        call(conn, "add_voice_agent", platform_agent_id=MARGARET, agent="margaret", name="Margaret",
             first_message="Hello, I'm Margaret.", system_prompt="You are a memoir interviewer.")  # fmt: skip
        call(conn, "add_voice_agent", platform_agent_id=SARAH, agent="dr-sarah", name="Dr. Sarah",
             first_message="Hello, this is Dr. Sarah.", system_prompt="You are a health companion.")  # fmt: skip
    service.clear_secret_cache()
    return {"tenant": tenant, "secret": secrets["webhook_secret"]}


def answer_of(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["type"] == "conversation_initiation_client_data"
    return body


# --- phone numbers and contacts known by phone -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("+16125551234", STEFAN), ("+1 (612) 555-1234", STEFAN), ("+1.612.555.1234", STEFAN),
     ("001 612 555 1234", STEFAN), (" +44 20 7183 8750 ", "+442071838750")],
)  # fmt: skip
def test_formatted_numbers_are_normalised_to_e164(raw: str, expected: str) -> None:
    assert e164(raw) == expected


@pytest.mark.parametrize("raw", ["", "   ", "6125551234", "+1612555123", "+0 612 555 1234", "call me", "+1 555 0100"])
def test_malformed_empty_and_non_e164_numbers_are_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        e164(raw)


def test_sql_stores_only_e164_on_the_postgrest_path(tenant: Tenant, as_agent: AsAgent, admin: Any) -> None:
    with as_agent(tenant, "luna") as conn:
        made = call(conn, "upsert_contact", phone="+1 (612) 555-1234", name="Stefan")
    assert made["phone"] == STEFAN and made["email"] is None and made["created"] is True
    for junk in ("12345", "", "+1 612 CALL NOW"):
        with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
            call(conn, "upsert_contact", phone=junk)
        assert (err.value.status, err.value.field) == (422, "phone")
    # Not even a direct write of the table stores junk.
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        admin.execute("insert into cortex.contacts (tenant_id, phone) values (%s, 'not a number')", (tenant.id,))
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute("insert into cortex.contacts (tenant_id, name) values (%s, 'no identity')", (tenant.id,))


def test_a_contact_known_by_phone_only_works_everywhere_a_contact_does(
    tenant: Tenant, as_agent: AsAgent, admin: Any
) -> None:
    with as_agent(tenant, "luna") as conn:
        first = call(conn, "upsert_contact", phone=STEFAN)
        again = call(conn, "upsert_contact", phone="+1 612-555-1234", company_name="Arbez")
        assert again["id"] == first["id"] and again["created"] is False and again["company_name"] == "Arbez"
        found = call(conn, "search_contacts", search="arbez")["items"]
        assert [c["id"] for c in found] == [first["id"]]
        call(conn, "log_interaction", contact_id=first["id"], type="call", summary="Asked about pallets.")
        level2 = call(conn, "get_context", contact_id=first["id"], level=2)
        assert level2["recent_interactions"]
        handoff = call(conn, "create_handoff", contact_id=first["id"], to_agent="jasper", reason="other")
        assert STEFAN in handoff["context_summary"]
    node = one(admin, "select title, body from cortex.memory_nodes where ref_kind = 'contact' and ref_id = %s",
               (first["id"],))  # fmt: skip
    assert node["title"] == STEFAN and STEFAN in node["body"]


def test_a_phone_belongs_to_at_most_one_contact_per_tenant(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "upsert_contact", email="stefan@arbez.com", phone=STEFAN)
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "upsert_contact", email="other@arbez.com", phone=STEFAN)
    assert err.value.status == 409
    with as_agent(other_tenant, "luna") as conn:
        assert call(conn, "upsert_contact", phone=STEFAN)["created"] is True


def test_the_http_api_takes_a_contact_with_a_phone_and_no_email(client: TestClient, tenant: Tenant) -> None:
    luna = bearer(tenant.keys["luna"])
    made = client.post("/api/v1/contacts", headers=luna, json={"phone": "+1 (612) 555-1234", "name": "Stefan"})
    assert made.status_code == 201 and made.json()["phone"] == STEFAN and made.json()["email"] is None
    for body, field in (({"name": "Nobody"}, "email"), ({"phone": "555-1234"}, "phone"), ({"phone": ""}, "phone")):
        response = client.post("/api/v1/contacts", headers=luna, json=body)
        assert response.status_code == 422 and error_of(response)["field"] == field, response.text


def test_the_cli_shows_a_contact_without_email(dsn: str, tenant: Tenant) -> None:
    result = CliRunner().invoke(main, ["--tenant", tenant.slug, "contacts", "upsert", "--phone", STEFAN,
                                       "--name", "Stefan"], catch_exceptions=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Stefan <{STEFAN}>")


# --- names ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("Hi, my name is Stefan.", "Stefan"),
        ("my name is stefan and I call about my order", "Stefan"),
        ("Hello! My name's Anna Schmidt, calling from Berlin.", "Anna Schmidt"),
        ("This is Maria speaking.", "Maria"),
        ("You can call me Bob.", "Bob"),
        ("I'm Priya, I had a question.", "Priya"),
        ("Yes, it's Jean-Luc here.", "Jean-Luc"),
        ("Hi, Tom here, about the invoice.", "Tom"),
        ("This is Dr. Okafor.", "Okafor"),
    ],
)
def test_the_name_is_found_in_what_the_caller_says(said: str, name: str) -> None:
    assert extract_name([("agent", "Hello, my name is Margaret. Who is calling?"), ("user", said)]) == name


@pytest.mark.parametrize(
    "said",
    [
        "I'm fine, thanks. I'm calling about my medication.",
        "This is Great, really. I am not sure what to do.",
        "Hello? Is anybody there?",
        "i'm good",
    ],
)
def test_a_transcript_that_never_says_the_name_gives_none(said: str) -> None:
    # The agent's own introduction is never taken for the caller's name.
    assert extract_name([("agent", "Hi, I'm Margaret, this is Margaret speaking."), ("user", said)]) is None


# --- the seed's scenario -------------------------------------------------------------------------------------


def test_two_agents_share_the_name_and_keep_their_own_state_over_http(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any
) -> None:
    tenant = voice["tenant"]
    # A new caller: the empty default, from SQL (not a fallback).
    new = client_data(client, voice, MARGARET)
    assert answer_of(new) == DEFAULT_CLIENT_DATA and "X-Voice-Fallback" not in new.headers

    # Day 1: Stefan calls Margaret.
    ack = post_call(client, event("conv_day1", MARGARET, MEMOIR_CALL))
    assert ack.status_code == 200 and ack.json() == {"received": True, "conversation_id": "conv_day1",
                                                     "duplicate": False}  # fmt: skip
    assert work(dsn) >= 1
    margaret = answer_of(client_data(client, voice, MARGARET))
    greeting = margaret["conversation_config_override"]["agent"]["first_message"]
    assert greeting.startswith("Hi Stefan!") and "arbez" in greeting.lower()
    assert margaret["dynamic_variables"] == {"caller_name": "Stefan", "returning_caller": True,
                                             "total_interactions": 1, "agent_conversation_count": 1}  # fmt: skip
    # Dr. Sarah has no state yet: the default first message, but the name.
    sarah = answer_of(client_data(client, voice, SARAH))
    assert "conversation_config_override" not in sarah
    assert sarah["dynamic_variables"]["caller_name"] == "Stefan"

    # Day 2: Stefan calls Dr. Sarah and says another name: the known one stays.
    assert post_call(client, event("conv_day2", SARAH, HEALTH_CALL)).status_code == 200
    work(dsn)
    sarah = answer_of(client_data(client, voice, SARAH))
    sarah_greeting = sarah["conversation_config_override"]["agent"]["first_message"]
    assert "medication" in sarah_greeting.lower() and "arbez" not in sarah_greeting.lower()
    assert sarah["dynamic_variables"]["caller_name"] == "Stefan"
    assert sarah["dynamic_variables"]["total_interactions"] == 2
    # Day 3: Margaret still greets with her own story, and knows of both calls.
    margaret = answer_of(client_data(client, voice, MARGARET))
    assert margaret["conversation_config_override"]["agent"]["first_message"] == greeting
    assert margaret["dynamic_variables"]["total_interactions"] == 2

    # Each agent reads its own state over HTTP, never the other's.
    mine = client.get(f"{V1}/callers/{STEFAN}", headers=bearer(tenant.keys["margaret"]))
    assert mine.status_code == 200, mine.text
    body = mine.json()
    assert body["name"] == "Stefan" and body["total_interactions"] == 2 and body["state"]["agent"] == "margaret"
    assert body["state"]["conversation_count"] == 1 and len(body["state"]["key_topics"]) in (3, 4, 5)
    assert "medication" not in mine.text.lower()
    theirs = client.get(f"{V1}/callers/+1 612 555 1234", headers=bearer(tenant.keys["dr-sarah"]))
    assert theirs.json()["state"]["agent"] == "dr-sarah" and "arbez" not in theirs.text.lower()
    # An agent that never spoke with the caller sees the profile and no state.
    assert client.get(f"{V1}/callers/{STEFAN}", headers=bearer(tenant.keys["luna"])).json()["state"] is None

    # The calls are interactions of the contact, summarised like any other, and events of the graph.
    calls = admin.execute(
        "select i.agent, i.type, i.analysis_status, i.external_id from cortex.interactions i "
        "join cortex.contacts c on c.id = i.contact_id where c.phone = %s order by i.occurred_at",
        (STEFAN,),
    ).fetchall()
    assert [(c["agent"], c["type"], c["analysis_status"]) for c in calls] == [
        ("margaret", "call", "done"), ("dr-sarah", "call", "done")]  # fmt: skip
    events = one(admin, "select count(*) as n from cortex.memory_nodes where ref_kind = 'interaction' and ref_id in "
                 "(select id::text from cortex.interactions where type = 'call')")  # fmt: skip
    assert events["n"] == 2
    usage = admin.execute(
        "select agent, model, metadata ? 'reservation_id' as settled from cortex.token_usage "
        "where operation = 'voice_greeting' order by created_at"
    ).fetchall()
    assert [(u["agent"], u["model"], u["settled"]) for u in usage] == [
        ("margaret", "local-summariser-v1", True), ("dr-sarah", "local-summariser-v1", True)]  # fmt: skip
    assert one(admin, "select count(*) as n from cortex.token_reservations")["n"] == 0


def test_margaret_never_sees_dr_sarahs_state_on_the_postgrest_path(
    client: TestClient, voice: dict[str, Any], dsn: str, as_agent: AsAgent
) -> None:
    tenant = voice["tenant"]
    post_call(client, event("conv_m", MARGARET, MEMOIR_CALL))
    post_call(client, event("conv_s", SARAH, HEALTH_CALL))
    work(dsn)
    for agent, mine, theirs in (("margaret", MARGARET, SARAH), ("dr-sarah", SARAH, MARGARET)):
        with as_agent(tenant, agent) as conn:
            rows = conn.execute("select agent from cortex.voice_caller_states").fetchall()
            assert rows == [(agent,)]
            assert call(conn, "get_voice_caller", phone=STEFAN)["state"]["agent"] == agent
            own = call(conn, "voice_client_data", agent_id=mine, caller_id=STEFAN)
            assert "conversation_config_override" in own
            # The other agent's platform id is not this agent's: no answer at all.
            assert call(conn, "voice_client_data", agent_id=theirs, caller_id=STEFAN) is None
    # An admin (the service key's agent) reads no agent's state either.
    with as_agent(tenant, "system") as conn:
        assert conn.execute("select count(*) from cortex.voice_caller_states").fetchone() == (0,)


def test_an_operator_corrects_the_name_and_no_call_overwrites_it(
    client: TestClient, voice: dict[str, Any], dsn: str
) -> None:
    tenant = voice["tenant"]
    post_call(client, event("conv_1", MARGARET, MEMOIR_CALL))
    work(dsn)
    argv = [
        "--tenant",
        tenant.slug,
        "--agent",
        "margaret",
        "voice",
        "caller",
        "+1 612 555 1234",
        "--name",
        "Stefan Meier",
    ]
    result = CliRunner().invoke(main, argv, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Stefan Meier  {STEFAN}") and "margaret: 1 call(s)" in result.output
    renamed = [("agent", "Who is calling?"), ("user", "My name is Robert, I want to talk about Arbez again.")]
    post_call(client, event("conv_2", MARGARET, renamed))
    work(dsn)
    answer = answer_of(client_data(client, voice, MARGARET))
    assert answer["dynamic_variables"]["caller_name"] == "Stefan Meier"
    assert answer["conversation_config_override"]["agent"]["first_message"].startswith("Hi Stefan Meier!")
    assert answer["dynamic_variables"]["agent_conversation_count"] == 2


def test_a_call_that_never_says_the_name_leaves_it_unknown(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any
) -> None:
    turns = [
        ("agent", "Hello, I'm Margaret."),
        ("user", "Hello. I'd like to record stories about my grandmother's farm."),
    ]
    post_call(client, event("conv_anon", MARGARET, turns))
    work(dsn)
    answer = answer_of(client_data(client, voice, MARGARET))
    assert answer["dynamic_variables"]["caller_name"] == ""
    assert answer["conversation_config_override"]["agent"]["first_message"].startswith("Welcome back!")
    assert one(admin, "select name, email from cortex.contacts where phone = %s", (STEFAN,)) == {
        "name": None, "email": None}  # fmt: skip


# --- call start: bad input and failures answer the empty default ------------------------------------------------


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("invalid_json", "invalid_request"),
        ("empty_body", "invalid_request"),
        ("missing_caller", "invalid_request"),
        ("national_number", "invalid_caller_id"),
        ("letters", "invalid_caller_id"),
        ("unknown_agent", "unauthorized"),
        ("wrong_secret", "unauthorized"),
        ("no_credentials", "unauthorized"),
        ("another_agents_key", "unknown_agent"),
    ],
)
def test_client_data_bad_input_answers_the_empty_default(
    client: TestClient, voice: dict[str, Any], dsn: str, case: str, reason: str
) -> None:
    post_call(client, event("conv_1", MARGARET, MEMOIR_CALL))
    work(dsn)
    secret = {"X-Voice-Secret": voice["secret"]}
    url = f"{V1}/client-data"
    good = {"caller_id": STEFAN, "agent_id": MARGARET}
    requests = {
        "invalid_json": lambda: client.post(url, content=b'{"caller_id": ', headers=secret),
        "empty_body": lambda: client.post(url, content=b"", headers=secret),
        "missing_caller": lambda: client.post(url, json={"agent_id": MARGARET}, headers=secret),
        "national_number": lambda: client.post(url, json={**good, "caller_id": "6125551234"}, headers=secret),
        "letters": lambda: client.post(url, json={**good, "caller_id": "anonymous"}, headers=secret),
        "unknown_agent": lambda: client.post(url, json={**good, "agent_id": "agent_nobody"}, headers=secret),
        "wrong_secret": lambda: client.post(url, json=good, headers={"X-Voice-Secret": "cvs_wrong"}),
        "no_credentials": lambda: client.post(url, json=good),
        "another_agents_key": lambda: client.post(url, json=good, headers=bearer(voice["tenant"].keys["dr-sarah"])),
    }
    response = requests[case]()
    assert response.status_code == 200
    assert response.json() == DEFAULT_CLIENT_DATA
    assert response.headers["X-Voice-Fallback"] == reason


def test_client_data_takes_formatted_numbers_and_an_agent_key(
    client: TestClient, voice: dict[str, Any], dsn: str
) -> None:
    post_call(client, event("conv_1", MARGARET, MEMOIR_CALL))
    work(dsn)
    formatted = answer_of(client_data(client, voice, MARGARET, caller="+1 (612) 555-1234"))
    assert formatted["dynamic_variables"]["caller_name"] == "Stefan"
    keyed = client_data(client, voice, MARGARET, headers=bearer(voice["tenant"].keys["margaret"]))
    assert answer_of(keyed) == formatted


def test_a_missed_deadline_answers_the_empty_default(
    client: TestClient, voice: dict[str, Any], dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    post_call(client, event("conv_1", MARGARET, MEMOIR_CALL))
    work(dsn)
    monkeypatch.setenv("CORTEX_VOICE_DEADLINE_MS", "0")
    get_settings.cache_clear()
    response = client_data(client, voice, MARGARET)
    assert response.json() == DEFAULT_CLIENT_DATA and response.headers["X-Voice-Fallback"] == "deadline"
    # The late lookup still runs in the client's loop: it finishes before the pool and the loop close.
    client.portal.call(voice_routes.settle_late_lookups)  # type: ignore[union-attr]
    assert client.portal.call(voice_routes.settle_late_lookups) == 0  # type: ignore[union-attr]


# --- call end: signatures, replays and bad events ---------------------------------------------------------------


def _nothing_written(admin: Any) -> None:
    assert one(admin, "select count(*) as n from cortex.voice_calls")["n"] == 0
    assert one(admin, "select count(*) as n from cortex.jobs where kind = 'voice_post_call'")["n"] == 0


@pytest.mark.parametrize(
    ("case", "status", "field"),
    [
        ("missing_signature", 401, "ElevenLabs-Signature"),
        ("malformed_signature", 401, "ElevenLabs-Signature"),
        ("wrong_secret", 401, "ElevenLabs-Signature"),
        ("stale_signature", 401, "ElevenLabs-Signature"),
        ("body_changed", 401, "ElevenLabs-Signature"),
        ("invalid_json", 400, "body"),
        ("unknown_agent", 404, "data.agent_id"),
        ("empty_transcript", 422, "data.transcript"),
        ("silent_transcript", 422, "data.transcript"),
        ("non_text_message", 422, "data.transcript.1.message"),
        ("transcript_not_a_list", 422, "data.transcript"),
        ("huge_transcript", 422, "data.transcript"),
        ("no_caller_number", 422, "data.metadata.phone_call.external_number"),
        ("bad_caller_number", 422, "data.metadata.phone_call.external_number"),
        ("bad_conversation_id", 422, "data.conversation_id"),
    ],
)
def test_a_bad_post_call_is_refused_and_writes_nothing(
    client: TestClient, voice: dict[str, Any], admin: Any, case: str, status: int, field: str
) -> None:
    good = event("conv_bad", MARGARET, MEMOIR_CALL)
    raw = json.dumps(good).encode()
    url = f"{V1}/post-call"

    def with_data(**data: Any) -> Any:
        return post_call(client, {**good, "data": {**good["data"], **data}})

    requests = {
        "missing_signature": lambda: client.post(url, content=raw),
        "malformed_signature": lambda: client.post(url, content=raw, headers={"ElevenLabs-Signature": "v0=abc"}),
        "wrong_secret": lambda: post_call(client, good, secret="not-the-secret"),
        "stale_signature": lambda: post_call(client, good, t=int(time.time()) - 3600),
        "body_changed": lambda: client.post(url, content=raw.replace(b"Stefan", b"Stefon"),
                                            headers={"ElevenLabs-Signature": signature_header(POST_CALL_SECRET, raw)}),
        "invalid_json": lambda: post_call(client, b'{"type": "post_call_transcription", "data": {'),
        "unknown_agent": lambda: with_data(agent_id="agent_nobody"),
        "empty_transcript": lambda: with_data(transcript=[]),
        "silent_transcript": lambda: with_data(transcript=[{"role": "agent", "message": None},
                                                           {"role": "user", "message": "   "}]),
        "non_text_message": lambda: with_data(transcript=[{"role": "agent", "message": "Hi"},
                                                          {"role": "user", "message": {"audio": "AAAA"}}]),
        "transcript_not_a_list": lambda: with_data(transcript="User: hello"),
        "huge_transcript": lambda: with_data(transcript=[{"role": "user", "message": "word " * 50_000}]),
        "no_caller_number": lambda: with_data(metadata={}, conversation_initiation_client_data=None),
        "bad_caller_number": lambda: with_data(metadata={"phone_call": {"external_number": "12345"}}),
        "bad_conversation_id": lambda: with_data(conversation_id="conv 1; drop table"),
    }  # fmt: skip
    response = requests[case]()
    assert response.status_code == status, response.text
    assert error_of(response)["field"] == field
    _nothing_written(admin)


def test_a_replayed_post_call_is_acknowledged_and_does_nothing(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any
) -> None:
    body = json.dumps(event("conv_once", MARGARET, MEMOIR_CALL)).encode()
    header = {"ElevenLabs-Signature": signature_header(POST_CALL_SECRET, body)}
    first = client.post(f"{V1}/post-call", content=body, headers=header)
    replay = client.post(f"{V1}/post-call", content=body, headers=header)
    assert first.json()["duplicate"] is False and replay.status_code == 200 and replay.json()["duplicate"] is True
    work(dsn)
    again = client.post(f"{V1}/post-call", content=body, headers=header)
    assert again.json()["duplicate"] is True
    assert work(dsn) == 0
    assert one(admin, "select total_interactions from cortex.voice_callers")["total_interactions"] == 1
    assert one(admin, "select count(*) as n from cortex.interactions where type = 'call'")["n"] == 1


def test_other_event_types_are_acknowledged_and_ignored(client: TestClient, voice: dict[str, Any], admin: Any) -> None:
    audio = {"type": "post_call_audio", "event_timestamp": 1, "data": {"agent_id": MARGARET,
             "conversation_id": "conv_a", "full_audio": "SUQz"}}  # fmt: skip
    response = post_call(client, audio)
    assert response.status_code == 200 and response.json()["ignored"] == "post_call_audio"
    _nothing_written(admin)


# --- voice agents: profiles from the platform, cached 24 h ------------------------------------------------------


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeElevenLabs]:
    """The local stand-in of the agents API, as Cortex's platform URL."""
    agents = {"agent_live01": {"name": "Margaret Live", "first_message": "Hello from the platform.",
                               "system_prompt": "You interview people about their lives."}}  # fmt: skip
    with FakeElevenLabs(agents) as fake:
        monkeypatch.setenv("CORTEX_VOICE_PLATFORM_URL", fake.base_url)
        get_settings.cache_clear()
        yield fake
    get_settings.cache_clear()


def test_the_profile_comes_from_the_agents_api_and_is_cached_for_24_hours(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any, platform: FakeElevenLabs, as_agent: AsAgent
) -> None:
    tenant = voice["tenant"]
    admin.execute("select cortex.create_agent(%s, 'live')", (tenant.id,))
    system = bearer(tenant.keys["luna"])
    refused = client.post(f"{V1}/agents", headers=system, json={"platform_agent_id": "agent_live01", "agent": "live"})
    assert refused.status_code == 403
    with as_agent(tenant, "system") as conn:
        call(conn, "add_voice_agent", platform_agent_id="agent_live01", agent="live")
        call(conn, "set_voice_secrets", platform_api_key=platform.key)
    for n in range(1, 4):
        post_call(client, event(f"conv_live{n}", "agent_live01", MEMOIR_CALL))
        work(dsn)
        if n == 2:  # a day later, the cached profile has expired
            admin.execute("update cortex.voice_agents set profile_fetched_at = now() - interval '25 hours'")
    assert platform.requests == [("/v1/convai/agents/agent_live01", platform.key)] * 2
    listed = client.get(f"{V1}/agents", headers=bearer(tenant.keys["luna"])).json()
    live = next(a for a in listed["items"] if a["platform_agent_id"] == "agent_live01")
    assert (live["name"], live["profile_source"], live["profile_hits"], live["profile_misses"]) == (
        "Margaret Live", "platform", 1, 2)  # fmt: skip
    assert listed["cache"]["target"] == 0.8 and listed["cache"]["misses"] == 2
    result = CliRunner().invoke(main, ["--tenant", tenant.slug, "voice", "agents", "list"], catch_exceptions=False)
    assert result.exit_code == 0 and "agent_live01" in result.output and "hit rate 33.3%" in result.output


def test_a_profile_the_platform_cannot_give_still_yields_a_greeting(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any, platform: FakeElevenLabs, as_agent: AsAgent
) -> None:
    tenant = voice["tenant"]
    admin.execute("select cortex.create_agent(%s, 'ghost')", (tenant.id,))
    with as_agent(tenant, "system") as conn:
        call(conn, "add_voice_agent", platform_agent_id="agent_ghost01", agent="ghost")
        call(conn, "set_voice_secrets", platform_api_key=platform.key)
    post_call(client, event("conv_g", "agent_ghost01", MEMOIR_CALL))
    work(dsn)
    assert platform.requests == [("/v1/convai/agents/agent_ghost01", platform.key)]  # 404 from the platform
    assert one(admin, "select count(*) as n from cortex.voice_caller_states where agent = 'ghost'")["n"] == 1


# --- the model: Claude Haiku with seed 004's XML prompt ---------------------------------------------------------


def test_the_greeting_comes_from_claude_haiku_with_the_xml_prompt(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any, claude: FakeAnthropic
) -> None:
    post_call(client, event("conv_h", MARGARET, MEMOIR_CALL))
    work(dsn)
    voice_requests = [r for r in claude.requests if "<conversation_transcript>" in r["messages"][0]["content"]]
    assert len(voice_requests) == 1
    request = voice_requests[0]
    assert request["model"] == get_settings().summary_model
    prompt = request["messages"][0]["content"]
    for section in ("agent_profile", "caller_profile", "conversation_transcript", "explicit_instructions",
                    "constraints", "examples"):  # fmt: skip
        assert f"<{section}>" in prompt and f"</{section}>" in prompt
    assert "<agent_name>Margaret</agent_name>" in prompt and "<name>Stefan</name>" in prompt
    assert "User: Hi, my name is Stefan." in prompt
    answer = answer_of(client_data(client, voice, MARGARET))
    assert answer["conversation_config_override"]["agent"]["first_message"] == VOICE_ANSWER["next_greeting"]
    state = one(admin, "select sentiment, key_topics, model from cortex.voice_caller_states")
    assert state == {"sentiment": "engaged", "key_topics": VOICE_ANSWER["key_topics"],
                     "model": get_settings().summary_model}  # fmt: skip
    usage = one(
        admin, "select model, input_tokens, output_tokens from cortex.token_usage where operation = 'voice_greeting'"
    )
    assert usage["model"] == get_settings().summary_model and usage["input_tokens"] > 0


def test_an_off_schema_answer_stores_nothing_and_is_recorded(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any, claude: FakeAnthropic
) -> None:
    claude.reply = lambda request: json.dumps({**VOICE_ANSWER, "key_topics": ["only one"], "sentiment": "happy"})
    post_call(client, event("conv_bad_model", MARGARET, MEMOIR_CALL))
    work(dsn)
    assert one(admin, "select count(*) as n from cortex.voice_caller_states")["n"] == 0
    assert one(admin, "select count(*) as n from cortex.voice_callers")["n"] == 0
    job = one(admin, "select status, last_error from cortex.jobs where kind = 'voice_post_call'")
    assert job["status"] == "queued" and "VoiceState" in job["last_error"]
    failed = one(admin, "select metadata from cortex.token_usage where operation = 'voice_greeting'")
    assert "VoiceState" in failed["metadata"]["error"]
    assert one(admin, "select status from cortex.voice_calls")["status"] == "queued"


# --- secrets and admin calls ------------------------------------------------------------------------------------


def test_only_admins_set_secrets_and_no_api_role_reads_them(
    client: TestClient, voice: dict[str, Any], as_agent: AsAgent, admin: Any
) -> None:
    tenant = voice["tenant"]
    refused = client.post(f"{V1}/secrets", headers=bearer(tenant.keys["luna"]), json={"rotate_webhook_secret": True})
    assert refused.status_code == 403
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "system") as conn:
        conn.execute("select post_call_secret from cortex.voice_settings")
    stored = one(admin, "select webhook_secret_hash, post_call_secret from cortex.voice_settings")
    assert stored["webhook_secret_hash"] == service.hashlib.sha256(voice["secret"].encode()).digest()
    assert voice["secret"] not in json.dumps(stored, default=str)
    argv = ["--tenant", tenant.slug, "--json", "voice", "secrets", "--rotate-webhook-secret"]
    rotated = CliRunner().invoke(main, argv, catch_exceptions=False)
    new_secret = json.loads(rotated.output)["webhook_secret"]
    assert new_secret.startswith("cvs_") and new_secret != voice["secret"]
    service.clear_secret_cache()
    assert client_data(client, voice, MARGARET).headers["X-Voice-Fallback"] == "unauthorized"
    assert "X-Voice-Fallback" not in client_data(client, {"secret": new_secret}, MARGARET).headers


def test_a_voice_agent_maps_to_one_cortex_agent(client: TestClient, voice: dict[str, Any]) -> None:
    with pytest.raises(CortexError) as err:
        service.add_agent({"role": "authenticated", "tenant_id": voice["tenant"].id, "agent": "system"},
                          platform_agent_id="agent_other", agent="margaret")  # fmt: skip
    assert err.value.status == 409 and err.value.field == "agent"
    with pytest.raises(CortexError) as bad:
        service.add_agent({"role": "authenticated", "tenant_id": voice["tenant"].id, "agent": "system"},
                          platform_agent_id="bad id!", agent="luna")  # fmt: skip
    assert bad.value.status == 422 and bad.value.field == "platform_agent_id"


def test_the_sentiment_vocabulary_is_the_seeds_four_plus_engaged(admin: Any) -> None:
    assert one(admin, "select cortex.voice_sentiments() as v")["v"] == [
        "satisfied", "neutral", "frustrated", "confused", "engaged"]  # fmt: skip


def test_a_caller_lookup_names_the_phone_field(client: TestClient, voice: dict[str, Any]) -> None:
    luna = bearer(voice["tenant"].keys["luna"])
    bad = client.get(f"{V1}/callers/12345", headers=luna)
    assert bad.status_code == 422 and error_of(bad)["field"] == "phone"
    unknown = client.get(f"{V1}/callers/{STEFAN}", headers=luna)
    assert unknown.status_code == 404 and error_of(unknown)["field"] == "phone"


def test_the_post_call_jobs_store_each_call_once_even_when_run_again(
    client: TestClient, voice: dict[str, Any], dsn: str, admin: Any
) -> None:
    post_call(client, event("conv_twice", MARGARET, MEMOIR_CALL))
    work(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        again = service.process_call(conn, voice["tenant"].id, "conv_twice")
    assert again["skipped"] == "already stored"
    assert one(admin, "select conversation_count from cortex.voice_caller_states")["conversation_count"] == 1


def test_a_profile_source_outside_the_vocabulary_is_refused_by_the_table(admin: Any, tenant: Tenant) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        admin.execute(
            "insert into cortex.voice_agents (tenant_id, platform_agent_id, agent, profile_source)"
            " values (%s, 'a1', 'luna', 'guessed')",
            (tenant.id,),
        )
