"""HTTP payloads of memories (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator

from cortex.graph.models import MemoryStatus, Node, NodeKind, Relation, Visibility
from cortex.schemas import JSON_LIMITS, AgentName, Instant, JsonObject, Request, Response

#: What a caller may write: the memory kinds, and the entities no seed 000 table holds (people and
#: systems). Agent and contact nodes are mirrored from their tables, never written.
WritableKind = Literal["fact", "decision", "event", "preference", "pattern", "goal", "observation", "person", "system"]

Title = Annotated[str, StringConstraints(min_length=1, max_length=500, pattern=r"\S")]
Body = Annotated[str, StringConstraints(max_length=20000)]
MemoryTag = Annotated[str, StringConstraints(max_length=100)]
MemoryTags = Annotated[list[MemoryTag], Field(max_length=50)]
Key = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]
Unit = Annotated[float, Field(ge=0, le=1)]
Reason = Annotated[str, StringConstraints(max_length=1000)]
#: A comma-separated list in a query string (kinds=fact,decision).
CommaList = Annotated[str, StringConstraints(min_length=1, max_length=1000)]

_NODE_KINDS = set(get_args(NodeKind))


def split_list(value: str | None) -> list[str] | None:
    """The items of a comma-separated query parameter (None when absent)."""
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


class MemoryLink(Request):
    """An edge from the memory being written to a node of the tenant."""

    target_id: UUID = Field(description="A node visible to the caller (a memory, an agent, a contact, an event).")
    relation: Relation
    weight: Unit = Field(default=0.5, description="0..1; an existing edge keeps the greater weight.")


_KEY = "A slot (e.g. contact:<id>:phone): the active memory holding it in the same scope is superseded."
_AGENT = "Write as this agent (admins only); default the caller."


class MemoryCreate(Request):
    """POST /memories: remember something. An exact or near duplicate reinforces the existing memory
    instead (200, created=false); with a key, the memory holding that key is superseded."""

    kind: WritableKind
    title: Title
    body: Body = ""
    importance: Unit | None = Field(default=None, description="0..1, default 0.5.")
    confidence: Unit | None = Field(default=None, description="0..1, default 0.8.")
    tags: MemoryTags | None = Field(default=None, description="At most 50 tags; lower-cased.")
    visibility: Visibility = Field(default="shared", description="private: only the writing agent sees it.")
    key: Key | None = Field(default=None, description=_KEY)
    contact_id: UUID | None = Field(default=None, description="A contact of the tenant this memory is about.")
    valid_from: Instant | None = Field(default=None, description="When it became true (default now).")
    permanent: bool = Field(default=False, description="A permanent memory's edges never decay.")
    metadata: JsonObject | None = Field(default=None, description=f"{JSON_LIMITS} At most 16,384 bytes.")
    links: list[MemoryLink] | None = Field(default=None, max_length=100)
    agent: AgentName | None = Field(default=None, description=_AGENT)


class MemorySupersede(Request):
    """POST /memories/{id}/supersede: a new version of an active memory. Kind, body, key, contact_id,
    visibility and tags are the old one's unless given."""

    title: Title
    body: Body | None = None
    kind: WritableKind | None = None
    importance: Unit | None = None
    confidence: Unit | None = None
    tags: MemoryTags | None = None
    visibility: Visibility | None = None
    key: Key | None = None
    contact_id: UUID | None = None
    valid_from: Instant | None = Field(default=None, description="When the new version became true (default now).")
    permanent: bool | None = None
    metadata: JsonObject | None = Field(default=None, description=f"{JSON_LIMITS} At most 16,384 bytes.")
    links: list[MemoryLink] | None = Field(default=None, max_length=100)
    agent: AgentName | None = Field(default=None, description=_AGENT)


class MemoryPatch(Request):
    """PATCH /memories/{id}: a key present sets that field, an absent key keeps it. Only valid_to may
    be null (it clears it). A new title or body is embedded and linked again."""

    title: Title | None = None
    body: Body | None = None
    importance: Unit | None = None
    confidence: Unit | None = None
    tags: MemoryTags | None = None
    metadata: JsonObject | None = Field(default=None, description=JSON_LIMITS)
    permanent: bool | None = None
    needs_review: bool | None = Field(default=None, description="false also clears review_reason.")
    valid_to: Instant | None = Field(default=None, description="When it stopped being true; null clears it.")

    @field_validator("title", "body", "importance", "confidence", "tags", "metadata", "permanent", "needs_review")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("cannot be null")
        return value


class MemoryListQuery(Request):
    """GET /memories query parameters."""

    kinds: CommaList | None = Field(default=None, description="Comma-separated node kinds, e.g. fact,decision.")
    agent: AgentName | None = Field(default=None, description="Written by this agent.")
    contact_id: UUID | None = None
    tags: CommaList | None = Field(default=None, description="Comma-separated; nodes carrying all of them.")
    status: MemoryStatus | None = Field(default=None, description="Default: active (and superseded if asked).")
    since: Instant | None = Field(default=None, description="Created at or after.")
    until: Instant | None = Field(default=None, description="Created before.")
    as_of: Instant | None = Field(default=None, description="The nodes valid then, whatever their status now.")
    include_superseded: bool = False
    needs_review: bool | None = None
    limit: int = Field(default=50, ge=1, le=200)
    cursor: Annotated[str, StringConstraints(max_length=100)] | None = Field(
        default=None, description="next_cursor of the previous page."
    )

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, value: str | None) -> str | None:
        for kind in split_list(value) or []:
            if kind not in _NODE_KINDS:
                raise ValueError(f"unknown kind {kind!r}; kinds are {', '.join(get_args(NodeKind))}")
        return value


class MemoryPath(Request):
    """Path parameters of /memories/{id}."""

    id: UUID


class MemoryGetQuery(Request):
    """GET /memories/{id} query parameters."""

    as_of: Instant | None = Field(default=None, description="404 unless the memory was valid then.")
    include_edges: bool = True


class MemoryForgetQuery(Request):
    """DELETE /memories/{id} query parameters."""

    reason: Reason | None = Field(default=None, description="Kept in the memory's metadata.")


class MemoryEdge(Response):
    """An edge as the API returns it (cortex.memory_edge_json)."""

    source_id: UUID
    target_id: UUID
    relation: Relation
    weight: float = Field(description="Stored weight, at last_reinforced_at.")
    current_weight: float = Field(description="The weight now, decayed (cortex.decayed_weight).")
    created_at: Instant
    last_reinforced_at: Instant
    created_by: str | None
    metadata: dict[str, Any]


class MemoryWritten(Response):
    """POST /memories response: the memory, whether it was created (201) or a duplicate reinforced (200)."""

    memory: Node
    created: bool
    deduplicated: Literal["exact", "trigram"] | None
    superseded: list[UUID] = Field(description="The memories this one superseded (its key slot).")
    links: list[MemoryEdge]


class MemorySuperseded(Response):
    """POST /memories/{id}/supersede response: the new version and the old one, now superseded."""

    memory: Node
    superseded: Node
    links: list[MemoryEdge]


class MemoryWithEdges(Node):
    """GET /memories/{id} response: the node and its visible edges (both directions, strongest first)."""

    edges: list[MemoryEdge] | None = Field(default=None, description="Absent with include_edges=false.")


class MemoryList(Response):
    """GET /memories response, newest first."""

    items: list[Node]
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last.")
