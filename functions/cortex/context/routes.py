"""HTTP routes of working context: `/api/v1/context`."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.context import service
from cortex.context.models import ContextPath, ContextQuery, ContextRefresh, WorkingContext
from cortex.routing import Call, RawJSON, Reply, Router

router = Router("context")


@router.route(
    "GET", "/<contact_id>", name="get_context",
    summary="Working context of a contact, within the level's token budget",
    responses={200: WorkingContext}, query=ContextQuery, path_params=ContextPath, errors=(404,),
    description="Stale context is served with is_stale=true and a regeneration is queued.",
)  # fmt: skip
async def get_context(call: Call) -> Reply:
    """The context at a level: one call to SQL get_context (regenerated first with refresh=true)."""
    query = call.query_as(ContextQuery)
    contact_id = str(call.path_as(ContextPath).contact_id)
    if query.refresh:
        await run_in_threadpool(service.refresh_context, call.claims, contact_id)
    text = await db.acall_as_text(call.claims, "get_context", contact_id=contact_id, level=query.level)
    return Reply(200, RawJSON(text))


@router.route(
    "POST", "/<contact_id>/refresh", name="refresh_context", summary="Regenerate a contact's working context now",
    responses={200: ContextRefresh, 202: ContextRefresh}, path_params=ContextPath, errors=(404,),
)  # fmt: skip
async def refresh_context(call: Call) -> Reply:
    """Regenerates now; 202 when generation failed (the cached context stays, a retry is queued)."""
    contact_id = str(call.path_as(ContextPath).contact_id)
    result = await run_in_threadpool(service.refresh_context, call.claims, contact_id)
    return Reply(200 if result.get("regenerated") else 202, result)
