"""Consolidation's models: seed 003's result models and ConfidenceConfig, and the HTTP payloads.

The result models follow the seed's JSON schemas field for field (tests/test_consolidation.py
validates dumps against them); the SQL vocabularies of the same names hold the same lists.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cortex.schemas import Request, Response

# Each list equals its SQL vocabulary function (cortex.consolidation_agents() and the others).
AgentName = Literal["decay", "cluster", "merge", "promote", "relations"]
AGENTS: tuple[AgentName, ...] = ("decay", "cluster", "merge", "promote", "relations")
ItemStatus = Literal["open", "in_progress", "blocked", "closed"]
Urgency = Literal["high", "medium", "low"]
Decision = Literal["auto", "log", "wait"]


class ConfidenceConfig(BaseModel):
    """Seed 003's thresholds: at or above `auto_threshold` a change is applied silently, at or above
    `log_threshold` it is applied and logged for review, below it the item waits for a person
    (`cortex consolidate process ITEM`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    auto_threshold: float = Field(default=0.9, ge=0, le=1)
    log_threshold: float = Field(default=0.7, ge=0, le=1)

    @model_validator(mode="after")
    def _ordered(self) -> ConfidenceConfig:
        if self.log_threshold > self.auto_threshold:
            raise ValueError("log_threshold must not be above auto_threshold")
        return self

    def decide(self, confidence: float) -> Decision:
        """auto, log or wait for a confidence (0..1)."""
        if confidence >= self.auto_threshold:
            return "auto"
        if confidence >= self.log_threshold:
            return "log"
        return "wait"


class _Result(BaseModel):
    # The seed's schemas allow no other keys to be required; these models keep exactly its fields.
    model_config = ConfigDict(extra="ignore", frozen=True)


class DecayResult(_Result):
    """A memory's decay analysis (seed 003)."""

    memory_id: UUID
    score: float = Field(ge=0, le=1)
    urgency: Urgency
    action: Literal["reinforce", "consolidate", "promote", "gc"]
    beads_issue_id: str | None = None


class ClusterResult(_Result):
    """A cluster of similar memories (seed 003)."""

    cluster_id: UUID
    memory_ids: list[UUID] = Field(min_length=2)
    cohesion: float = Field(ge=0, le=1)
    action: Literal["merge", "link", "ignore"]
    confidence: float = Field(ge=0, le=1)
    beads_issue_id: str | None = None


class MergeResult(_Result):
    """A merge of a cluster into one memory (seed 003)."""

    new_memory_id: UUID
    source_ids: list[UUID] = Field(min_length=2)
    relation_ids: list[UUID]
    content_diff: str
    entities_preserved: int = Field(ge=0)
    success: bool
    beads_issue_id: str | None = None


class PromotionResult(_Result):
    """A memory promoted to long-term storage, the vault (seed 003)."""

    memory_id: UUID
    vault_path: str | None = None
    criteria_met: list[str] = Field(min_length=1)
    success: bool
    beads_issue_id: str | None = None


class RelationResult(_Result):
    """A relation found between two memories (seed 003)."""

    from_memory_id: UUID
    to_memory_id: UUID
    relation_id: UUID
    strength: float = Field(ge=0, le=1)
    reasoning: str
    shared_entities: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0, le=1)
    beads_issue_id: str | None = None


AnyResult = DecayResult | ClusterResult | MergeResult | PromotionResult | RelationResult


# --- HTTP payloads -------------------------------------------------------------------------------


class ItemPath(Request):
    """Path parameters of /consolidation/items/{id}."""

    id: UUID = Field(description="The consolidation item.")


class StatusQuery(Request):
    """GET /consolidation/status query parameters."""

    agent: AgentName | None = Field(default=None, description="One agent's queue (default: all five).")
    rate_limit: int = Field(
        default=100, ge=1, le=100_000, description="Operations per minute, for rate_limit_remaining."
    )


class ItemListQuery(Request):
    """GET /consolidation/items query parameters (AND filters)."""

    agent: AgentName | None = None
    status: ItemStatus | None = Field(default="open", description="Default open.")
    urgency: Urgency | None = None
    limit: int = Field(default=50, ge=1, le=500)


class ItemCreate(Request):
    """POST /consolidation/items body (seed 003's create_consolidation_issue)."""

    agent: AgentName
    memory_ids: list[UUID] = Field(min_length=1, max_length=100)
    action: str = Field(min_length=1, max_length=40)
    urgency: Urgency = "medium"
    title: str | None = Field(default=None, min_length=1, max_length=500)
    extra: dict[str, Any] | None = Field(default=None, description="More notes (JSON object).")


class ItemClose(Request):
    """POST /consolidation/items/{id}/close body."""

    reason: str = Field(min_length=1, max_length=2000)


class ItemBlock(Request):
    """POST /consolidation/items/{id}/block body."""

    error: str = Field(min_length=1, max_length=4000)


class ItemUndo(Request):
    """POST /consolidation/items/{id}/undo body."""

    reason: str | None = Field(default=None, max_length=1000)


class ProcessQuery(Request):
    """POST /consolidation/items/{id}/process query parameters."""

    dry_run: bool = False


class RunRequest(Request):
    """POST /consolidation/runs body: `agents` (in pipeline order) or `all`."""

    agents: list[AgentName] | None = Field(default=None, min_length=1, max_length=5)
    all: bool = False
    dry_run: bool = False
    rate_limit: int = Field(default=100, ge=1, le=100_000)

    @model_validator(mode="after")
    def _one_of(self) -> RunRequest:
        if self.all == bool(self.agents):
            raise ValueError("give either agents or all: true")
        return self

    def names(self) -> list[AgentName]:
        """The agents to run, in pipeline order."""
        chosen = set(AGENTS) if self.all else set(self.agents or [])
        return [a for a in AGENTS if a in chosen]


class AgentQueue(Response):
    """One agent's items by status."""

    pending: int
    in_progress: int
    blocked: int


class Status(Response):
    """GET /consolidation/status (seed 003's status output)."""

    agents: dict[str, AgentQueue]
    total_pending: int
    rate_limit_remaining: int
    last_run: dict[str, Any] | None = None


class Item(Response):
    """A consolidation item (seed 003's beads issue)."""

    id: UUID
    agent: AgentName
    title: str
    notes: dict[str, Any]
    labels: list[str]
    urgency: Urgency
    action: str
    status: ItemStatus
    memory_ids: list[UUID]


class ItemList(Response):
    """GET /consolidation/items."""

    items: list[Item]


class ItemCreated(Response):
    """POST /consolidation/items: the item, and whether it is new (false: the same set had one)."""

    item: Item
    created: bool


class Claimed(Response):
    """POST /consolidation/items/{id}/claim."""

    claimed: bool
    item: Item


class Undone(Response):
    """POST /consolidation/items/{id}/undo."""

    item: Item
    restored: list[UUID]
    retired: UUID


class RunReport(Response):
    """POST /consolidation/runs: what each agent scanned, processed and failed."""

    run_id: UUID | None
    dry_run: bool
    agents: dict[str, dict[str, Any]]
