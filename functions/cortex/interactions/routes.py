"""HTTP routes of interactions: `/api/v1/interactions`."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.interactions import service
from cortex.interactions.models import InteractionCreate, InteractionList, InteractionListQuery, InteractionLogged
from cortex.routing import Call, Reply, Router

router = Router("interactions")


@router.route(
    "POST", "", name="log_interaction", summary="Log an interaction (summarised at write time)",
    responses={201: InteractionLogged, 200: InteractionLogged}, body=InteractionCreate, errors=(404,),
    description="Without a summary Cortex summarises raw_content now and reports the model call in "
    "token_usage. A repeated external_id returns the first row with duplicate=true (200).",
)  # fmt: skip
async def log_interaction(call: Call) -> Reply:
    """Logs an interaction; the model works in a thread so the event loop keeps serving."""
    body = call.body_as(InteractionCreate).model_dump(exclude_none=True)
    result = await run_in_threadpool(service.log_interaction, call.claims, **body)
    return Reply(200 if result.get("duplicate") else 201, result)


@router.route(
    "GET", "", name="list_interactions", summary="A contact's interactions, newest first",
    responses={200: InteractionList}, query=InteractionListQuery, errors=(404,),
)  # fmt: skip
async def list_interactions(call: Call) -> Reply:
    """A contact's interactions, newest first."""
    query = call.query_as(InteractionListQuery).model_dump(exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_interactions", **query))
