"""The SDK's handoffs methods (routes under /api/v1/handoffs)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
from cortex.handoffs.models import (
    Handoff,
    HandoffCreate,
    HandoffCreated,
    HandoffList,
    HandoffListQuery,
    HandoffPath,
    HandoffStatusChange,
    PendingHandoffsQuery,
)


def create_handoff(body: HandoffCreate | None = None, /, **fields: Any) -> Op[HandoffCreated]:
    """POST /handoffs: Hand a contact to another agent or to a human."""
    body = checked(HandoffCreate, body, fields, "body")
    return Op("create_handoff", "POST", "/handoffs", parser(HandoffCreated), body=dump(body))


def get_pending_handoffs(query: PendingHandoffsQuery | None = None, /, **fields: Any) -> Op[HandoffList]:
    """GET /handoffs/pending: Pending handoffs, most urgent first, then oldest."""
    query = checked(PendingHandoffsQuery, query, fields, "query")
    return Op("get_pending_handoffs", "GET", "/handoffs/pending", parser(HandoffList), query=query_of(query))


def list_handoffs(query: HandoffListQuery | None = None, /, **fields: Any) -> Op[HandoffList]:
    """GET /handoffs: Handoffs created or changed since a time, by status or contact (stand-up view)."""
    query = checked(HandoffListQuery, query, fields, "query")
    return Op("list_handoffs", "GET", "/handoffs", parser(HandoffList), query=query_of(query))


def get_handoff(id: UUID | str, /) -> Op[Handoff]:
    """GET /handoffs/<id>: One handoff with its allowed moves and audit trail."""
    where = checked(HandoffPath, None, {"id": id}, "path")
    return Op("get_handoff", "GET", f"/handoffs/{segment(where.id)}", parser(Handoff))


def update_handoff_status(id: UUID | str, body: HandoffStatusChange | None = None, /, **fields: Any) -> Op[Handoff]:
    """PATCH /handoffs/<id>: Accept, complete or reject a handoff."""
    where = checked(HandoffPath, None, {"id": id}, "path")
    body = checked(HandoffStatusChange, body, fields, "body")
    return Op("update_handoff_status", "PATCH", f"/handoffs/{segment(where.id)}", parser(Handoff), body=dump(body))


class Methods:
    """handoffs: the Client's methods."""

    create_handoff = method(create_handoff)
    get_pending_handoffs = method(get_pending_handoffs)
    list_handoffs = method(list_handoffs)
    get_handoff = method(get_handoff)
    update_handoff_status = method(update_handoff_status)


class AsyncMethods:
    """handoffs: the AsyncClient's methods."""

    create_handoff = amethod(create_handoff)
    get_pending_handoffs = amethod(get_pending_handoffs)
    list_handoffs = amethod(list_handoffs)
    get_handoff = amethod(get_handoff)
    update_handoff_status = amethod(update_handoff_status)
