"""The `cortex` command line, run in-process with click's CliRunner against a real test database.

Operators act on a tenant as one of its agents, so every rule of the SQL functions applies to
them; these tests prove the commands reach those functions, print what they answer (text for
people, the exact JSON with --json) and exit 0, 1 (Cortex or the database said no) or 2 (bad
arguments).
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from cortex.cli import main
from cortex.db import call
from cortex.demo import load_demo
from tests.conftest import AsAgent, Tenant, TenantFactory

Admin = psycopg.Connection[dict[str, Any]]
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


def one(admin: Admin, query: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
    """The one row a query answers."""
    row = admin.execute(query, params).fetchone()
    assert row is not None
    return row


def claims_of(admin: Admin, key: str) -> Any:
    """What cortex.authenticate_key answers for a key (None when it does not authenticate)."""
    return one(admin, "select cortex.authenticate_key(%s) as c", (key,))["c"]


def count(admin: Admin, rows: str) -> int:
    """select count(*) from <rows>."""
    return int(one(admin, f"select count(*) as n from {rows}")["n"])


def cortex(*args: str, code: int = 0, stdin: str | None = None) -> Result:
    """Runs `cortex ARGS` in-process and checks its exit code."""
    result = CliRunner().invoke(main, list(args), input=stdin, catch_exceptions=False)
    assert result.exit_code == code, f"exit {result.exit_code}\n{result.output}"
    return result


def as_json(*args: str, code: int = 0, stdin: str | None = None) -> Any:
    """Runs `cortex --json ARGS` and parses its stdout."""
    return json.loads(cortex("--json", *args, code=code, stdin=stdin).stdout)


@pytest.fixture
def acme(dsn: str, tenant: Tenant) -> Tenant:
    """The test tenant, with DATABASE_URL pointing at the test database (the dsn fixture)."""
    return tenant


def test_contacts_upsert_get_update_search_in_text_and_json(acme: Tenant) -> None:
    t = ("--tenant", acme.slug, "--agent", "luna")
    created = as_json(
        *t,
        "contacts",
        "upsert",
        "--email",
        " Maria@NordBrew.de ",
        "--name",
        "Maria Jensen",
        "--company-name",
        "Nordbrew Roasters",
        "--stage",
        "qualified",
        "--tag",
        "roaster",
        "--tag",
        "dach",
        "--custom-field",
        "city=Hamburg",
        "--custom-field",
        "locations:=3",
    )
    assert created["created"] is True
    assert created["email"] == "maria@nordbrew.de"
    assert created["tags"] == ["dach", "roaster"]
    assert created["custom_fields"] == {"city": "Hamburg", "locations": 3}

    shown = cortex(*t, "contacts", "get", created["id"]).stdout
    assert "Maria Jensen <maria@nordbrew.de>  [qualified]" in shown
    assert "Nordbrew Roasters" in shown and "locations=3" in shown
    assert as_json(*t, "contacts", "get", created["id"]) == {k: v for k, v in created.items() if k != "created"}

    updated = as_json(
        *t,
        "contacts",
        "update",
        created["id"],
        "--set",
        "stage=customer",
        "--set",
        "tags=vip,eu",
        "--set",
        "phone=+49 40 123",
        "--clear",
        "company_name",
    )
    assert updated["stage"] == "customer" and updated["converted_at"] is not None
    assert updated["tags"] == ["eu", "vip"]
    assert updated["phone"] == "+4940123"  # E.164: formatting removed
    assert updated["company_name"] is None

    again = cortex(*t, "contacts", "upsert", "--email", "maria@nordbrew.de", "--tag", "gold").stdout
    assert "(created)" not in again and "eu, gold, vip" in again

    table = cortex(*t, "contacts", "search", "--search", "maria jensn").stdout.splitlines()
    assert table[0].split()[:4] == ["ID", "NAME", "EMAIL", "COMPANY"]
    assert created["id"] in table[1] and "customer" in table[1]
    found = as_json(*t, "contacts", "search", "--stage", "customer", "--tag", "vip")
    assert [c["id"] for c in found["items"]] == [created["id"]]
    assert as_json(*t, "contacts", "search", "--stage", "lost")["items"] == []
    assert cortex(*t, "contacts", "search", "--stage", "lost").stdout == "no contacts match\n"


def test_interactions_log_from_stdin_then_list_with_and_without_raw(acme: Tenant, contact: dict[str, Any]) -> None:
    t = ("--tenant", acme.slug, "--agent", "luna")
    email = "Hi Luna, order #1234 arrived late and half the lids are cracked. Please send replacements by Friday."
    logged = as_json(
        *t,
        "interactions",
        "log",
        "--contact-id",
        contact["id"],
        "--type",
        "email_received",
        "--direction",
        "inbound",
        "--subject",
        "Cracked lids",
        "--content-file",
        "-",
        "--thread-id",
        "tkt-1",
        "--metadata",
        '{"channel": "email"}',
        stdin=email,
    )
    assert logged["agent"] == "luna" and logged["type"] == "email_received"
    assert logged["analysis_status"] == "done" and logged["summary"]
    assert logged["sentiment"] in ("negative", "neutral") and logged["metadata"] == {"channel": "email"}
    assert logged["token_usage"]["input_tokens"] > 0

    text = cortex(
        *t,
        "interactions",
        "log",
        "--contact-id",
        contact["id"],
        "--type",
        "call",
        "--content",
        "Called John: he is happy with the replacement and will reorder 500 cups.",
    ).stdout
    assert text.startswith("logged: interaction ") and "(call by luna)" in text and "summary:" in text

    listed = as_json(*t, "interactions", "list", "--contact-id", contact["id"])
    assert [i["type"] for i in listed["items"]] == ["call", "email_received"]
    assert "raw_content" not in listed["items"][0]
    raw = as_json(
        *t,
        "interactions",
        "list",
        "--contact-id",
        contact["id"],
        "--type",
        "email_received",
        "--include-raw",
        "--since",
        "2020-01-01T00:00:00Z",
    )
    assert [i["raw_content"] for i in raw["items"]] == [email]
    table = cortex(*t, "interactions", "list", "--contact-id", contact["id"], "--agent", "luna").stdout
    assert table.splitlines()[0].split() == ["DATE", "AGENT", "TYPE", "SENTIMENT", "SUMMARY"]
    assert len(table.splitlines()) == 3


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_context_get_answers_each_level_within_its_token_budget(
    acme: Tenant, contact: dict[str, Any], level: int
) -> None:
    t = ("--tenant", acme.slug, "--agent", "mia")
    cortex(
        *t,
        "interactions",
        "log",
        "--contact-id",
        contact["id"],
        "--type",
        "order_placed",
        "--content",
        "John ordered 500 double-wall cups, delivery next Tuesday.",
    )
    got = as_json(*t, "context", "get", contact["id"], "--level", str(level), "--refresh")
    assert got["level"] == level and got["contact_id"] == contact["id"]
    assert 0 < got["token_count"] <= got["token_budget"]
    assert got["header"]["name"] == "John Smith"
    assert got["is_stale"] is False
    assert ("context" in got) is (level >= 1)
    assert ("recent_interactions" in got) is (level >= 2)
    if level >= 1:
        assert "John" in got["context"]["summary"]
    text = cortex(*t, "context", "get", contact["id"], "--level", str(level)).stdout
    assert text.startswith("John Smith — Acme Corp [customer]")
    assert f"level {level}: " in text
    assert ("Recent interactions (1 of 1)" in text) is (level >= 2)


def test_context_refresh_regenerates_now_and_get_serves_it_fresh(acme: Tenant, contact: dict[str, Any]) -> None:
    t = ("--tenant", acme.slug, "--agent", "luna")
    before = as_json(*t, "context", "get", contact["id"])
    assert before["is_stale"] is True and before["generated_at"] is None
    out = as_json(*t, "context", "refresh", contact["id"])
    assert out["regenerated"] is True and out["token_count"] > 0
    after = as_json(*t, "context", "get", contact["id"])
    assert after["is_stale"] is False and after["generated_at"] == out["new_generated_at"]
    assert "regenerated context of" in cortex(*t, "context", "refresh", contact["id"]).stdout


def test_keys_create_list_and_revoke_and_a_revoked_key_no_longer_authenticates(acme: Tenant, admin: Admin) -> None:
    created = as_json("--tenant", acme.slug, "keys", "create", "luna", "--label", "laptop")
    key = created["key"]
    assert key.startswith(f"ctx_{created['prefix']}_") and created["agent"] == "luna"
    claims = claims_of(admin, key)
    assert claims["agent"] == "luna" and claims["tenant_id"] == acme.id

    listed = cortex("--tenant", acme.slug, "keys", "list").stdout
    assert created["prefix"] in listed and "laptop" in listed
    assert key not in listed  # only prefixes: keys are stored hashed

    revoked = cortex("--tenant", acme.slug, "keys", "revoke", created["prefix"]).stdout
    assert revoked == f"revoked key {created['prefix']} of luna\n"
    assert claims_of(admin, key) is None
    # The other keys of the tenant still work.
    assert claims_of(admin, acme.keys["luna"])
    again = cortex("--tenant", acme.slug, "keys", "revoke", key, code=1)
    assert "already revoked" in again.stderr


def test_a_key_of_another_tenant_cannot_be_revoked_through_this_tenant(
    acme: Tenant, make_tenant: TenantFactory, admin: Admin
) -> None:
    other = make_tenant("globex")
    prefix = other.keys["mia"].split("_")[1]
    result = cortex("--tenant", acme.slug, "keys", "revoke", prefix, code=1)
    assert "no key with prefix" in result.stderr
    assert claims_of(admin, other.keys["mia"])


def test_tenants_and_agents_create_make_a_tenant_its_agents_can_use(dsn: str, admin: Admin) -> None:
    made = as_json("tenants", "create", "Top Cup", "top-cup", "--time-zone", "Europe/Berlin")
    assert made["slug"] == "top-cup"
    cortex(
        "--tenant",
        "top-cup",
        "agents",
        "create",
        "helios",
        "--read-only",
        "--role",
        "monitor",
        "--max-input-tokens",
        "4000",
        "--daily-budget",
        "5000",
    )
    agent = as_json("--tenant", made["id"], "agents", "create", "luna", "--display-name", "Luna")
    assert agent == {
        "name": "luna",
        "display_name": "Luna",
        "role": "agent",
        "read_only": False,
        "max_input_tokens": 2000,
        "daily_token_budget": 100000,
    }
    row = admin.execute("select read_only, role from cortex.agents where name = 'helios'").fetchone()
    assert row == {"read_only": True, "role": "monitor"}
    listing = cortex("agents", "list").stdout  # the only tenant needs no --tenant
    assert [line.split()[0] for line in listing.splitlines()[1:]] == ["helios", "luna", "system"]
    assert "top-cup" in cortex("tenants", "list").stdout
    bad_zone = cortex("tenants", "create", "Nowhere", "nowhere", "--time-zone", "Mars/Olympus", code=1)
    assert 'unknown time zone "Mars/Olympus" (field: time_zone, sqlstate: 22023)' in bad_zone.stderr


def test_an_unknown_contact_exits_1_and_says_to_create_it(acme: Tenant) -> None:
    result = cortex("--tenant", acme.slug, "context", "get", UNKNOWN_ID, code=1)
    assert result.stdout == ""
    assert f"error: contact {UNKNOWN_ID} not found (field: contact_id, sqlstate: P0002)" in result.stderr
    assert "create the contact first" in result.stderr
    body = as_json("--tenant", acme.slug, "contacts", "get", UNKNOWN_ID, code=1)
    assert body["error"]["code"] == "not_found" and body["error"]["field"] == "contact_id"
    assert "create the contact first" in body["error"]["hint"]


def test_a_read_only_agent_cannot_write_and_nothing_is_written(acme: Tenant, admin: Admin) -> None:
    result = cortex("--tenant", acme.slug, "--agent", "helios", "contacts", "upsert", "--email", "x@y.de", code=1)
    assert 'error: agent "helios" is read-only (sqlstate: 42501)' in result.stderr
    assert count(admin, "cortex.contacts") == 0
    # Reading is allowed.
    assert as_json("--tenant", acme.slug, "--agent", "helios", "contacts", "search")["items"] == []


def test_a_bad_type_goes_to_sql_and_exits_1_naming_the_field(
    acme: Tenant, contact: dict[str, Any], admin: Admin
) -> None:
    args = (
        "--tenant",
        acme.slug,
        "--agent",
        "luna",
        "interactions",
        "log",
        "--contact-id",
        contact["id"],
        "--type",
        "carrier_pigeon",
        "--content",
        "coo",
    )
    result = cortex(*args, code=1)
    assert "error: type must be one of: email_sent," in result.stderr
    assert "(field: type, sqlstate: 22023)" in result.stderr
    body = as_json(*args, code=1)
    assert body["error"]["field"] == "type" and body["error"]["sqlstate"] == "22023"
    assert count(admin, "cortex.interactions") == 0


def test_unknown_tenant_or_agent_exits_1_with_what_exists(acme: Tenant) -> None:
    result = cortex("--tenant", "nope", "contacts", "search", code=1)
    assert 'error: unknown tenant "nope" (field: tenant)' in result.stderr
    assert "known tenants: acme" in result.stderr
    result = cortex("--tenant", acme.slug, "--agent", "bob", "contacts", "search", code=1)
    assert 'unknown agent "bob"' in result.stderr and "luna" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("contacts", "upsert", "--name", "No Email"), "Missing option '--email'"),
        (("context", "get", UNKNOWN_ID, "--level", "9"), "9 is not in the range 0<=x<=3"),
        (("contacts", "get", "not-a-uuid"), "'not-a-uuid' is not a valid UUID"),
        (
            ("interactions", "log", "--contact-id", UNKNOWN_ID, "--type", "note", "--metadata", "[1]"),
            "must be a JSON object",
        ),
        (("interactions", "list", "--contact-id", UNKNOWN_ID, "--since", "yesterday"), "not an ISO 8601 timestamp"),
        (("contacts", "update", UNKNOWN_ID), "nothing to change"),
        (("contacts", "update", UNKNOWN_ID, "--set", "stage"), "expected key=value"),
        (("contacts", "upsert", "--email", "a@b.de", "--custom-field", "n:={bad"), "not valid JSON"),
    ],
)
def test_bad_arguments_exit_2_before_anything_is_called(acme: Tenant, args: tuple[str, ...], message: str) -> None:
    result = cortex("--tenant", acme.slug, *args, code=2)
    assert message in result.stderr


def test_migrate_on_a_migrated_database_applies_nothing(dsn: str) -> None:
    assert cortex("migrate").stdout == "database is up to date\n"
    assert as_json("migrate") == {"applied": []}


def test_worker_once_summarises_interactions_logged_without_summary(
    acme: Tenant, contact: dict[str, Any], as_agent: AsAgent, admin: Admin
) -> None:
    with as_agent(acme, "luna") as conn:  # the PostgREST path: no summary, a job is queued
        call(
            conn,
            "log_interaction",
            contact_id=contact["id"],
            type="email_received",
            raw_content="Thanks, the cups arrived and look great!",
        )
    ran = as_json("queue", "work", "--once", "--batch", "5")
    assert ran["jobs_run"] >= 1
    row = one(admin, "select analysis_status, summary from cortex.interactions")
    assert row["analysis_status"] == "done" and row["summary"]


def test_demo_loads_top_cup_and_a_second_run_changes_nothing(dsn: str, admin: Admin, tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    info = load_demo(dsn, keys_file=keys_file)
    assert info.loaded is True and info.contacts == 50
    assert 300 <= info.interactions <= 700
    assert set(info.keys) == {"luna", "mia", "anna", "jasper", "helios"}
    assert stat.S_IMODE(keys_file.stat().st_mode) == 0o600
    assert json.loads(keys_file.read_text())["keys"] == info.keys
    for agent, key in info.keys.items():
        claims = claims_of(admin, key)
        assert claims["agent"] == agent and claims["tenant_id"] == info.tenant_id
    assert claims["read_only"] is True  # helios, the monitor

    stages = {r["stage"] for r in admin.execute("select distinct stage from cortex.contacts")}
    assert stages == {"prospect", "qualified", "opportunity", "customer", "churning", "lost", "recovered"}
    sentiments = {r["sentiment"] for r in admin.execute("select distinct sentiment from cortex.interactions")}
    assert {"positive", "neutral", "negative", "escalation"} <= sentiments
    assert 1 <= count(admin, "cortex.interactions where analysis_status = 'pending'") <= 10
    jobs = {
        r["kind"]: r["n"]
        for r in admin.execute("select kind, count(*) as n from cortex.jobs where status = 'queued' group by kind")
    }
    assert jobs["generate_context"] == 50 and jobs["summarise_interaction"] >= 1
    assert one(admin, "select time_zone from cortex.tenants where slug = 'top-cup'")["time_zone"] == "Europe/Berlin"

    def snapshot() -> dict[str, Any]:
        return one(
            admin,
            "select (select count(*) from cortex.interactions) as i, (select count(*) from cortex.agent_keys) as k,"
            " (select max(updated_at) from cortex.contacts) as c, (select count(*) from cortex.jobs) as j,"
            " (select count(*) from cortex.token_usage) as u",
        )

    before = snapshot()
    again = as_json("demo", "--keys-file", str(keys_file))
    assert again["loaded"] is False and again["tenant_id"] == info.tenant_id
    assert again["keys"] == info.keys
    assert (again["contacts"], again["interactions"]) == (info.contacts, info.interactions)
    assert snapshot() == before
    text = cortex("demo", "--keys-file", str(keys_file)).stdout
    assert "already loaded: 50 contacts" in text and info.keys["luna"] in text


def test_handoff_and_usage_commands_round_trip(dsn: str, make_tenant: Any) -> None:
    from click.testing import CliRunner

    from cortex.cli import main

    t = make_tenant("cli-handoffs")
    runner = CliRunner()
    base = ["--tenant", t.slug, "--json"]
    made = runner.invoke(main, [*base, "--agent", "anna", "contacts", "upsert", "--email", "p@x.co", "--name", "P"])
    cid = json.loads(made.stdout)["id"]
    created = runner.invoke(main, [*base, "--agent", "anna", "handoffs", "create", "--contact-id", cid,
                                   "--to-agent", "jasper", "--reason", "warm_reply", "--urgency", "high"])  # fmt: skip
    assert created.exit_code == 0, created.output
    hid = json.loads(created.stdout)["id"]
    pending = json.loads(runner.invoke(main, [*base, "--agent", "jasper", "handoffs", "pending",
                                              "--for-agent", "jasper"]).stdout)  # fmt: skip
    assert [h["id"] for h in pending["items"]] == [hid]
    accepted = runner.invoke(main, [*base, "--agent", "jasper", "handoffs", "update", hid, "--status", "accepted"])
    assert json.loads(accepted.stdout)["status"] == "accepted"
    illegal = runner.invoke(main, [*base, "--agent", "jasper", "handoffs", "update", hid, "--status", "pending"])
    assert illegal.exit_code == 1 and json.loads(illegal.stdout)["error"]["sqlstate"] == "55000"
    both = runner.invoke(main, [*base, "--agent", "anna", "handoffs", "create", "--contact-id", cid, "--to-agent",
                                "jasper", "--to-human-id", "rep", "--reason", "other"])  # fmt: skip
    assert both.exit_code == 1 and json.loads(both.stdout)["error"]["field"] == "to_agent"
    check = runner.invoke(main, [*base, "--agent", "anna", "usage", "budget-check", "anna", "--estimated-tokens", "10"])
    assert json.loads(check.stdout)["recommendation"] == "proceed"
    summary = runner.invoke(main, [*base, "--agent", "helios", "usage", "summary", "--period", "month"])
    assert summary.exit_code == 0
    data = json.loads(summary.stdout)
    # The generated handoff briefing was a (local) model call, metered against anna.
    assert data["period"] == "month" and data["by_agent"]["anna"]["operations"] >= 1


def test_outbox_dead_letters_are_listed_and_replayed(dsn: str, make_tenant: Any, admin: Any) -> None:
    from click.testing import CliRunner

    from cortex.cli import main

    t = make_tenant("cli-outbox")
    admin.execute(
        "insert into cortex.outbox (tenant_id, event, recipient, status, attempts, last_error) "
        "values (%s, 'handoff.created', 'agent:jasper', 'dead', 8, 'HTTP 500')",
        (t.id,),
    )
    runner = CliRunner()
    listed = runner.invoke(main, ["--tenant", t.slug, "--json", "notifications", "dead"])
    rows = json.loads(listed.stdout)
    assert [r["last_error"] for r in rows] == ["HTTP 500"]
    replayed = runner.invoke(main, ["--tenant", t.slug, "--json", "notifications", "replay", "--all"])
    assert json.loads(replayed.stdout) == {"replayed": 1}
    status = admin.execute("select status, attempts from cortex.outbox").fetchone()
    assert status == {"status": "pending", "attempts": 0}
    assert runner.invoke(main, ["--tenant", t.slug, "notifications", "replay"]).exit_code == 2
