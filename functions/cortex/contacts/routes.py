"""HTTP routes of contacts: `/api/v1/contacts`. Each is one call to the SQL function of its name."""

from __future__ import annotations

from cortex import db
from cortex.contacts.models import (
    Contact,
    ContactCreate,
    ContactCreated,
    ContactList,
    ContactListQuery,
    ContactPatch,
    ContactPath,
)
from cortex.routing import Call, RawJSON, Reply, Router

router = Router("contacts")


@router.route(
    "POST", "", name="upsert_contact", summary="Create or update a contact (upsert by email, else by phone)",
    responses={201: ContactCreated, 200: ContactCreated}, body=ContactCreate,
    description="201 when the contact was created, 200 when an existing one (same normalised "
    "email; without an email, the same E.164 phone) was updated: given fields overwrite, tags accumulate, "
    "custom_fields merge. One of email and phone is required.",
)  # fmt: skip
async def upsert_contact(call: Call) -> Reply:
    """Creates or updates a contact by email (or by phone when it has none)."""
    body = call.body_as(ContactCreate)
    result = await db.acall_as(call.claims, "upsert_contact", **body.model_dump(exclude_none=True))
    return Reply(201 if result.get("created") else 200, result)


@router.route(
    "GET", "", name="search_contacts", summary="List and search contacts", responses={200: ContactList},
    query=ContactListQuery,
)  # fmt: skip
async def search_contacts(call: Call) -> Reply:
    """Contacts by stage, owner, tag and fuzzy search."""
    query = call.query_as(ContactListQuery)
    return Reply(200, await db.acall_as(call.claims, "search_contacts", **query.model_dump(exclude_none=True)))


@router.route(
    "GET", "/<id>", name="get_contact", summary="Get a contact (details, not context)", responses={200: Contact},
    path_params=ContactPath, errors=(404,),
)  # fmt: skip
async def get_contact(call: Call) -> Reply:
    """One contact."""
    text = await db.acall_as_text(call.claims, "get_contact", contact_id=str(call.path_as(ContactPath).id))
    return Reply(200, RawJSON(text))


@router.route(
    "PATCH", "/<id>", name="update_contact", summary="Update contact fields", responses={200: Contact},
    body=ContactPatch, path_params=ContactPath, errors=(404, 409),
    description="Each key present sets that field (null clears it); absent keys are kept.",
)  # fmt: skip
async def update_contact(call: Call) -> Reply:
    """Patches a contact: only the keys the caller sent (null clears the field, absent keeps it)."""
    patch = call.body_as(ContactPatch).model_dump(mode="json", exclude_unset=True)
    contact_id = str(call.path_as(ContactPath).id)
    return Reply(200, await db.acall_as(call.claims, "update_contact", contact_id=contact_id, patch=patch))
