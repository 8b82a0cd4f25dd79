"""The memory graph's vocabularies and node representation (pydantic; SQL holds the same lists)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BeforeValidator, Field

from cortex.schemas import Instant, JsonObject, Request, Response

# Each list equals its SQL vocabulary function (tests/test_vocabularies.py).
MemoryKind = Literal["fact", "decision", "event", "preference", "pattern", "goal", "observation"]
EntityKind = Literal["agent", "contact", "person", "system"]
NodeKind = Literal[
    "fact", "decision", "event", "preference", "pattern", "goal", "observation", "agent", "contact", "person", "system"
]
Relation = Literal[
    "applies_to",
    "instance_of",
    "relates_to",
    "contradicts",
    "supersedes",
    "caused_by",
    "part_of",
    "mentions",
    "consolidated_from",
]
MemoryStatus = Literal["active", "superseded", "archived"]
Visibility = Literal["shared", "private"]
IndexStatus = Literal["pending", "done", "skipped", "failed"]
NodeRefKind = Literal["agent", "contact", "interaction", "handoff"]
GraphDirection = Literal["out", "in", "both"]
TraversalStrategy = Literal["breadth_first", "weighted"]


class Node(Response):
    """A memory or entity node as the API returns it (cortex.memory_node_json)."""

    id: UUID
    kind: NodeKind
    title: str
    body: str
    importance: float
    confidence: float
    source_agent: str | None
    visibility: Visibility
    tags: list[str]
    contact_id: UUID | None
    key: str | None
    status: MemoryStatus
    permanent: bool
    needs_review: bool
    review_reason: str | None
    access_count: int
    last_accessed_at: Instant | None
    valid_from: Instant
    valid_to: Instant | None
    ref_kind: NodeRefKind | None
    ref_id: str | None
    metadata: JsonObject
    embed_status: IndexStatus
    link_status: IndexStatus
    index_error: str | None
    created_at: Instant
    updated_at: Instant


# --- traversal and the graph API (issue 13) ------------------------------------------------------

#: How many start nodes one traversal may name (SQL refuses more, naming start_ids).
MAX_START_IDS = 100
#: How many nodes (or neighbours) one call answers at most.
MAX_GRAPH_LIMIT = 500
#: How many steps a traversal may take.
MAX_DEPTH = 6

Weight = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


def _comma_list(value: Any) -> Any:
    """A query string carries a list as `a,b,c`: split it (a JSON list passes unchanged)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class TraverseRequest(Request):
    """POST /graph/traverse: walk the graph from start nodes."""

    start_ids: list[UUID] = Field(
        min_length=1, max_length=MAX_START_IDS, description="Nodes to start from (any the caller can see)."
    )
    depth: int = Field(default=2, ge=1, le=MAX_DEPTH, description="Steps to walk at most.")
    direction: GraphDirection = Field(default="both", description="out: source -> target; in: target -> source; both.")
    relations: list[Relation] | None = Field(
        default=None, min_length=1, description="Edge relations to follow (all when absent)."
    )
    kinds: list[NodeKind] | None = Field(
        default=None, min_length=1, description="Node kinds to reach (all when absent)."
    )
    min_weight: Weight | None = Field(
        default=None,
        description="Edges whose decayed weight is below it are not followed (default: the tenant's min_weight, 0.2).",
    )
    strategy: TraversalStrategy = Field(
        default="breadth_first", description="breadth_first: by depth, then score; weighted: best score first."
    )
    limit: int = Field(default=50, ge=1, le=MAX_GRAPH_LIMIT)


class Edge(Response):
    """An edge as the API returns it (cortex.memory_edge_json)."""

    source_id: UUID
    target_id: UUID
    relation: Relation
    weight: float = Field(description="As stored: the weight at last_reinforced_at.")
    current_weight: float = Field(description="Decayed to now (edges touching a permanent node do not decay).")
    created_at: Instant
    last_reinforced_at: Instant
    created_by: str | None
    metadata: JsonObject


class EdgeLinked(Edge):
    """POST /graph/edges response: the edge, and whether it was created (201) or reinforced (200)."""

    created: bool


class TraversedNode(Response):
    """One node a traversal reached."""

    memory: Node
    depth: int
    score: float = Field(description="Product of the decayed weights along the path it was reached by.")
    via_node: UUID
    via_relation: Relation


class TraverseResult(Response):
    """POST /graph/traverse response: the nodes reached, in order, and the edges they were reached by."""

    nodes: list[TraversedNode]
    edges: list[Edge]


class NeighborsQuery(Request):
    """GET /graph/nodes/{id}/neighbors query parameters (lists comma-separated)."""

    direction: GraphDirection = "both"
    relations: Annotated[list[Relation] | None, BeforeValidator(_comma_list)] = Field(
        default=None, min_length=1, description="Comma-separated relations (all when absent)."
    )
    kinds: Annotated[list[NodeKind] | None, BeforeValidator(_comma_list)] = Field(
        default=None, min_length=1, description="Comma-separated node kinds (all when absent)."
    )
    min_weight: Weight | None = Field(default=None, description="Default: the tenant's min_weight (0.2).")
    limit: int = Field(default=50, ge=1, le=MAX_GRAPH_LIMIT)


class NodePath(Request):
    """Path parameters of /graph/nodes/{id}."""

    id: UUID


class Neighbor(Response):
    """A node one edge away."""

    memory: Node
    relation: Relation
    direction: Literal["out", "in"] = Field(description="out: the node -> memory; in: memory -> the node.")
    weight: float = Field(description="The edge's weight decayed to now.")


class NeighborList(Response):
    """GET /graph/nodes/{id}/neighbors response, strongest edge first."""

    items: list[Neighbor]


class LinkRequest(Request):
    """POST /graph/edges: link two nodes (an existing edge is reinforced)."""

    source_id: UUID
    target_id: UUID
    relation: Relation
    weight: Weight = 0.5
    metadata: JsonObject | None = Field(default=None, description="A JSON object of at most 4,096 bytes.")


class NodeStats(Response):
    """Node counts of graph_stats."""

    total: int
    by_kind: dict[str, int]
    by_status: dict[str, int]
    pending_embedding: int
    failed_embedding: int
    pending_linking: int
    failed_linking: int
    needs_review: int


class EdgeStats(Response):
    """Edge counts of graph_stats."""

    total: int
    by_relation: dict[str, int]


class DecaySettings(Response):
    """The tenant's decay parameters."""

    half_life_days: float
    min_weight: float
    min_importance: float
    reinforce_step: float


class GraphStats(Response):
    """GET /graph/stats response: what the caller can see of its tenant's graph."""

    nodes: NodeStats
    edges: EdgeStats
    version: int
    settings: DecaySettings


class GraphVersion(Response):
    """GET /graph/version response."""

    version: int
