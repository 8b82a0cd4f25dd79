"""HTTP routes of the graph: `/api/v1/graph`. Each is one call to the SQL function of its name."""

from __future__ import annotations

from cortex import db
from cortex.graph import service
from cortex.graph.models import (
    EdgeLinked,
    GraphStats,
    GraphVersion,
    LinkRequest,
    NeighborList,
    NeighborsQuery,
    NodePath,
    TraverseRequest,
    TraverseResult,
)
from cortex.routing import Call, RawJSON, Reply, Router

router = Router("graph")


@router.route(
    "POST", "/traverse", name="traverse_graph", summary="Walk the memory graph from start nodes",
    responses={200: TraverseResult}, body=TraverseRequest, errors=(404,),
    description="Breadth-first (by depth, then score) or weighted (best score first) over edges whose "
    "decayed weight is at least min_weight; reaches active nodes only, and nodes below the tenant's "
    "min_importance only when they are entity nodes. 404 names start_ids when a start node is unknown.",
)  # fmt: skip
async def traverse_graph(call: Call) -> Reply:
    """Walks the graph; the returned nodes are recorded as accessed."""
    body = call.body_as(TraverseRequest)
    args = service.traverse_args(
        body.start_ids,
        depth=body.depth,
        direction=body.direction,
        relations=body.relations,
        kinds=body.kinds,
        min_weight=body.min_weight,
        strategy=body.strategy,
        limit=body.limit,
    )
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "traverse_graph", **args)))


@router.route(
    "GET", "/nodes/<id>/neighbors", name="neighbors", summary="The nodes one edge away from a node",
    responses={200: NeighborList}, query=NeighborsQuery, path_params=NodePath, errors=(404,),
)  # fmt: skip
async def neighbors(call: Call) -> Reply:
    """A node's neighbours, strongest edge first; they are recorded as accessed."""
    query = call.query_as(NeighborsQuery)
    args = service.neighbors_args(
        call.path_as(NodePath).id,
        direction=query.direction,
        relations=query.relations,
        kinds=query.kinds,
        min_weight=query.min_weight,
        limit=query.limit,
    )
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "neighbors", **args)))


@router.route(
    "POST", "/edges", name="link_memories", summary="Link two nodes (or reinforce their edge)",
    responses={201: EdgeLinked, 200: EdgeLinked}, body=LinkRequest, errors=(404,),
    description="201 when the edge was created, 200 when it existed and was reinforced "
    "(weight = greatest(its decayed weight, the given weight), last_reinforced_at = now).",
)  # fmt: skip
async def link_memories(call: Call) -> Reply:
    """Creates or reinforces an edge."""
    body = call.body_as(LinkRequest)
    args = service.link_args(body.source_id, body.target_id, body.relation, weight=body.weight, metadata=body.metadata)
    result = await db.acall_as(call.claims, "link_memories", **args)
    return Reply(201 if result.get("created") else 200, result)


@router.route(
    "GET", "/stats", name="graph_stats", summary="Node and edge counts of the tenant's graph",
    responses={200: GraphStats},
)  # fmt: skip
async def graph_stats(call: Call) -> Reply:
    """Counts by kind, status and relation, indexing backlog, version and decay settings."""
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "graph_stats")))


@router.route(
    "GET", "/version", name="graph_version", summary="The tenant's graph version", responses={200: GraphVersion},
)  # fmt: skip
async def graph_version(call: Call) -> Reply:
    """The graph version (briefing caches key on it)."""
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "graph_version")))
