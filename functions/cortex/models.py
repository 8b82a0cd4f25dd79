"""Request and response bodies of the HTTP API (seed 000's shapes), as pydantic models.

Request models forbid unknown keys and repeat the SQL check constraints (enums, lengths) so a
bad request is refused before a model is called or a transaction opened, with the field named;
SQL checks everything again, so PostgREST callers get the same rules. Response models describe
the JSON the SQL functions return and allow extra keys, so adding a field in SQL is never a
breaking change. The OpenAPI document is generated from these classes (`cortex.api`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from cortex.llm import Intent, Sentiment

# The same lists as the SQL check constraints (tests compare them with cortex.contact_stages() etc.).
Stage = Literal["prospect", "qualified", "opportunity", "customer", "churning", "lost", "recovered"]
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
]
Direction = Literal["inbound", "outbound"]
AnalysisStatus = Literal["pending", "done"]

AgentName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
Email = Annotated[str, StringConstraints(min_length=1, max_length=320)]


Name = Annotated[str, StringConstraints(max_length=500)]
Phone = Annotated[str, StringConstraints(max_length=50)]
Source = Annotated[str, StringConstraints(max_length=100)]
Ref = Annotated[str, StringConstraints(max_length=200)]  # owner_human_id, human_id, external_id, ...
Subject = Annotated[str, StringConstraints(max_length=1000)]
RawContent = Annotated[str, StringConstraints(max_length=1_000_000)]
SearchText = Annotated[str, StringConstraints(max_length=200)]

__all__ = [
    "AgentName",
    "BudgetCheck",
    "BudgetCheckPath",
    "BudgetCheckQuery",
    "Contact",
    "ContactCreate",
    "ContactCreated",
    "ContactList",
    "ContactListQuery",
    "ContactPatch",
    "ContactPath",
    "ContextBody",
    "ContextHeader",
    "ContextPath",
    "ContextQuery",
    "ContextRefresh",
    "ContextSignals",
    "Direction",
    "ErrorDetail",
    "ErrorResponse",
    "FieldError",
    "Handoff",
    "HandoffCreate",
    "HandoffCreated",
    "HandoffList",
    "HandoffListQuery",
    "HandoffPath",
    "HandoffStatusChange",
    "Health",
    "HealthDeep",
    "HealthReady",
    "Intent",
    "Interaction",
    "InteractionCreate",
    "InteractionList",
    "InteractionListQuery",
    "InteractionLogged",
    "InteractionType",
    "LastHandoff",
    "MigrationStatus",
    "PendingHandoffsQuery",
    "RecentInteraction",
    "Sentiment",
    "Stage",
    "TokenUsage",
    "UsageRecord",
    "UsageRecorded",
    "UsageSummary",
    "UsageSummaryQuery",
    "WorkingContext",
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Response(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- contacts -----------------------------------------------------------------------------------


class ContactCreate(_Request):
    """POST /contacts: create or update (upsert by normalised email). Given fields overwrite,
    tags accumulate, custom_fields merge, the first source is kept."""

    email: Email = Field(description="Identity of the contact; lower-cased and trimmed.", examples=["john@acme.com"])
    name: Name | None = None
    company_name: Name | None = None
    phone: Phone | None = None
    stage: Stage | None = Field(default=None, description="Defaults to prospect for a new contact.")
    source: Source | None = Field(default=None, examples=["anna_outbound"])
    owner_agent: AgentName | None = Field(default=None, description="An agent of the tenant.")
    owner_human_id: Ref | None = None
    tags: list[str] | None = Field(default=None, max_length=100)
    custom_fields: dict[str, Any] | None = None


class ContactPatch(_Request):
    """PATCH /contacts/{id}: a key present sets that field (null clears it), an absent key keeps it."""

    email: Email | None = None
    name: Name | None = None
    company_name: Name | None = None
    phone: Phone | None = None
    stage: Stage | None = Field(default=None, description="Cannot be null.")
    source: Source | None = None
    owner_agent: AgentName | None = None
    owner_human_id: Ref | None = None
    tags: list[str] | None = Field(default=None, max_length=100)
    custom_fields: dict[str, Any] | None = None


class ContactListQuery(_Request):
    """GET /contacts query parameters."""

    stage: Stage | None = None
    owner_agent: AgentName | None = None
    owner_human_id: Ref | None = None
    tag: str | None = Field(default=None, description="Contacts carrying this tag.")
    search: SearchText | None = Field(default=None, description="Fuzzy match on name, email and company.")
    limit: int = Field(default=20, ge=1, le=100)
    offset: int = Field(default=0, ge=0)


class ContactPath(_Request):
    """Path parameters of /contacts/{id}."""

    id: UUID


class Contact(_Response):
    """A contact as the API returns it."""

    id: UUID
    email: str
    name: str | None
    company_name: str | None
    phone: str | None
    stage: Stage
    source: str | None
    owner_agent: str | None
    owner_human_id: str | None
    tags: list[str]
    custom_fields: dict[str, Any]
    interaction_count: int
    first_touch_at: datetime | None
    last_touch_at: datetime | None
    last_touch_agent: str | None
    converted_at: datetime | None
    created_at: datetime
    updated_at: datetime
    score: float | None = Field(default=None, description="Search relevance, only when `search` was given.")


class ContactCreated(Contact):
    """POST /contacts response: the contact, and whether it was created (201) or updated (200)."""

    created: bool


class ContactList(_Response):
    """GET /contacts response, best match first."""

    items: list[Contact]
    limit: int
    offset: int


# --- interactions -------------------------------------------------------------------------------


class InteractionCreate(_Request):
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
    metadata: dict[str, Any] | None = None


class InteractionListQuery(_Request):
    """GET /interactions query parameters."""

    contact_id: UUID
    agent: AgentName | None = None
    type: InteractionType | None = None
    since: datetime | None = Field(default=None, description="ISO timestamp; without a zone it is UTC.")
    limit: int = Field(default=20, ge=1, le=100)
    include_raw: bool = Field(default=False, description="Include raw_content (summaries only by default).")

    @field_validator("since")
    @classmethod
    def _utc_when_naive(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class TokenUsage(_Response):
    """The model call that analysed an interaction."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float


