"""HTTP routes of memories: `/api/v1/memories`. Each is one call to the SQL function of its name."""

from __future__ import annotations

from cortex import db
from cortex.graph.models import Node
from cortex.memories.models import (
    MemoryCreate,
    MemoryForgetQuery,
    MemoryGetQuery,
    MemoryList,
    MemoryListQuery,
    MemoryPatch,
    MemoryPath,
    MemorySupersede,
    MemorySuperseded,
    MemoryWithEdges,
    MemoryWritten,
    split_list,
)
from cortex.memories.service import sql_args
from cortex.routing import Call, RawJSON, Reply, Router

router = Router("memories")


@router.route(
    "POST", "", name="remember", summary="Remember something (de-duplicated, superseding its key slot)",
    responses={201: MemoryWritten, 200: MemoryWritten}, body=MemoryCreate, errors=(404, 409),
    description="201 when a memory was created; 200 when it duplicated an active one (exactly, or "
    "nearly: trigram similarity with the same numbers and negation), which is reinforced instead. "
    "With a key, the memory holding that key is superseded in the same transaction. Links are "
    "checked before anything is written (404 naming links[i].target_id).",
)  # fmt: skip
async def remember(call: Call) -> Reply:
    """Writes a memory, or reinforces the one it duplicates."""
    body = call.body_as(MemoryCreate).model_dump(mode="json", exclude_none=True)
    result = await db.acall_as(call.claims, "remember", **sql_args(body))
    return Reply(201 if result.get("created") else 200, result)


@router.route(
    "GET", "", name="list_memories", summary="List memories (filters, as of a time, keyset pages)",
    responses={200: MemoryList}, query=MemoryListQuery,
)  # fmt: skip
async def list_memories(call: Call) -> Reply:
    """Memories by kind, agent, contact, tags, status, time range, review flag or as of a time."""
    query = call.query_as(MemoryListQuery).model_dump(mode="json", exclude_none=True)
    query["kinds"] = split_list(query.get("kinds"))
    query["tags"] = split_list(query.get("tags"))
    text = await db.acall_as_text(call.claims, "list_memories", **query)
    return Reply(200, RawJSON(text))


@router.route(
    "GET", "/<id>", name="get_memory", summary="Get a memory with its edges", responses={200: MemoryWithEdges},
    path_params=MemoryPath, query=MemoryGetQuery, errors=(404,),
)  # fmt: skip
async def get_memory(call: Call) -> Reply:
    """One memory or entity node and its visible edges; 404 unless valid at as_of."""
    query = call.query_as(MemoryGetQuery).model_dump(mode="json", exclude_none=True)
    text = await db.acall_as_text(call.claims, "get_memory", memory_id=str(call.path_as(MemoryPath).id), **query)
    return Reply(200, RawJSON(text))


@router.route(
    "PATCH", "/<id>", name="update_memory", summary="Update a memory's fields", responses={200: Node},
    body=MemoryPatch, path_params=MemoryPath, errors=(404, 409),
    description="Each key present sets that field; absent keys are kept. 409 when the new content equals "
    "another active memory, or the memory is no longer active and its title or body would change.",
)  # fmt: skip
async def update_memory(call: Call) -> Reply:
    """Patches a memory: only the keys the caller sent."""
    patch = call.body_as(MemoryPatch).model_dump(mode="json", exclude_unset=True)
    memory_id = str(call.path_as(MemoryPath).id)
    return Reply(200, await db.acall_as(call.claims, "update_memory", memory_id=memory_id, patch=patch))


@router.route(
    "POST", "/<id>/supersede", name="supersede_memory", summary="Replace a memory by a new version",
    responses={201: MemorySuperseded}, body=MemorySupersede, path_params=MemoryPath, errors=(404, 409),
    description="The old memory gets status superseded and valid_to = the new valid_from; a supersedes "
    "edge joins them. 409 when the memory is not active.",
)  # fmt: skip
async def supersede_memory(call: Call) -> Reply:
    """A new version of an active memory, in one transaction."""
    body = call.body_as(MemorySupersede).model_dump(mode="json", exclude_none=True)
    memory_id = str(call.path_as(MemoryPath).id)
    return Reply(201, await db.acall_as(call.claims, "supersede_memory", memory_id=memory_id, **sql_args(body)))


@router.route(
    "DELETE", "/<id>", name="forget_memory", summary="Forget a memory (archive it; nothing is deleted)",
    responses={200: Node}, path_params=MemoryPath, query=MemoryForgetQuery, errors=(404,),
)  # fmt: skip
async def forget_memory(call: Call) -> Reply:
    """Archives a memory: status archived, valid_to set, the reason in its metadata."""
    query = call.query_as(MemoryForgetQuery).model_dump(exclude_none=True)
    memory_id = str(call.path_as(MemoryPath).id)
    return Reply(200, await db.acall_as(call.claims, "forget_memory", memory_id=memory_id, **query))
