"""HTTP routes of handoffs: `/api/v1/handoffs`."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.handoffs import service
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
from cortex.routing import Call, Reply, Router

router = Router("handoffs")


@router.route(
    "POST", "", name="create_handoff", summary="Hand a contact to another agent or to a human",
    responses={201: HandoffCreated}, body=HandoffCreate, errors=(404,),
    description="In one transaction: the handoff, the new owner, the context marked for regeneration, "
    "and notifications for the receiver and the monitor. context_summary is generated when absent.",
)  # fmt: skip
async def create_handoff(call: Call) -> Reply:
    """Creates a handoff; the briefing is generated in a thread when the caller gave none."""
    body = call.body_as(HandoffCreate).model_dump(mode="json", exclude_none=True)
    return Reply(201, await run_in_threadpool(service.create_handoff, call.claims, **body))


@router.route(
    "GET", "/pending", name="get_pending_handoffs", summary="Pending handoffs, most urgent first, then oldest",
    responses={200: HandoffList}, query=PendingHandoffsQuery,
)  # fmt: skip
async def get_pending_handoffs(call: Call) -> Reply:
    """The pending queue of an agent, a human, or everyone's (monitor view)."""
    query = call.query_as(PendingHandoffsQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "get_pending_handoffs", **query))


@router.route(
    "GET", "", name="list_handoffs",
    summary="Handoffs created or changed since a time, by status or contact (stand-up view)",
    responses={200: HandoffList}, query=HandoffListQuery, errors=(404,),
)  # fmt: skip
async def list_handoffs(call: Call) -> Reply:
    """Handoffs created or changed since a time."""
    query = call.query_as(HandoffListQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_handoffs", **query))


@router.route(
    "GET", "/<id>", name="get_handoff", summary="One handoff with its allowed moves and audit trail",
    responses={200: Handoff}, path_params=HandoffPath, errors=(404,),
)  # fmt: skip
async def get_handoff(call: Call) -> Reply:
    """One handoff."""
    return Reply(200, await db.acall_as(call.claims, "get_handoff", handoff_id=str(call.path_as(HandoffPath).id)))


@router.route(
    "PATCH", "/<id>", name="update_handoff_status", summary="Accept, complete or reject a handoff",
    responses={200: Handoff}, body=HandoffStatusChange, path_params=HandoffPath, errors=(404, 409),
    description="Moves: pending → accepted → completed, pending/accepted → rejected; any other is 409 "
    "with the allowed moves. Of two concurrent accepts exactly one wins.",
)  # fmt: skip
async def update_handoff_status(call: Call) -> Reply:
    """Moves a handoff along its status machine (SQL enforces who may and which moves)."""
    body = call.body_as(HandoffStatusChange)
    handoff_id = str(call.path_as(HandoffPath).id)
    result = await db.acall_as(
        call.claims, "update_handoff_status", handoff_id=handoff_id, status=body.status, note=body.note
    )
    return Reply(200, result)
