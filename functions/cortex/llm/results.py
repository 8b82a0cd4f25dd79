"""What the model gateway returns: validated result types, the usage of a call, and its one error.

Kept apart from the gateway (`cortex.llm`) and the offline generator (`cortex.llm.offline`) so
that both import these types and neither imports the other's module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Sentiment = Literal["positive", "neutral", "negative", "escalation"]
Intent = Literal[
    "question",
    "complaint",
    "complaint_resolved",
    "purchase_intent",
    "churn_risk",
    "info_request",
    "scheduling",
    "feedback",
    "other",
]
Operation = Literal[
    "summarize",
    "generate_context",
    "handoff_summary",
    "contradiction_check",
    "ingest_classify",
    "voice_greeting",
    "consolidation_merge",
]
# A caller's sentiment in a voice agent's state (cortex.voice_sentiments(): seed 004's four, plus engaged).
VoiceSentiment = Literal["satisfied", "neutral", "frustrated", "confused", "engaged"]
# The memory kinds a chunk may be classified as (cortex.memory_kinds(); graph.models.MemoryKind).
ChunkKindName = Literal["fact", "decision", "event", "preference", "pattern", "goal", "observation"]


class LLMError(Exception):
    """A model call failed: transport, HTTP status, timeout, or an answer that does not validate.

    `retryable` tells a job queue whether trying again later can help: yes for overload, rate
    limit, timeout, connection and server errors, and for malformed answers (sampling may do
    better next time); no for client errors such as a bad request or bad credentials.

    `usage` is what the API reported for a call that answered but could not be used (an
    off-schema answer still consumed tokens); None when no answer came back.
    """

    def __init__(self, message: str, *, retryable: bool = False, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.usage = usage


class ModelResult(BaseModel):
    # Models answer with extra keys now and then; they are ignored rather than fatal.
    model_config = ConfigDict(extra="ignore", frozen=True)


class InteractionAnalysis(ModelResult):
    """What Cortex stores about one interaction besides its raw content."""

    summary: str = Field(min_length=1)
    key_points: list[str] = Field(default_factory=list)
    sentiment: Sentiment
    intent: Intent

    @field_validator("sentiment", "intent", mode="before")
    @classmethod
    def _normalise_label(cls, value: object) -> object:
        # "Positive " is the right label in the wrong case; anything else stays invalid.
        return value.strip().lower() if isinstance(value, str) else value


class GeneratedContext(ModelResult):
    """The working-context briefing of a contact."""

    summary: str = Field(min_length=1)
    key_facts: list[str] = Field(default_factory=list)
    current_status: str
    recommended_tone: str


class HandoffSummary(ModelResult):
    """What the receiving party of a handoff needs to know, and what to do first."""

    context_summary: str = Field(min_length=1)
    suggested_action: str | None = None


class Signals(ModelResult):
    """Risk and opportunity scores computed from a contact's recent history."""

    churn_risk: float = Field(ge=0.0, le=1.0)
    upsell_potential: float = Field(ge=0.0, le=1.0)
    risk_factors: list[str] = Field(default_factory=list)
    opportunity_factors: list[str] = Field(default_factory=list)
    open_threads: list[dict[str, object]] = Field(default_factory=list)


class ContradictionVerdict(ModelResult):
    """The model's verdict on one numbered pair of memories."""

    pair: int = Field(ge=0, le=99)
    contradicts: bool
    reason: str = Field(default="", max_length=500)


class ContradictionVerdicts(ModelResult):
    """The auto-linker's model check: a verdict per pair it was shown (pairs left out: no verdict)."""

    verdicts: list[ContradictionVerdict] = Field(default_factory=list, max_length=100)


class ChunkKind(ModelResult):
    """The model's kind for one numbered chunk of an ingested file."""

    chunk: int = Field(ge=0, le=199)
    kind: ChunkKindName

    @field_validator("kind", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class ChunkKinds(ModelResult):
    """Ingest's model classification: a kind per chunk it was shown (chunks left out: the heuristic's)."""

    kinds: list[ChunkKind] = Field(default_factory=list, max_length=200)


class VoiceState(ModelResult):
    """A voice agent's state with a caller after a call (seed 004's tier 2, what the model writes)."""

    next_greeting: str = Field(min_length=1, max_length=1000)
    key_topics: list[str] = Field(min_length=3, max_length=5)
    sentiment: VoiceSentiment
    conversation_summary: str = Field(min_length=1, max_length=500)

    @field_validator("next_greeting", "conversation_summary", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    @field_validator("key_topics", mode="before")
    @classmethod
    def _topics(cls, value: object) -> object:
        # Blank topics are dropped, the rest trimmed and cut at 200 characters; the count is then checked.
        if isinstance(value, list):
            return [t.strip()[:200] for t in value if isinstance(t, str) and t.strip()]
        return value

    @field_validator("sentiment", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class MergedMemory(ModelResult):
    """Consolidation's merge: one memory written from several similar ones (checked before use)."""

    title: str = Field(min_length=1, max_length=500)
    body: str = Field(min_length=1, max_length=20000)


@dataclass(frozen=True)
class Usage:
    """Tokens spent by one model call, as recorded in `token_usage`."""

    model: str
    input_tokens: int
    output_tokens: int
    operation: str
