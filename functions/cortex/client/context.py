"""The SDK's context methods (routes under /api/v1/context/)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, method, parser, query_of, segment
from cortex.context.models import ContextPath, ContextQuery, ContextRefresh, WorkingContext


def get_context(contact_id: UUID | str, query: ContextQuery | None = None, /, **fields: Any) -> Op[WorkingContext]:
    """GET /context/<contact_id>: Working context of a contact, within the level's token budget."""
    where = checked(ContextPath, None, {"contact_id": contact_id}, "path")
    query = checked(ContextQuery, query, fields, "query")
    return Op(
        "get_context", "GET", f"/context/{segment(where.contact_id)}", parser(WorkingContext), query=query_of(query)
    )


def refresh_context(contact_id: UUID | str, /) -> Op[ContextRefresh]:
    """POST /context/<contact_id>/refresh: Regenerate a contact's working context now."""
    where = checked(ContextPath, None, {"contact_id": contact_id}, "path")
    return Op("refresh_context", "POST", f"/context/{segment(where.contact_id)}/refresh", parser(ContextRefresh))


class Methods:
    """context: the Client's methods."""

    get_context = method(get_context)
    refresh_context = method(refresh_context)


class AsyncMethods:
    """context: the AsyncClient's methods."""

    get_context = amethod(get_context)
    refresh_context = amethod(refresh_context)
