"""The SDK's contacts methods (routes under /api/v1/contacts)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any
from uuid import UUID

from cortex.client._core import AsyncRunner, Op, Runner, amethod, checked, dump, method, parser, query_of, segment
from cortex.contacts.models import (
    Contact,
    ContactCreate,
    ContactCreated,
    ContactList,
    ContactListQuery,
    ContactPatch,
    ContactPath,
)


def upsert_contact(body: ContactCreate | None = None, /, **fields: Any) -> Op[ContactCreated]:
    """POST /contacts: Create or update a contact (upsert by email, else by phone)."""
    body = checked(ContactCreate, body, fields, "body")
    return Op("upsert_contact", "POST", "/contacts", parser(ContactCreated), body=dump(body))


def search_contacts(query: ContactListQuery | None = None, /, **fields: Any) -> Op[ContactList]:
    """GET /contacts: List and search contacts."""
    query = checked(ContactListQuery, query, fields, "query")
    return Op("search_contacts", "GET", "/contacts", parser(ContactList), query=query_of(query))


def get_contact(id: UUID | str, /) -> Op[Contact]:
    """GET /contacts/<id>: Get a contact (details, not context)."""
    where = checked(ContactPath, None, {"id": id}, "path")
    return Op("get_contact", "GET", f"/contacts/{segment(where.id)}", parser(Contact))


def update_contact(id: UUID | str, body: ContactPatch | None = None, /, **fields: Any) -> Op[Contact]:
    """PATCH /contacts/<id>: Update contact fields."""
    where = checked(ContactPath, None, {"id": id}, "path")
    body = checked(ContactPatch, body, fields, "body")
    return Op("update_contact", "PATCH", f"/contacts/{segment(where.id)}", parser(Contact), body=dump(body))


def _contact_pages(query: ContactListQuery | None, fields: Mapping[str, Any]) -> ContactListQuery:
    return checked(ContactListQuery, query, fields, "query")


def _next_contacts(query: ContactListQuery, page: ContactList) -> ContactListQuery | None:
    """The query of the page after `page`, or None when `page` was the last (shorter than the limit)."""
    if len(page.items) < query.limit:
        return None
    return query.model_copy(update={"offset": query.offset + len(page.items)})


class Methods:
    """contacts: the Client's methods."""

    upsert_contact = method(upsert_contact)
    search_contacts = method(search_contacts)
    get_contact = method(get_contact)
    update_contact = method(update_contact)

    def iter_contacts(self: Runner, query: ContactListQuery | None = None, /, **fields: Any) -> Iterator[Contact]:
        """Every contact `search_contacts` finds, page after page (offset paging, `limit` per page)."""
        page_query: ContactListQuery | None = _contact_pages(query, fields)
        while page_query is not None:
            page = self._run(search_contacts(page_query))
            yield from page.items
            page_query = _next_contacts(page_query, page)


class AsyncMethods:
    """contacts: the AsyncClient's methods."""

    upsert_contact = amethod(upsert_contact)
    search_contacts = amethod(search_contacts)
    get_contact = amethod(get_contact)
    update_contact = amethod(update_contact)

    async def iter_contacts(
        self: AsyncRunner, query: ContactListQuery | None = None, /, **fields: Any
    ) -> AsyncIterator[Contact]:
        """Every contact `search_contacts` finds, page after page (offset paging, `limit` per page)."""
        page_query: ContactListQuery | None = _contact_pages(query, fields)
        while page_query is not None:
            page = await self._arun(search_contacts(page_query))
            for item in page.items:
                yield item
            page_query = _next_contacts(page_query, page)
