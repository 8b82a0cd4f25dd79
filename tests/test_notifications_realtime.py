"""Realtime: what Supabase Realtime and local LISTEN subscribers receive when handoffs and working
contexts change.

No Realtime server can run here, so the publication is read the way Realtime reads it: through a
logical replication slot with the pgoutput plugin and the supabase_realtime publication, decoded
below (protocol version 1). Broadcast is checked against a stand-in of Supabase's realtime schema
(the function's real signature, a messages table with RLS), with the migration applied again.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cortex.db import call
from tests.conftest import AsAgent, Tenant

ROOT = Path(__file__).resolve().parent.parent
REALTIME_MIGRATION = ROOT / "supabase" / "migrations" / "20261122001100_notifications_realtime.sql"
Admin = psycopg.Connection[dict[str, Any]]


# --- a minimal pgoutput decoder ---------------------------------------------------------------


@dataclass
class Change:
    """One decoded row change: I(nsert), U(pdate) or D(elete) of schema.table with its new values."""

    op: str
    table: str
    values: dict[str, str | None]


@dataclass
class PgOutput:
    """Decodes pgoutput v1 messages: Relation messages name the columns, row messages use them."""

    relations: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)

    @staticmethod
    def _string(data: bytes, pos: int) -> tuple[str, int]:
        end = data.index(b"\0", pos)
        return data[pos:end].decode(), end + 1

    @staticmethod
    def _tuple(data: bytes, pos: int, names: list[str]) -> tuple[dict[str, str | None], int]:
        (ncols,) = struct.unpack_from("!h", data, pos)
        pos += 2
        values: dict[str, str | None] = {}
        for i in range(ncols):
            kind = data[pos : pos + 1]
            pos += 1
            if kind == b"t":
                (length,) = struct.unpack_from("!i", data, pos)
                pos += 4
                values[names[i]] = data[pos : pos + length].decode()
                pos += length
            elif kind == b"n":
                values[names[i]] = None
            # b"u": an unchanged TOASTed value, not sent
        return values, pos

    def feed(self, data: bytes) -> None:
        """Decodes one message (a row of pg_logical_slot_peek_binary_changes)."""
        kind = data[:1]
        if kind == b"R":
            (relid,) = struct.unpack_from("!I", data, 1)
            schema, pos = self._string(data, 5)
            table, pos = self._string(data, pos)
            pos += 1  # replica identity setting
            (ncols,) = struct.unpack_from("!h", data, pos)
            pos += 2
            names = []
            for _ in range(ncols):
                pos += 1  # flags
                name, pos = self._string(data, pos)
                names.append(name)
                pos += 8  # type oid, type modifier
            self.relations[relid] = (f"{schema}.{table}", names)
        elif kind in (b"I", b"U", b"D"):
            (relid,) = struct.unpack_from("!I", data, 1)
            table, names = self.relations[relid]
            pos = 5
            values: dict[str, str | None] = {}
            while pos < len(data):
                marker = data[pos : pos + 1]
                values, pos = self._tuple(data, pos + 1, names)
                if marker == b"N":
                    break  # the new tuple comes last in an update
            self.changes.append(Change(kind.decode(), table, values))


@pytest.fixture
def slot(admin: Admin) -> Iterator[str]:
    """A temporary logical replication slot (pgoutput) on the test database, dropped at the end."""
    name = f"rt_{uuid.uuid4().hex[:12]}"
    admin.execute("select pg_create_logical_replication_slot(%s, 'pgoutput', true)", (name,))
    yield name
    admin.execute("select pg_drop_replication_slot(%s)", (name,))


def published_changes(admin: Admin, slot: str) -> list[Change]:
    """The changes of committed transactions that the supabase_realtime publication carries."""
    decoder = PgOutput()
    rows = admin.execute(
        "select data from pg_logical_slot_peek_binary_changes(%s, null, null,"
        " 'proto_version', '1', 'publication_names', 'supabase_realtime')",
        (slot,),
    ).fetchall()
    for row in rows:
        decoder.feed(bytes(row["data"]))
    return decoder.changes


def store_context(admin: Admin, tenant: Tenant, contact_id: str, summary: str) -> None:
    """Writes a contact's working context as the worker does (as the owner)."""
    admin.execute(
        "insert into cortex.contact_context (tenant_id, contact_id, summary) values (%s, %s, %s)"
        " on conflict (tenant_id, contact_id) do update set summary = excluded.summary",
        (tenant.id, contact_id, summary),
    )


