"""Contacts: thin calls to the SQL functions of the same names (all rules live there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cortex import db

Claims = Mapping[str, Any]


def upsert_contact(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Creates or updates a contact by email (by E.164 phone without one); returns it with `created`."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "upsert_contact", **fields)
    return result


def update_contact(claims: Claims, contact_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """Patches a contact: present keys set (null clears), absent keys are kept."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "update_contact", contact_id=contact_id, patch=dict(patch))
    return result


def get_contact(claims: Claims, contact_id: str) -> dict[str, Any]:
    """One contact; CortexError 404 when unknown to the caller's tenant."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_contact", contact_id=contact_id)
    return result


def search_contacts(claims: Claims, **filters: Any) -> dict[str, Any]:
    """Contacts by stage, owner, tag and fuzzy search; {items, limit, offset}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "search_contacts", **filters)
    return result
