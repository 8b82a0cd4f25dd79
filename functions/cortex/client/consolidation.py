"""The SDK's consolidation methods (routes under /api/v1/consolidation/status)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
from cortex.consolidation.models import (
    Claimed,
    Item,
    ItemBlock,
    ItemClose,
    ItemCreate,
    ItemCreated,
    ItemList,
    ItemListQuery,
    ItemPath,
    ItemUndo,
    ProcessQuery,
    RunReport,
    RunRequest,
    Status,
    StatusQuery,
    Undone,
)


def consolidation_status(query: StatusQuery | None = None, /, **fields: Any) -> Op[Status]:
    """GET /consolidation/status: Items per agent and the rate limit left (admins)."""
    query = checked(StatusQuery, query, fields, "query")
    return Op("consolidation_status", "GET", "/consolidation/status", parser(Status), query=query_of(query))


def list_consolidation_items(query: ItemListQuery | None = None, /, **fields: Any) -> Op[ItemList]:
    """GET /consolidation/items: Consolidation items matching every filter (admins)."""
    query = checked(ItemListQuery, query, fields, "query")
    return Op("list_consolidation_items", "GET", "/consolidation/items", parser(ItemList), query=query_of(query))


def create_consolidation_item(body: ItemCreate | None = None, /, **fields: Any) -> Op[ItemCreated]:
    """POST /consolidation/items: File a consolidation item (admins)."""
    body = checked(ItemCreate, body, fields, "body")
    return Op("create_consolidation_item", "POST", "/consolidation/items", parser(ItemCreated), body=dump(body))


def get_consolidation_item(id: UUID | str, /) -> Op[Item]:
    """GET /consolidation/items/<id>: A consolidation item and its changes (admins)."""
    where = checked(ItemPath, None, {"id": id}, "path")
    return Op("get_consolidation_item", "GET", f"/consolidation/items/{segment(where.id)}", parser(Item))


def claim_consolidation_item(id: UUID | str, /) -> Op[Claimed]:
    """POST /consolidation/items/<id>/claim: Claim an open item (admins)."""
    where = checked(ItemPath, None, {"id": id}, "path")
    return Op("claim_consolidation_item", "POST", f"/consolidation/items/{segment(where.id)}/claim", parser(Claimed))


def close_consolidation_item(id: UUID | str, body: ItemClose | None = None, /, **fields: Any) -> Op[Item]:
    """POST /consolidation/items/<id>/close: Close an item with a reason (admins)."""
    where = checked(ItemPath, None, {"id": id}, "path")
    body = checked(ItemClose, body, fields, "body")
    return Op(
        "close_consolidation_item",
        "POST",
        f"/consolidation/items/{segment(where.id)}/close",
        parser(Item),
        body=dump(body),
    )


def block_consolidation_item(id: UUID | str, body: ItemBlock | None = None, /, **fields: Any) -> Op[Item]:
    """POST /consolidation/items/<id>/block: Block an item with an error (admins)."""
    where = checked(ItemPath, None, {"id": id}, "path")
    body = checked(ItemBlock, body, fields, "body")
    return Op(
        "block_consolidation_item",
        "POST",
        f"/consolidation/items/{segment(where.id)}/block",
        parser(Item),
        body=dump(body),
    )


def undo_consolidation_merge(id: UUID | str, body: ItemUndo | None = None, /, **fields: Any) -> Op[Undone]:
    """POST /consolidation/items/<id>/undo: Undo a merge (admins)."""
    where = checked(ItemPath, None, {"id": id}, "path")
    body = checked(ItemUndo, body, fields, "body")
    return Op(
        "undo_consolidation_merge",
        "POST",
        f"/consolidation/items/{segment(where.id)}/undo",
        parser(Undone),
        body=dump(body),
    )


def process_consolidation_item(id: UUID | str, query: ProcessQuery | None = None, /, **fields: Any) -> Op[Item]:
    """POST /consolidation/items/<id>/process: Process one item now (admins)."""
    where = checked(ItemPath, None, {"id": id}, "path")
    query = checked(ProcessQuery, query, fields, "query")
    return Op(
        "process_consolidation_item",
        "POST",
        f"/consolidation/items/{segment(where.id)}/process",
        parser(Item),
        query=query_of(query),
    )


def run_consolidation(body: RunRequest | None = None, /, **fields: Any) -> Op[RunReport]:
    """POST /consolidation/runs: Run consolidation agents (admins)."""
    body = checked(RunRequest, body, fields, "body")
    return Op("run_consolidation", "POST", "/consolidation/runs", parser(RunReport), body=dump(body))


class Methods:
    """consolidation: the Client's methods."""

    consolidation_status = method(consolidation_status)
    list_consolidation_items = method(list_consolidation_items)
    create_consolidation_item = method(create_consolidation_item)
    get_consolidation_item = method(get_consolidation_item)
    claim_consolidation_item = method(claim_consolidation_item)
    close_consolidation_item = method(close_consolidation_item)
    block_consolidation_item = method(block_consolidation_item)
    undo_consolidation_merge = method(undo_consolidation_merge)
    process_consolidation_item = method(process_consolidation_item)
    run_consolidation = method(run_consolidation)


class AsyncMethods:
    """consolidation: the AsyncClient's methods."""

    consolidation_status = amethod(consolidation_status)
    list_consolidation_items = amethod(list_consolidation_items)
    create_consolidation_item = amethod(create_consolidation_item)
    get_consolidation_item = amethod(get_consolidation_item)
    claim_consolidation_item = amethod(claim_consolidation_item)
    close_consolidation_item = amethod(close_consolidation_item)
    block_consolidation_item = amethod(block_consolidation_item)
    undo_consolidation_merge = amethod(undo_consolidation_merge)
    process_consolidation_item = amethod(process_consolidation_item)
    run_consolidation = amethod(run_consolidation)