def hand_off(as_agent: AsAgent, tenant: Tenant, contact_id: str, urgency: str = "high") -> dict[str, Any]:
    """Luna hands the contact to Jasper, through the API function."""
    with as_agent(tenant, "luna") as conn:
        result: dict[str, Any] = call(
            conn,
            "create_handoff",
            contact_id=contact_id,
            to_agent="jasper",
            reason="upsell_opportunity",
            context_summary="Wants the enterprise plan.",
            urgency=urgency,
        )
    return result


# --- the publication --------------------------------------------------------------------------


def test_handoffs_and_working_contexts_are_in_the_supabase_realtime_publication(admin: Admin) -> None:
    tables = admin.execute(
        "select schemaname || '.' || tablename as t from pg_publication_tables"
        " where pubname = 'supabase_realtime' order by 1"
    ).fetchall()
    assert [r["t"] for r in tables] == ["cortex.contact_context", "cortex.handoff_events"]
    publication = admin.execute(
        "select pubinsert, pubupdate, pubdelete from pg_publication where pubname = 'supabase_realtime'"
    ).fetchone()
    assert publication == {"pubinsert": True, "pubupdate": True, "pubdelete": True}


def test_a_logical_replication_slot_streams_handoff_and_context_changes_and_nothing_else(
    dsn: str, admin: Admin, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], slot: str
) -> None:
    store_context(admin, tenant, contact["id"], "John buys lids every month.")
    handoff = hand_off(as_agent, tenant, contact["id"])
    with as_agent(tenant, "jasper") as conn:
        call(conn, "update_handoff_status", handoff_id=handoff["id"], status="accepted")
    with as_agent(tenant, "luna") as conn:  # a contact change alone is not published
        call(conn, "update_contact", contact_id=contact["id"], patch={"stage": "opportunity"})
    with psycopg.connect(dsn) as rolled_back:  # nor is anything rolled back
        rolled_back.execute("update cortex.contact_context set summary = 'never' where tenant_id = %s", (tenant.id,))
        rolled_back.rollback()

    changes = published_changes(admin, slot)

    assert {c.table for c in changes} == {"cortex.contact_context", "cortex.handoff_events"}
    handoffs = [(c.op, c.values["status"]) for c in changes if c.table == "cortex.handoff_events"]
    assert handoffs == [("I", "pending"), ("U", "accepted")]
    first = next(c for c in changes if c.table == "cortex.handoff_events")
    assert first.values["id"] == handoff["id"] and first.values["tenant_id"] == tenant.id
    assert (first.values["to_agent"], first.values["urgency"]) == ("jasper", "high")
    contexts = [c for c in changes if c.table == "cortex.contact_context"]
    assert contexts[0].op == "I" and contexts[0].values["summary"] == "John buys lids every month."
    # The handoff recorded itself on the context: subscribers see that update too.
    assert any(c.op == "U" and c.values["last_handoff_id"] == handoff["id"] for c in contexts)
    assert all(c.values.get("summary") != "never" for c in contexts)


# --- local LISTEN subscribers ------------------------------------------------------------------


