"""The SDK's graph methods (routes under /api/v1/graph/traverse)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
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


def traverse_graph(body: TraverseRequest | None = None, /, **fields: Any) -> Op[TraverseResult]:
    """POST /graph/traverse: Walk the memory graph from start nodes."""
    body = checked(TraverseRequest, body, fields, "body")
    return Op("traverse_graph", "POST", "/graph/traverse", parser(TraverseResult), body=dump(body))


def neighbors(id: UUID | str, query: NeighborsQuery | None = None, /, **fields: Any) -> Op[NeighborList]:
    """GET /graph/nodes/<id>/neighbors: The nodes one edge away from a node."""
    where = checked(NodePath, None, {"id": id}, "path")
    query = checked(NeighborsQuery, query, fields, "query")
    return Op(
        "neighbors", "GET", f"/graph/nodes/{segment(where.id)}/neighbors", parser(NeighborList), query=query_of(query)
    )


def link_memories(body: LinkRequest | None = None, /, **fields: Any) -> Op[EdgeLinked]:
    """POST /graph/edges: Link two nodes (or reinforce their edge)."""
    body = checked(LinkRequest, body, fields, "body")
    return Op("link_memories", "POST", "/graph/edges", parser(EdgeLinked), body=dump(body))


def graph_stats() -> Op[GraphStats]:
    """GET /graph/stats: Node and edge counts of the tenant's graph."""
    return Op("graph_stats", "GET", "/graph/stats", parser(GraphStats))


def graph_version() -> Op[GraphVersion]:
    """GET /graph/version: The tenant's graph version."""
    return Op("graph_version", "GET", "/graph/version", parser(GraphVersion))


class Methods:
    """graph: the Client's methods."""

    traverse_graph = method(traverse_graph)
    neighbors = method(neighbors)
    link_memories = method(link_memories)
    graph_stats = method(graph_stats)
    graph_version = method(graph_version)


class AsyncMethods:
    """graph: the AsyncClient's methods."""

    traverse_graph = amethod(traverse_graph)
    neighbors = amethod(neighbors)
    link_memories = amethod(link_memories)
    graph_stats = amethod(graph_stats)
    graph_version = amethod(graph_version)
