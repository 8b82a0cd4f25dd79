"""Limits on what callers send (supabase/migrations/20261122001800_limits.sql, cortex.schemas):
JSON depth and size, tag bounds and email normalisation hold on the PostgREST path as on the HTTP
one, and webhook delivery survives a message it cannot encode."""

from __future__ import annotations

import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from starlette.testclient import TestClient

from cortex import db as cortex_db
from cortex import schemas
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.notifications import delivery as webhooks
from tests.api_helpers import bearer, body_of
from tests.conftest import AsAgent, Tenant
from tests.test_notifications import Receiver, add_endpoint, notify

Admin = psycopg.Connection[dict[str, Any]]
V1 = "/api/v1"
DEEP = "[" * 3000 + "]" * 3000


def deep(levels: int) -> Any:
    """A JSON value nested `levels` deep (`[]` is 1)."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def written(admin: Admin) -> dict[str, int]:
    row = admin.execute(
        "select (select count(*) from cortex.contacts) as contacts,"
        " (select count(*) from cortex.interactions) as interactions,"
        " (select count(*) from cortex.handoff_events) as handoffs,"
        " (select count(*) from cortex.outbox) as outbox"
    ).fetchone()
    assert row is not None
    return dict(row)


def refused(as_agent: AsAgent, tenant: Tenant, function: str, **args: Any) -> CortexError:
    """The error `function` raises for luna on the PostgREST path (one transaction, as PostgREST runs it)."""
    with pytest.raises(CortexError) as caught, as_agent(tenant, "luna") as conn:
        cortex_db.call(conn, function, **args)
    return caught.value


# --- JSON depth and size (SQL path) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("function", "args", "field"),
    [
        ("upsert_contact", {"email": "deep@acme.com", "custom_fields": {"a": DEEP}}, "custom_fields"),
        ("upsert_contact", {"email": "big@acme.com", "custom_fields": {"a": "x" * 70_000}}, "custom_fields"),
        ("update_contact", {"patch": {"custom_fields": {"a": DEEP}}}, "custom_fields"),
        ("log_interaction", {"type": "note", "summary": "s", "metadata": {"a": DEEP}}, "metadata"),
        ("log_interaction", {"type": "note", "summary": "s", "metadata": {"a": deep(33)}}, "metadata"),
        (
            "create_handoff",
            {"to_agent": "mia", "reason": "other", "context_summary": "c", "metadata": {"a": DEEP}},
            "metadata",
        ),
    ],
    ids=["custom_fields deep", "custom_fields big", "patch deep", "metadata deep", "metadata 34", "handoff deep"],
)
def test_json_deeper_or_larger_than_the_limit_is_refused_on_the_sql_path(
    admin: Admin,
    tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
    function: str,
    args: dict[str, Any],
    field: str,
) -> None:
    if function != "upsert_contact":
        key = "contact_id"
        args = {key: contact["id"], **args}
    # PostgREST hands Postgres the JSON text: so do we (json.dumps would recurse 3,000 deep).
    args = {k: cortex_db.typed(_json_text(v), "jsonb") if isinstance(v, dict) else v for k, v in args.items()}
    before = written(admin)
    error = refused(as_agent, tenant, function, **args)
    assert (error.status, error.field, error.sqlstate) == (422, field, "22023"), error
    assert "nested deeper than 32" in error.message or "too large" in error.message
    assert written(admin) == before


def _json_text(value: Any) -> str:
    """JSON text of `value`; the string DEEP stands for itself (3,000 levels, never decoded)."""
    if value is DEEP:
        return value
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}": {_json_text(v)}' for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value + '"'
    return str(value)


def test_json_at_the_limit_is_stored(tenant: Tenant, as_agent: AsAgent) -> None:
    with as_agent(tenant, "luna") as conn:
        row = cortex_db.call(
            conn, "upsert_contact", email="edge@acme.com",
            custom_fields=cortex_db.typed(_json_text({"a": deep(31)}), "jsonb"),
        )  # fmt: skip
    assert schemas.json_depth(row["custom_fields"]) == schemas.MAX_JSON_DEPTH


def test_check_json_measures_depth_and_size(admin: Admin) -> None:
    def check(value: str, depth: int = 32, size: int = 65536) -> str:
        try:
            admin.execute("select cortex.check_json(%s::jsonb, 'v', %s, %s)", (value, depth, size))
        except psycopg.errors.InvalidParameterValue as exc:
            assert exc.diag.column_name == "v"
            return exc.diag.message_primary or ""
        return "ok"

    assert check('{"a": {"b": [1]}}', depth=3) == "ok"
    assert check('{"a": {"b": [1]}}', depth=2) == "v is nested deeper than 2 levels"
    assert check("[[[]]]", depth=3) == "ok" and check("[[[]]]", depth=2) != "ok"
    assert check('"scalar"', depth=1) == "ok" and check("[]", depth=1) == "ok"
    assert check(f'["{"x" * 100}"]', size=100).startswith("v is too large: 104 bytes")
    assert admin.execute("select cortex.check_json(null, 'v') is null as ok").fetchone() == {"ok": True}


def test_python_and_sql_measure_the_same_depth() -> None:
    for levels in (1, 2, 31, 32, 33):
        assert schemas.json_depth({"a": deep(levels)}) == levels + 1
    assert schemas.json_depth("x") == 0 and schemas.json_depth({}) == 1


# --- tags ---------------------------------------------------------------------------------------------


def test_tags_are_bounded_in_sql_on_create_patch_and_accumulation(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    before = written(admin)
    long = refused(as_agent, tenant, "upsert_contact", email="t@acme.com", tags=["ok", "x" * 101])
    assert (long.status, long.field) == (422, "tags") and "at most 100 characters" in long.message
    many = refused(as_agent, tenant, "upsert_contact", email="t@acme.com", tags=[f"t{i}" for i in range(101)])
    assert (many.status, many.field) == (422, "tags")
    patched = refused(as_agent, tenant, "update_contact", contact_id=contact["id"], patch={"tags": ["y" * 500]})
    assert (patched.status, patched.field) == (422, "tags")
    assert written(admin) == before
    # Tags accumulate on upsert: the 101st is refused, the contact keeps its 100.
    with as_agent(tenant, "luna") as conn:
        cortex_db.call(conn, "upsert_contact", email=contact["email"], tags=[f"t{i}" for i in range(100)])
    grown = refused(as_agent, tenant, "upsert_contact", email=contact["email"], tags=["one-more"])
    assert (grown.status, grown.field) == (422, "tags")
    row = admin.execute("select cardinality(tags) as n from cortex.contacts where id = %s", (contact["id"],)).fetchone()
    assert row == {"n": 100}


def test_a_tag_of_100_characters_is_indexed_and_found(client: TestClient, tenant: Tenant) -> None:
    tag = ("é" * 50) + ("z" * 50)
    key = tenant.keys["luna"]
    client.post(f"{V1}/contacts", json={"email": "tagged@acme.com", "tags": [tag]}, headers=bearer(key))
    found = body_of(client.get(f"{V1}/contacts", params={"tag": tag}, headers=bearer(key)))
    assert [c["email"] for c in found["items"]] == ["tagged@acme.com"]


# --- emails -------------------------------------------------------------------------------------------


def test_emails_are_nfc_normalised_so_one_address_is_one_contact(
    client: TestClient, tenant: Tenant, as_agent: AsAgent
) -> None:
    key = tenant.keys["luna"]
    decomposed = "jose\u0301@acme.com"  # e + combining acute
    precomposed = "jos\u00e9@acme.com"
    first = client.post(f"{V1}/contacts", json={"email": decomposed}, headers=bearer(key))
    assert first.status_code == 201 and first.json()["email"] == precomposed
    second = client.post(f"{V1}/contacts", json={"email": precomposed.upper()}, headers=bearer(key))
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    # The PostgREST path normalises the same way.
    with as_agent(tenant, "luna") as conn:
        row = cortex_db.call(conn, "upsert_contact", email=" JOSE\u0301@ACME.COM ")
    assert row["id"] == first.json()["id"] and row["created"] is False


@pytest.mark.parametrize("bad", ["\u200b", "\u200d", "\u202e", "\u2066", "\u00a0", "\u00ad", "\ufeff", "\U000e0041"])
def test_emails_with_invisible_characters_are_refused_in_sql(
    admin: Admin, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], bad: str
) -> None:
    before = written(admin)
    created = refused(as_agent, tenant, "upsert_contact", email=f"jo{bad}hn@acme.com")
    assert (created.status, created.field) == (422, "email")
    assert f"U+{ord(bad):04X}" in created.message
    patched = refused(as_agent, tenant, "update_contact", contact_id=contact["id"], patch={"email": f"a{bad}@b.co"})
    assert (patched.status, patched.field) == (422, "email")
    # A direct insert under RLS meets the trigger and the check all the same.
    with pytest.raises(psycopg.errors.InvalidParameterValue), as_agent(tenant, "luna") as conn:
        conn.execute("insert into cortex.contacts (tenant_id, email) values (%s, %s)", (tenant.id, f"x{bad}@acme.com"))
    assert written(admin) == before


def test_python_and_sql_refuse_the_same_invisible_characters(admin: Admin) -> None:
    listed = [cp for a, b in schemas.INVISIBLE_RANGES for cp in range(a, b + 1) if cp]
    known = set(listed)
    # Every character of the refused Unicode categories is listed (space aside) ...
    categories = {"Cc", "Cf", "Zl", "Zp", "Zs"}
    missing = [hex(cp) for cp in range(1, 0x110000) if unicodedata.category(chr(cp)) in categories and cp not in known]
    assert missing == ["0x20"]
    # ... and SQL refuses each listed one, and accepts the visible neighbours of every range.
    rows = admin.execute(
        "select c, substring('a' || chr(c) || 'b' from cortex.invisible_characters()) is not null as bad"
        " from unnest(%s::int[]) c",
        (listed + [b + 1 for _, b in schemas.INVISIBLE_RANGES if b + 1 not in known],),
    ).fetchall()
    verdict = {r["c"]: r["bad"] for r in rows}
    assert all(verdict[cp] for cp in listed)
    visible = [cp for cp in verdict if cp not in known]
    assert visible and not any(verdict[cp] for cp in visible)


# --- webhook delivery ------------------------------------------------------------------------------


@contextmanager
def _receiver() -> Iterator[Receiver]:
    receiver = Receiver({})
    try:
        yield receiver
    finally:
        receiver.close()


def _insert_deep_message(admin: Admin, tenant: Tenant) -> int:
    """An outbox message nested 3,000 deep, written as the owner past the new limit (as a row
    stored before the limits existed would be)."""
    with admin.transaction():
        admin.execute("set local session_replication_role = replica")  # the owner skips triggers
        row = admin.execute(
            "insert into cortex.outbox (tenant_id, event, recipient, payload)"
            " values (%s, 'handoff.created', 'agent:jasper', jsonb_build_object('metadata', %s::jsonb))"
            " returning id",
            (tenant.id, DEEP),
        ).fetchone()
    assert row is not None
    return int(row["id"])


def test_a_message_nested_3000_deep_is_dead_lettered_alone_and_delivery_goes_on(
    admin: Admin, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CORTEX_WORKER_POLL", "1")
    get_settings.cache_clear()
    with _receiver() as receiver:
        add_endpoint(admin, tenant, "agent:jasper", receiver)
        bad = _insert_deep_message(admin, tenant)
        good = [notify(admin, tenant, "handoff.created", "agent:jasper", {"n": n}) for n in range(3)]
        stop = threading.Event()
        thread = webhooks.start_in_background(stop, "deep")
        try:
            _wait(lambda: len(receiver.processed) == 3)
            late = notify(admin, tenant, "handoff.created", "agent:jasper", {"n": "late"})
            _wait(lambda: len(receiver.processed) == 4)
            assert thread.is_alive()
        finally:
            stop.set()
            thread.join(timeout=10)
    rows = admin.execute("select id, status from cortex.outbox where id = any(%s)", ([bad, *good, late],)).fetchall()
    statuses = {r["id"]: r["status"] for r in rows}
    assert statuses == {bad: "dead", **dict.fromkeys([*good, late], "delivered")}
    row = admin.execute("select attempts, last_error from cortex.outbox where id = %s", (bad,)).fetchone()
    assert row is not None and row["attempts"] == 1 and "nested too deeply" in row["last_error"]
    alert = admin.execute(
        "select count(*) as n from cortex.alerts"
        " where kind = 'webhook_dead_letter' and (details ->> 'outbox_id')::bigint = %s",
        (bad,),
    ).fetchone()
    assert alert == {"n": 1}


def test_the_outbox_refuses_new_deep_payloads(admin: Admin, tenant: Tenant) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as caught:
        admin.execute(
            "select cortex.notify(%s, 'x.y', 'monitor', jsonb_build_object('a', %s::jsonb))", (tenant.id, DEEP)
        )
    assert caught.value.diag.column_name == "payload"


def _wait(done: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
