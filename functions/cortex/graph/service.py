"""The graph API: thin calls to the SQL functions of the same names (all rules live there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cortex import db

Claims = Mapping[str, Any]


def _real(value: float | None) -> Any:
    # A Python float goes as float8, which does not resolve a `real` parameter by itself.
    return None if value is None else db.typed(value, "real")


def traverse_args(
    start_ids: Sequence[Any],
    *,
    depth: int | None = None,
    direction: str | None = None,
    relations: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    min_weight: float | None = None,
    strategy: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The named arguments of public.traverse_graph (None: the SQL default)."""
    return {
        "start_ids": db.typed([str(s) for s in start_ids], "uuid[]"),
        "depth": depth,
        "direction": direction,
        "relations": db.typed(list(relations), "text[]") if relations is not None else None,
        "kinds": db.typed(list(kinds), "text[]") if kinds is not None else None,
        "min_weight": _real(min_weight),
        "strategy": strategy,
        "limit": limit,
    }


def neighbors_args(
    node_id: Any,
    *,
    direction: str | None = None,
    relations: Sequence[str] | None = None,
    kinds: Sequence[str] | None = None,
    min_weight: float | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """The named arguments of public.neighbors (None: the SQL default)."""
    return {
        "node_id": db.typed(str(node_id), "uuid"),
        "direction": direction,
        "relations": db.typed(list(relations), "text[]") if relations is not None else None,
        "kinds": db.typed(list(kinds), "text[]") if kinds is not None else None,
        "min_weight": _real(min_weight),
        "limit": limit,
    }


def link_args(
    source_id: Any,
    target_id: Any,
    relation: str,
    *,
    weight: float | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The named arguments of public.link_memories (None: the SQL default)."""
    return {
        "source_id": db.typed(str(source_id), "uuid"),
        "target_id": db.typed(str(target_id), "uuid"),
        "relation": relation,
        "weight": _real(weight),
        "metadata": dict(metadata) if metadata is not None else None,
    }


def traverse_graph(claims: Claims, start_ids: Sequence[Any], **options: Any) -> dict[str, Any]:
    """Walks the graph from start nodes: {nodes: [{memory, depth, score, via_node, via_relation}], edges}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "traverse_graph", **traverse_args(start_ids, **options))
    return result


def neighbors(claims: Claims, node_id: Any, **options: Any) -> dict[str, Any]:
    """The nodes one edge away from a node: {items: [{memory, relation, direction, weight}]}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "neighbors", **neighbors_args(node_id, **options))
    return result


def link_memories(claims: Claims, source_id: Any, target_id: Any, relation: str, **options: Any) -> dict[str, Any]:
    """Links two nodes (or reinforces their edge); the edge with `created`."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "link_memories", **link_args(source_id, target_id, relation, **options))
    return result


def graph_stats(claims: Claims) -> dict[str, Any]:
    """Node and edge counts of the caller's tenant, its graph version and decay settings."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "graph_stats")
    return result


def graph_version(claims: Claims) -> dict[str, Any]:
    """{version}: the caller's tenant's graph version."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "graph_version")
    return result
