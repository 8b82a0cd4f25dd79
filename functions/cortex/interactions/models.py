"""HTTP payloads of interactions (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, RootModel, SkipValidation, StringConstraints

from cortex.llm.results import Intent, Sentiment
from cortex.schemas import JSON_LIMITS, AgentName, Instant, JsonObject, RawContent, Ref, Request, Response, Subject

InteractionType = Literal[
    "email_sent",
    "email_received",
    "ticket_opened",
    "ticket_resolved",
    "call",
    "note",
    "order_placed",
    "refund_processed",
    "nudge_sent",
    "sequence_started",
    "sequence_completed",
    # seed 002's customer events (docs/customers.md)
    "meeting",
    "email",
    "task",
    "milestone",
    "status_change",
    "artifact_created",
]
Direction = Literal["inbound", "outbound"]
AnalysisStatus = Literal["pending", "done"]


# --- interactions -------------------------------------------------------------------------------


class InteractionCreate(Request):
    """POST /interactions: log a touchpoint. Without `summary`, Cortex summarises raw_content now
    (Claude Haiku, or the local summariser offline) and records the call in token usage."""

    contact_id: UUID
    type: InteractionType
    agent: AgentName | None = Field(default=None, description='The calling agent (default) or "human".')
    human_id: Ref | None = Field(default=None, description='Required when agent is "human".')
    direction: Direction | None = None
    subject: Subject | None = None
    raw_content: RawContent | None = None
    summary: str | None = Field(default=None, description="Bring your own summary to skip summarisation.")
    key_points: list[str] | None = None
    sentiment: Sentiment | None = None
    intent: Intent | None = None
    external_id: Ref | None = Field(default=None, description="Logging the same external_id twice is idempotent.")
    campaign_id: Ref | None = None
    thread_id: Ref | None = None
    metadata: JsonObject | None = Field(default=None, description=JSON_LIMITS)


class InteractionListQuery(Request):
    """GET /interactions query parameters."""

    contact_id: UUID
    agent: AgentName | None = None
    type: InteractionType | None = None
    since: Instant | None = Field(default=None, description="ISO timestamp; without a zone it is UTC.")
    limit: int = Field(default=20, ge=1, le=100)
    include_raw: bool = Field(default=False, description="Include raw_content (summaries only by default).")


class TokenUsage(Response):
    """The model call that analysed an interaction."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float


class Interaction(Response):
    """An interaction as the API returns it (raw_content only with include_raw)."""

    id: UUID
    contact_id: UUID
    agent: str
    human_id: str | None
    type: InteractionType
    direction: Direction | None
    subject: str | None
    summary: str | None
    sentiment: Sentiment | None
    key_points: list[str] | None
    intent: Intent | None
    external_id: str | None
    campaign_id: str | None
    thread_id: str | None
    metadata: dict[str, Any]
    token_count: int | None
    analysis_status: AnalysisStatus
    created_at: datetime = Field(description="When Cortex stored it.")
    occurred_at: datetime = Field(description="When it happened (ordering and recency use this).")
    raw_content: str | None = None


class InteractionLogged(Interaction):
    """POST /interactions response (201; 200 with duplicate=true for a repeated external_id)."""

    token_usage: TokenUsage | None
    context_refresh_triggered: bool
    duplicate: bool


class InteractionList(Response):
    """GET /interactions response, newest first."""

    items: list[Interaction]
    limit: int


# --- import (backfill) --------------------------------------------------------------------------

IMPORT_MAX_ITEMS = 5000


class InteractionImportItem(Request):
    """One interaction to import: the fields of POST /interactions plus `occurred_at`, with the
    contact by `contact_id` or `contact_email` (looked up, never created). Each item is checked
    in SQL on its own; a bad one is reported in `errors` and writes nothing."""

    contact_id: UUID | None = Field(default=None, description="The contact (or give contact_email).")
    contact_email: Annotated[str, StringConstraints(max_length=320)] | None = Field(
        default=None, description="The contact's email (normalised); the contact must exist."
    )
    type: InteractionType
    occurred_at: datetime = Field(description="When it happened (ISO 8601, UTC without a zone); not in the future.")
    external_id: Ref = Field(description="Id in the source system: re-importing it (same contact, type) is a no-op.")
    agent: AgentName | None = Field(default=None, description='The calling agent (default) or "human".')
    human_id: Ref | None = Field(default=None, description='Required when agent is "human".')
    direction: Direction | None = None
    subject: Subject | None = None
    raw_content: RawContent | None = None
    summary: str | None = Field(default=None, description="With a summary the row is stored analysed (no job).")
    key_points: list[str] | None = None
    sentiment: Sentiment | None = None
    intent: Intent | None = None
    campaign_id: Ref | None = None
    thread_id: Ref | None = None
    metadata: dict[str, Any] | None = None


class InteractionImport(RootModel[list[SkipValidation[InteractionImportItem]]]):
    """POST /interactions/import: a JSON array of interactions, or JSON lines (one per line) with
    Content-Type application/x-ndjson. Items are validated one by one in SQL (per-row errors)."""

    root: Annotated[list[SkipValidation[InteractionImportItem]], Field(max_length=IMPORT_MAX_ITEMS)]


class ImportRowError(Response):
    """Why one item was not stored (nothing of it was written)."""

    index: int = Field(description="0-based position of the item (JSON lines: line number - 1).")
    field: str = Field(description='The offending field ("item" when the item itself is not an object).')
    message: str


class ImportResult(Response):
    """POST /interactions/import response: counts and one error per rejected item."""

    received: int
    inserted: int
    duplicates: int = Field(description="Items already stored (same contact, type and external_id).")
    failed: int
    summaries_queued: int = Field(description="summarise_interaction jobs queued (the worker summarises them).")
    errors: list[ImportRowError]