class Interaction(_Response):
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
    created_at: datetime
    raw_content: str | None = None


class InteractionLogged(Interaction):
    """POST /interactions response (201; 200 with duplicate=true for a repeated external_id)."""

    token_usage: TokenUsage | None
    context_refresh_triggered: bool
    duplicate: bool


class InteractionList(_Response):
    """GET /interactions response, newest first."""

    items: list[Interaction]
    limit: int


# --- context ------------------------------------------------------------------------------------


class ContextQuery(_Request):
    """GET /context/{contact_id} query parameters."""

    level: int = Field(
        default=1,
        ge=0,
        le=3,
        description=(
            "0 header (~50 tokens), 1 + working context (~300), 2 + recent interactions (~800), "
            "3 + full history up to the agent's max_input_tokens."
        ),
    )
    refresh: bool = Field(default=False, description="Regenerate the context before answering.")


class ContextPath(_Request):
    """Path parameters of /context/{contact_id}."""

    contact_id: UUID


class ContextHeader(_Response):
    """Who the contact is; fields are dropped last-first when the budget is tight."""

    name: str | None = None
    company: str | None = None
    email: str | None = None
    stage: Stage | None = None
    last_touch: datetime | None = None
    last_touch_agent: str | None = None


class ContextSignals(_Response):
    """Risk and opportunity scores (0-1) with their reasons."""

    churn_risk: float | None = None
    upsell_potential: float | None = None
    risk_factors: list[str] = Field(default_factory=list)
    opportunity_factors: list[str] = Field(default_factory=list)


