"""The memory graph's vocabularies and node representation (pydantic; SQL holds the same lists)."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from cortex.schemas import Instant, JsonObject, Response

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
