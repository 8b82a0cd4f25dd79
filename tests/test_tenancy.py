"""One tenant never sees or changes another's rows: every API function, on the PostgREST path.

(The HTTP path is covered in test_api.py with a second tenant's key.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from cortex.db import call
from cortex.errors import CortexError

from tests.conftest import AsAgent, Tenant

# Each API function, called by the other tenant against the first tenant's contact.
Attack = Callable[[psycopg.Connection[Any], str], Any]
ATTACKS: dict[str, Attack] = {
    "get_contact": lambda c, cid: call(c, "get_contact", contact_id=cid),
    "update_contact": lambda c, cid: call(c, "update_contact", contact_id=cid, patch={"name": "pwned"}),
    "log_interaction": lambda c, cid: call(c, "log_interaction", contact_id=cid, type="note", summary="x"),
    "list_interactions": lambda c, cid: call(c, "list_interactions", contact_id=cid),
    "get_context": lambda c, cid: call(c, "get_context", contact_id=cid, level=3),
    "refresh_context": lambda c, cid: call(
        c, "refresh_context", contact_id=cid, context={"summary": "forged"}
    ),
}
# Functions that take no contact id: they must simply not return the other tenant's rows.
LISTINGS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "search_contacts": lambda c: call(c, "search_contacts", search="john")["items"],
    "upsert_contact": lambda c: [call(c, "upsert_contact", email="john@acme.com", name="Other John")],
}


def _api_functions(admin: Any) -> set[str]:
    rows = admin.execute(
        """select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace
           where n.nspname = 'public' and has_function_privilege('authenticated', p.oid, 'execute')"""
    ).fetchall()
    return {r["proname"] for r in rows}


def test_every_api_function_has_an_isolation_check(admin: Any) -> None:
    assert _api_functions(admin) <= set(ATTACKS) | set(LISTINGS)


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_other_tenant_cannot_reach_a_contact_through(
    name: str, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any], admin: Any
) -> None:
    before = admin.execute(
        "select (select count(*) from cortex.interactions) as i, "
        "(select count(*) from cortex.contact_context) as x, "
        "(select name from cortex.contacts where id = %s) as name",
        (contact["id"],),
    ).fetchone()
    with pytest.raises(CortexError) as err, as_agent(other_tenant, "luna") as conn:
        ATTACKS[name](conn, contact["id"])
    assert err.value.status == 404
    after = admin.execute(
        "select (select count(*) from cortex.interactions) as i, "
        "(select count(*) from cortex.contact_context) as x, "
        "(select name from cortex.contacts where id = %s) as name",
        (contact["id"],),
    ).fetchone()
    assert after == before


@pytest.mark.parametrize("name", sorted(LISTINGS))
def test_other_tenant_sees_only_its_own_rows_through(
    name: str, tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(other_tenant, "luna") as conn:
        rows = LISTINGS[name](conn)
    assert all(r["id"] != contact["id"] for r in rows)
    with as_agent(tenant, "luna") as conn:
        mine = call(conn, "get_contact", contact_id=contact["id"])
    assert mine["name"] == "John Smith"


def test_tables_read_directly_show_only_the_callers_tenant(
    tenant: Tenant, other_tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "log_interaction", contact_id=contact["id"], type="note", summary="hello")
    with as_agent(other_tenant, "luna") as conn:
        for table in (
            "contacts",
            "interactions",
            "token_usage",
            "jobs",
            "contact_context",
            "agents",
            "agent_config",
            "model_prices",
            "alerts",
        ):
            rows = conn.execute(f"select tenant_id::text from cortex.{table}").fetchall()
            assert {r[0] for r in rows} <= {other_tenant.id}, table
        tenants = conn.execute("select id::text from cortex.tenants").fetchall()
        assert [r[0] for r in tenants] == [other_tenant.id]


def test_a_request_without_tenant_claims_is_refused(dsn: str, contact: dict[str, Any]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("set local role authenticated")
        with pytest.raises(CortexError) as err:
            call(conn, "get_contact", contact_id=contact["id"])
    assert err.value.status == 401


def test_anon_cannot_call_api_functions(dsn: str, contact: dict[str, Any]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute("set local role anon")
        with pytest.raises(CortexError) as err:
            call(conn, "get_contact", contact_id=contact["id"])
    assert err.value.status == 403


def test_api_roles_cannot_read_api_keys(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege), as_agent(tenant, "luna") as conn:
        conn.execute("select * from cortex.agent_keys")