class ContextBody(_Response):
    """The working-context briefing (level 1 and up)."""

    summary: str | None = None
    key_facts: list[str] = Field(default_factory=list)
    current_status: str | None = None
    recommended_tone: str | None = None
    open_threads: list[dict[str, Any]] = Field(default_factory=list)
    signals: ContextSignals | None = None


class LastHandoff(_Response):
    """The most recent handoff of the contact."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    from_agent: str | None = Field(default=None, alias="from")
    to: str | None = None
    reason: str | None = None
    date: datetime | None = None


class RecentInteraction(_Response):
    """One line of a contact's recent history (level 2 and up)."""

    id: UUID
    agent: str
    type: InteractionType
    summary: str | None = None
    sentiment: Sentiment | None = None
    date: datetime


class WorkingContext(_Response):
    """GET /context/{contact_id} response; token_count never exceeds token_budget."""

    contact_id: UUID
    level: int
    token_count: int
    token_budget: int
    header: ContextHeader
    context: ContextBody | None = None
    last_handoff: LastHandoff | None = None
    recent_interactions: list[RecentInteraction] | None = None
    generated_at: datetime | None
    is_stale: bool
    truncated: bool
    refresh_queued: bool
    interactions_total: int | None = None


class ContextRefresh(_Response):
    """POST /context/{contact_id}/refresh response (202 with queued=true when generation failed)."""

    contact_id: UUID
    regenerated: bool
    previous_generated_at: datetime | None = None
    new_generated_at: datetime | None = None
    token_count: int | None = None
    queued: bool | None = None
    error: str | None = None


# --- health -------------------------------------------------------------------------------------


class Health(_Response):
    """GET /health: the process is up (no dependency is asked)."""

    status: Literal["ok"]
    service: str
    version: str


class MigrationStatus(_Response):
    """Schema migrations known to this build and applied to the database."""

    applied: int
    expected: int
    pending: list[str]


class HealthReady(_Response):
    """GET /health/ready: the database answers and the schema is up to date (503 otherwise)."""

    status: Literal["ok", "unavailable"]
    database: str
    migrations: MigrationStatus | None = None
    error: str | None = None


class HealthDeep(HealthReady):
    """GET /health/deep: ready, plus the language model (`local` when no Claude key is set)."""

    llm: str
    llm_model: str | None = None
    llm_error: str | None = None


# --- errors -------------------------------------------------------------------------------------


class FieldError(_Response):
    """One validation failure."""

    field: str
    message: str
    type: str


class ErrorDetail(_Response):
    """What went wrong: a machine code, a message, the field at fault and how to fix it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    code: str = Field(examples=["validation_error", "not_found", "unauthorized"])
    message: str
    field: str | None = Field(default=None, description="Dotted location of the offending input.")
    hint: str | None = None
    sqlstate: str | None = Field(default=None, description="SQLSTATE when the database refused.")
    detail: str | None = None
    errors: list[FieldError] | None = Field(default=None, description="Every validation failure (422).")
    in_: Literal["path", "query", "body"] | None = Field(
        default=None, alias="in", description="Where the invalid input was (422 validation errors)."
    )
    allowed: list[str] | None = Field(default=None, description="The methods a path accepts (405).")
    request_id: str | None = None


class ErrorResponse(_Response):
    """Every error response has this body."""

    error: ErrorDetail


# --- usage and budgets (issue 4) ---------------------------------------------------------------


class UsageSummaryQuery(_Request):
    """GET /usage/summary query parameters."""

    period: Literal["day", "week", "month"] = Field(default="day", description="in the tenant's time zone")
    agent: AgentName | None = None


class UsageSummary(_Response):
    """Token usage of a period: totals, by agent, by model, and today's budget status (seed 000)."""

    period: str
    start: str
    end: str
    time_zone: str | None = None
    totals: dict[str, Any]
    by_agent: dict[str, Any]
    by_model: dict[str, Any]
    budget_status: dict[str, Any]


class BudgetCheckPath(_Request):
    """GET /usage/budget-check/{agent} path parameters."""

    agent: AgentName