def test_listeners_on_cortex_changes_get_table_and_op_only_at_commit_only(
    dsn: str, admin: Admin, tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("listen cortex_changes")
        with psycopg.connect(dsn) as writer:
            writer.execute(
                "insert into cortex.contact_context (tenant_id, contact_id, summary) values (%s, %s, 'x')",
                (tenant.id, contact["id"]),
            )
            assert list(listener.notifies(timeout=0.2)) == []  # not before commit
            writer.rollback()
        assert list(listener.notifies(timeout=0.2)) == []  # nor after a rollback

        store_context(admin, tenant, contact["id"], "Fresh context.")
        handoff = hand_off(as_agent, tenant, contact["id"])

        got = [json.loads(n.payload) for n in listener.notifies(timeout=0.5)]
    # Any role can LISTEN, so the signal names the table and the operation, nothing else: no
    # tenant, no key, no row contents (subscribers read the change under RLS).
    assert {"schema": "cortex", "table": "contact_context", "op": "INSERT"} in got
    assert {"schema": "cortex", "table": "handoff_events", "op": "INSERT"} in got
    assert all(set(n) == {"schema", "table", "op"} for n in got)
    text = json.dumps(got)
    assert tenant.id not in text and contact["id"] not in text and handoff["id"] not in text


# --- Supabase Broadcast ------------------------------------------------------------------------

# Supabase's realtime objects, reduced to what the migration touches: the function with its real
# signature (it inserts into realtime.messages, which Realtime reads), realtime.topic() as
# Realtime sets it for an authorisation check, and messages under RLS.
REALTIME_STAND_IN = """
create schema realtime;
create table realtime.messages (
  id bigint generated always as identity primary key, topic text not null, extension text not null,
  payload jsonb, event text, private boolean default true, inserted_at timestamptz not null default now());
alter table realtime.messages enable row level security;
grant usage on schema realtime to authenticated;
grant select on realtime.messages to authenticated;
create function realtime.topic() returns text language sql stable
  as $$ select nullif(current_setting('realtime.topic', true), '') $$;
grant execute on function realtime.topic() to authenticated;
create function realtime.broadcast_changes(topic_name text, event_name text, operation text, table_name text,
  table_schema text, new record, old record, level text default 'ROW') returns void
language plpgsql as $$
begin
  insert into realtime.messages (topic, extension, event, payload)
  values (topic_name, 'broadcast', event_name,
          jsonb_build_object('operation', operation, 'table', table_name, 'schema', table_schema,
                             'record', to_jsonb(new), 'old_record', to_jsonb(old)));
end $$;
"""


def test_without_a_realtime_schema_no_broadcast_trigger_is_attached(admin: Admin) -> None:
    triggers = admin.execute(
        "select c.relnamespace::regnamespace || '.' || c.relname as t, tgname"
        " from pg_trigger g join pg_class c on c.oid = g.tgrelid"
        " where not tgisinternal and tgname like '%%_change' order by 1, 2"
    ).fetchall()
    assert triggers == [
        {"t": "cortex.contact_context", "tgname": "contact_context_notify_change"},
        {"t": "cortex.handoff_events", "tgname": "handoff_events_notify_change"},
    ]


def test_where_realtime_exists_changes_are_broadcast_on_private_per_tenant_topics(
    dsn: str,
    admin: Admin,
    tenant: Tenant,
    other_tenant: Tenant,
    as_agent: AsAgent,
    contact: dict[str, Any],
) -> None:
    admin.execute(REALTIME_STAND_IN)
    admin.execute(REALTIME_MIGRATION.read_text())  # applied again, now that realtime exists

    handoff = hand_off(as_agent, tenant, contact["id"], urgency="urgent")

    messages = admin.execute("select topic, event, payload from realtime.messages order by id").fetchall()
    handoff_topic = f"tenant:{tenant.id}:handoff_events"
    [created] = [m for m in messages if m["topic"] == handoff_topic]
    assert created["event"] == "INSERT"
    assert created["payload"]["record"]["id"] == handoff["id"]
    assert created["payload"]["record"]["urgency"] == "urgent"
    assert any(m["topic"] == f"tenant:{tenant.id}:contact_context" for m in messages)

    def visible(t: Tenant, topic: str) -> int:
        # What Realtime does before it lets a subscriber join a private channel.
        with psycopg.connect(dsn) as conn:
            conn.execute("set local role authenticated")
            conn.execute(
                "select set_config('request.jwt.claims', %s, true), set_config('realtime.topic', %s, true)",
                (json.dumps({"role": "authenticated", "tenant_id": t.id, "agent": "jasper"}), topic),
            )
            # Realtime sends a channel the messages of its topic, if the policies let it join.
            row = conn.execute("select count(*) from realtime.messages where topic = %s", (topic,)).fetchone()
            assert row is not None
            return int(row[0])

    assert visible(tenant, handoff_topic) >= 1
    assert visible(other_tenant, handoff_topic) == 0  # another tenant cannot join this topic
    assert visible(other_tenant, f"tenant:{other_tenant.id}:handoff_events") == 0
