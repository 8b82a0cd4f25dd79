"""upsert_contact, update_contact, get_contact and search_contacts through the SQL API."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from cortex.db import call
from cortex.errors import CortexError
from tests.conftest import AsAgent, Tenant


def test_upsert_contact_normalises_email_and_merges_on_second_call(tenant: Tenant, as_agent: AsAgent) -> None:
    with as_agent(tenant, "luna") as conn:
        first = call(
            conn,
            "upsert_contact",
            email="  John@ACME.com ",
            name="John",
            tags=["a"],
            custom_fields={"size": "50"},
        )
        second = call(
            conn,
            "upsert_contact",
            email="john@acme.com",
            stage="customer",
            tags=["b"],
            custom_fields={"industry": "cups"},
        )
    assert first["created"] is True and second["created"] is False
    assert second["id"] == first["id"]
    assert second["email"] == "john@acme.com"
    assert second["name"] == "John"
    assert second["tags"] == ["a", "b"]
    assert second["custom_fields"] == {"size": "50", "industry": "cups"}
    assert second["converted_at"] is not None


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"email": "not-an-email"}, "email"),
        ({"email": "a@b.co", "stage": "alien"}, "stage"),
        ({"email": "a@b.co", "owner_agent": "nobody"}, "owner_agent"),
        ({"email": "a@b.co", "custom_fields": Jsonb(["x"])}, "custom_fields"),
    ],
)
def test_upsert_contact_rejects_bad_fields_and_writes_nothing(
    tenant: Tenant, as_agent: AsAgent, admin: Any, args: dict[str, Any], field: str
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "upsert_contact", **args)
    assert err.value.field == field
    assert err.value.status == 422 and err.value.sqlstate == "22023"
    assert admin.execute("select count(*) as n from cortex.contacts").fetchone()["n"] == 0


def test_update_contact_sets_given_fields_clears_nulls_and_rejects_unknown_keys(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "mia") as conn:
        updated = call(
            conn,
            "update_contact",
            contact_id=contact["id"],
            patch={"phone": "+1 555 0100", "company_name": None, "tags": ["vip"]},
        )
    assert updated["phone"] == "+15550100"  # formatting removed: E.164
    assert updated["company_name"] is None
    assert updated["tags"] == ["vip"]
    assert updated["name"] == "John Smith"
    with pytest.raises(CortexError) as err, as_agent(tenant, "mia") as conn:
        call(conn, "update_contact", contact_id=contact["id"], patch={"nickname": "J"})
    assert err.value.field == "nickname"


def test_update_contact_to_an_email_already_taken_is_a_conflict(
    tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]
) -> None:
    with as_agent(tenant, "luna") as conn:
        call(conn, "upsert_contact", email="jane@acme.com")
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "update_contact", contact_id=contact["id"], patch={"email": "JANE@acme.com"})
    assert err.value.status == 409 and err.value.sqlstate == "23505"


def test_get_contact_of_unknown_id_is_not_found_with_a_hint_to_create_it(tenant: Tenant, as_agent: AsAgent) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "get_contact", contact_id=str(uuid.uuid4()))
    assert err.value.status == 404
    assert err.value.hint is not None and "POST /api/v1/contacts" in err.value.hint


def test_search_contacts_filters_and_finds_misspelt_names(tenant: Tenant, as_agent: AsAgent) -> None:
    with as_agent(tenant, "anna") as conn:
        call(
            conn,
            "upsert_contact",
            email="john@acme.com",
            name="John Smith",
            company_name="Acme Corp",
            stage="customer",
            tags=["midwest"],
            owner_agent="luna",
        )
        call(
            conn,
            "upsert_contact",
            email="mary@globex.com",
            name="Mary Jones",
            company_name="Globex",
            stage="prospect",
            tags=["east"],
        )
        call(
            conn,
            "upsert_contact",
            email="li@initech.io",
            name="Li Wei",
            company_name="Initech",
            stage="customer",
        )
        fuzzy = call(conn, "search_contacts", search="jon smth")
        by_company = call(conn, "search_contacts", search="globex")
        customers = call(conn, "search_contacts", stage="customer")
        tagged = call(conn, "search_contacts", tag="midwest")
        owned = call(conn, "search_contacts", owner_agent="luna")
        page = call(conn, "search_contacts", limit=1, offset=1, stage="customer")
    assert fuzzy["items"][0]["email"] == "john@acme.com"
    assert [c["email"] for c in by_company["items"]] == ["mary@globex.com"]
    assert {c["email"] for c in customers["items"]} == {"john@acme.com", "li@initech.io"}
    assert [c["email"] for c in tagged["items"]] == ["john@acme.com"]
    assert [c["email"] for c in owned["items"]] == ["john@acme.com"]
    assert len(page["items"]) == 1


@pytest.mark.parametrize(
    ("args", "field"), [({"limit": 101}, "limit"), ({"offset": -1}, "offset"), ({"stage": "x"}, "stage")]
)
def test_search_contacts_rejects_bad_paging_and_filters(
    tenant: Tenant, as_agent: AsAgent, args: dict[str, Any], field: str
) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "luna") as conn:
        call(conn, "search_contacts", **args)
    assert err.value.field == field


def test_read_only_agent_cannot_write_contacts(tenant: Tenant, as_agent: AsAgent, contact: dict[str, Any]) -> None:
    with pytest.raises(CortexError) as err, as_agent(tenant, "helios") as conn:
        call(conn, "upsert_contact", email="new@acme.com")
    assert err.value.status == 403
    with pytest.raises(CortexError), as_agent(tenant, "helios") as conn:
        call(conn, "update_contact", contact_id=contact["id"], patch={"name": "x"})
    with as_agent(tenant, "helios") as conn:
        assert call(conn, "get_contact", contact_id=contact["id"])["name"] == "John Smith"
