"""HTTP routes of consolidation: `/api/v1/consolidation` (admins). The audit trail's routes are one
SQL call each; runs and processing drive the agents in a worker thread (they may call a model)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.consolidation import service
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
from cortex.routing import Call, Reply, Router

router = Router("consolidation")


@router.route(
    "GET", "/status", name="consolidation_status", summary="Items per agent and the rate limit left (admins)",
    responses={200: Status}, query=StatusQuery, errors=(403,),
)  # fmt: skip
async def get_status(call: Call) -> Reply:
    """Seed 003's status output."""
    query = call.query_as(StatusQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "consolidation_status", **query))


@router.route(
    "GET", "/items", name="list_consolidation_items", summary="Consolidation items matching every filter (admins)",
    responses={200: ItemList}, query=ItemListQuery, errors=(403,),
)  # fmt: skip
async def list_items(call: Call) -> Reply:
    """Items by agent, status (default open) and urgency; an empty list when none match."""
    query = call.query_as(ItemListQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_consolidation_items", **query))


@router.route(
    "POST", "/items", name="create_consolidation_item", summary="File a consolidation item (admins)",
    responses={201: ItemCreated, 200: ItemCreated}, body=ItemCreate, errors=(403, 404),
    description="201 when the item is new; 200 with created false when the same agent already has an item "
    "for this set of memories (never two). 404 naming memory_ids for a memory the caller cannot see.",
)  # fmt: skip
async def create_item(call: Call) -> Reply:
    """Seed 003's create_consolidation_issue."""
    body = call.body_as(ItemCreate).model_dump(mode="json", exclude_none=True)
    result = await db.acall_as(call.claims, "create_consolidation_item", **body)
    return Reply(201 if result["created"] else 200, result)


@router.route(
    "GET", "/items/<id>", name="get_consolidation_item", summary="A consolidation item and its changes (admins)",
    responses={200: Item}, path_params=ItemPath, errors=(403, 404),
)  # fmt: skip
async def get_item(call: Call) -> Reply:
    """The item with every change recorded against it."""
    item_id = str(call.path_as(ItemPath).id)
    return Reply(200, await db.acall_as(call.claims, "get_consolidation_item", item_id=item_id))


@router.route(
    "POST", "/items/<id>/claim", name="claim_consolidation_item", summary="Claim an open item (admins)",
    responses={200: Claimed}, path_params=ItemPath, errors=(403, 404),
    description="Atomic: of two claimers one gets claimed true; an item in progress, blocked or closed gives "
    "claimed false.",
)  # fmt: skip
async def claim_item(call: Call) -> Reply:
    """Seed 003's claim_issue."""
    item_id = str(call.path_as(ItemPath).id)
    return Reply(200, await db.acall_as(call.claims, "claim_consolidation_item", item_id=item_id))


@router.route(
    "POST", "/items/<id>/close", name="close_consolidation_item", summary="Close an item with a reason (admins)",
    responses={200: Item}, path_params=ItemPath, body=ItemClose, errors=(403, 404, 409),
)  # fmt: skip
async def close_item(call: Call) -> Reply:
    """Seed 003's close_issue."""
    item_id = str(call.path_as(ItemPath).id)
    body = call.body_as(ItemClose)
    return Reply(200, await db.acall_as(call.claims, "close_consolidation_item", item_id=item_id, reason=body.reason))


@router.route(
    "POST", "/items/<id>/block", name="block_consolidation_item", summary="Block an item with an error (admins)",
    responses={200: Item}, path_params=ItemPath, body=ItemBlock, errors=(403, 404, 409),
)  # fmt: skip
async def block_item(call: Call) -> Reply:
    """Seed 003's block_issue."""
    item_id = str(call.path_as(ItemPath).id)
    body = call.body_as(ItemBlock)
    return Reply(200, await db.acall_as(call.claims, "block_consolidation_item", item_id=item_id, error=body.error))


@router.route(
    "POST", "/items/<id>/undo", name="undo_consolidation_merge", summary="Undo a merge (admins)",
    responses={200: Undone}, path_params=ItemPath, body=ItemUndo, errors=(403, 404, 409),
    description="Restores the originals and retires the merged memory, in one transaction.",
)  # fmt: skip
async def undo_merge(call: Call) -> Reply:
    """The originals active again, the merged memory archived."""
    item_id = str(call.path_as(ItemPath).id)
    body = call.body_as(ItemUndo)
    return Reply(200, await db.acall_as(call.claims, "undo_consolidation_merge", item_id=item_id, reason=body.reason))


@router.route(
    "POST", "/items/<id>/process", name="process_consolidation_item", summary="Process one item now (admins)",
    responses={200: Item}, path_params=ItemPath, query=ProcessQuery, errors=(403, 404, 409, 422),
    description="A person's decision: a merge item is merged (a blocked one reopened), a decay, cluster-link "
    "or relations item applied, a promote item promoted. dry_run=true says what would happen and writes nothing.",
)  # fmt: skip
async def process_item(call: Call) -> Reply:
    """Runs the item's agent on it in a worker thread."""
    item_id = str(call.path_as(ItemPath).id)
    dry_run = call.query_as(ProcessQuery).dry_run
    return Reply(200, await run_in_threadpool(service.process_item, call.claims, item_id, dry_run=dry_run))


@router.route(
    "POST", "/runs", name="run_consolidation", summary="Run consolidation agents (admins)",
    responses={200: RunReport}, body=RunRequest, errors=(403, 409),
    description="Runs the agents (or all: decay, cluster, merge, promote, relations) now and answers with the "
    "report. 409 while another run of the tenant is in progress. dry_run writes nothing.",
)  # fmt: skip
async def run_agents(call: Call) -> Reply:
    """One run, synchronously, in a worker thread."""
    body = call.body_as(RunRequest)
    report = await run_in_threadpool(
        service.run_agents, call.claims, body.names(), dry_run=body.dry_run, rate_limit=body.rate_limit
    )
    return Reply(200, report)