class BudgetCheckQuery(_Request):
    """GET /usage/budget-check/{agent} query parameters."""

    estimated_tokens: int = Field(default=0, ge=0, le=100_000_000)


class BudgetCheck(_Response):
    """Whether an operation fits today's budget: ≤80 % after it proceed, ≤95 % use_haiku, ≤100 % defer,
    over 100 % alert_human (within_budget false)."""

    agent: str
    daily_budget: int
    used_today: int
    remaining: int
    estimated_tokens: int
    within_budget: bool
    recommendation: Literal["proceed", "use_haiku", "defer", "alert_human"]
    budget_percentage_used: float
    retry_after_seconds: int | None = None


class UsageRecord(_Request):
    """POST /usage: a model call an agent made itself, checked against its daily budget."""

    model: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    operation: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    input_tokens: int = Field(ge=0, le=100_000_000)
    output_tokens: int = Field(ge=0, le=100_000_000)
    contact_id: UUID | None = None
    interaction_id: UUID | None = None
    agent: AgentName | None = None


class UsageRecorded(_Response):
    """The recorded call with its cost and the budget after it."""

    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    refused: bool


# --- handoffs (issue 4) ------------------------------------------------------------------------

HandoffReason = Literal[
    "warm_reply",
    "escalation",
    "complex_question",
    "upsell_opportunity",
    "churn_risk",
    "completed_sequence",
    "customer_request",
    "other",
]
Urgency = Literal["low", "normal", "high", "urgent"]
HandoffStatus = Literal["pending", "accepted", "completed", "rejected"]


class HandoffCreate(_Request):
    """POST /handoffs: exactly one of to_agent / to_human_id (checked in SQL, which names the field)."""

    contact_id: UUID
    from_agent: AgentName | None = Field(default=None, description="must be the calling agent when given")
    to_agent: AgentName | None = None
    to_human_id: Ref | None = None
    reason: HandoffReason
    reason_detail: Annotated[str, StringConstraints(max_length=2000)] | None = None
    context_summary: Annotated[str, StringConstraints(max_length=4000)] | None = Field(
        default=None, description="generated from the working context and recent interactions when absent"
    )
    suggested_action: Annotated[str, StringConstraints(max_length=1000)] | None = None
    urgency: Urgency = "normal"
    metadata: dict[str, Any] | None = None


class HandoffCreated(_Response):
    """The new handoff (seed 000's response)."""

    id: UUID
    contact_id: UUID
    context_summary: str
    status: HandoffStatus
    notifications_sent: list[str]
    context_refreshed: bool


class Handoff(_Response):
    """A handoff with its contact."""

    id: UUID
    contact_id: UUID
    from_agent: str
    to_agent: str | None = None
    to_human_id: str | None = None
    reason: str
    urgency: str
    status: HandoffStatus
    context_summary: str | None = None


class HandoffList(_Response):
    """A page of handoffs."""

    items: list[Handoff]
    limit: int


class PendingHandoffsQuery(_Request):
    """GET /handoffs/pending: most urgent first, then oldest."""

    agent: AgentName | None = None
    human_id: Ref | None = None
    urgency: Urgency | None = None
    limit: int = Field(default=20, ge=1, le=100)


class HandoffListQuery(_Request):
    """GET /handoffs: the monitor's stand-up view."""

    since: datetime | None = Field(default=None, description="created or changed since; without a zone it is UTC")
    status: HandoffStatus | None = None
    contact_id: UUID | None = None
    limit: int = Field(default=20, ge=1, le=100)

    @field_validator("since")
    @classmethod
    def _utc_when_naive(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class HandoffPath(_Request):
    """/handoffs/{id} path parameters."""

    id: UUID


class HandoffStatusChange(_Request):
    """PATCH /handoffs/{id}: pending → accepted → completed, or pending/accepted → rejected."""

    # "pending" is a known status: moving back to it is an illegal move (409), not bad input.
    status: HandoffStatus
    note: Annotated[str, StringConstraints(max_length=2000)] | None = None
