"""HTTP payloads of voice (pydantic; the OpenAPI document is generated from them).

The two webhooks take the voice platform's own formats (ElevenLabs' conversation-initiation
client data, and its post-call transcription event), which carry more keys than Cortex reads: those
models ignore unknown keys instead of refusing them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StrictStr, StringConstraints

from cortex.llm.results import VoiceSentiment
from cortex.schemas import AgentName, Request, Response

# Each list equals its SQL vocabulary function (tests/test_vocabularies.py).
ProfileSource = Literal["platform", "manual"]
CallStatus = Literal["queued", "done", "failed"]

PlatformAgentId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
ConversationId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:-]{1,200}$")]


class _Platform(BaseModel):
    """Base of the platform's payloads: keys Cortex does not read are ignored."""

    model_config = ConfigDict(extra="ignore")


# --- call start: the client-data webhook -----------------------------------------------------------


class ClientDataRequest(_Platform):
    """What ElevenLabs posts when a Twilio call to an agent starts (conversation initiation client data)."""

    caller_id: str = Field(max_length=64, description="The caller's number.", examples=["+16125551234"])
    agent_id: PlatformAgentId = Field(description="The voice platform's id of the agent receiving the call.")
    called_number: str | None = Field(default=None, max_length=64, description="The number that was called.")
    call_sid: str | None = Field(default=None, max_length=200, description="The telephony provider's call id.")


class DynamicVariables(Response):
    """The dynamic variables every answer carries (empty values for a new caller)."""

    caller_name: str = Field(description="The caller's name, '' when unknown.")
    returning_caller: bool
    total_interactions: int = Field(description="Calls from this number to any voice agent of the tenant.")
    agent_conversation_count: int = Field(description="Calls from this number to this agent.")


class AgentOverride(Response):
    """conversation_config_override.agent: the agent's stored greeting for this caller."""

    first_message: str


class ConfigOverride(Response):
    """conversation_config_override: present only when the agent has a greeting for this caller."""

    agent: AgentOverride


class ClientDataResponse(Response):
    """The answer, in ElevenLabs' conversation_initiation_client_data format."""

    type: Literal["conversation_initiation_client_data"]
    dynamic_variables: DynamicVariables
    conversation_config_override: ConfigOverride | None = None


# --- call end: the post-call webhook ---------------------------------------------------------------


class TranscriptTurn(_Platform):
    """One turn of the call; a turn without text (a tool call) has message null."""

    role: Literal["agent", "user"]
    message: StrictStr | None = None


class PostCallData(_Platform):
    """The `data` of a post_call_transcription event (the fields Cortex reads)."""

    agent_id: PlatformAgentId
    conversation_id: ConversationId
    transcript: list[TranscriptTurn]
    metadata: dict[str, Any] = Field(default_factory=dict)
    conversation_initiation_client_data: dict[str, Any] | None = None


class PostCallEvent(_Platform):
    """The post-call webhook's body: post_call_transcription events are stored; other types
    (post_call_audio, call_initiation_failure) are acknowledged and ignored."""

    type: StrictStr
    event_timestamp: int | None = None
    data: dict[str, Any]


class TranscriptionEvent(_Platform):
    """A post_call_transcription event, checked field by field (errors name data.<field>)."""

    type: Literal["post_call_transcription"]
    event_timestamp: int | None = None
    data: PostCallData


class PostCallAck(Response):
    """POST /voice/post-call response: received at once, processed by the worker."""

    received: bool
    conversation_id: str | None = None
    duplicate: bool = Field(default=False, description="A replay of a conversation already received: nothing done.")
    ignored: str | None = Field(default=None, description="Why an event was acknowledged without work (its type).")


# --- callers, agents, secrets ----------------------------------------------------------------------


class CallerPath(Request):
    """Path parameters of /voice/callers/{phone}."""

    phone: str = Field(max_length=64, description="The caller's number (E.164; formatting is removed).")


class CallerState(Response):
    """Tier 2: the calling agent's own state with the caller."""

    agent: str
    next_greeting: str
    key_topics: list[str]
    sentiment: VoiceSentiment
    conversation_summary: str
    last_call_date: datetime
    conversation_count: int
    model: str | None = None


class VoiceCaller(Response):
    """GET /voice/callers/{phone}: tier 1 and the calling agent's own tier 2 (null if none)."""

    phone: str
    contact_id: UUID
    name: str | None
    first_seen: datetime
    total_interactions: int
    last_call_at: datetime | None
    agent: str
    state: CallerState | None


class VoiceAgentCreate(Request):
    """POST /voice/agents (admins): map a platform agent to a Cortex agent; give name,
    first_message or system_prompt to register its profile by hand (else it is fetched)."""

    platform_agent_id: PlatformAgentId
    agent: AgentName = Field(description="The Cortex agent this voice agent is (its tier 2 is that agent's).")
    name: Annotated[str, StringConstraints(max_length=200)] | None = None
    first_message: Annotated[str, StringConstraints(max_length=2000)] | None = None
    system_prompt: Annotated[str, StringConstraints(max_length=20000)] | None = None


class VoiceAgent(Response):
    """A voice agent and its profile cache's counters."""

    platform_agent_id: str
    agent: str
    name: str | None
    first_message: str | None
    system_prompt: str | None
    profile_source: ProfileSource
    profile_fetched_at: datetime | None
    profile_fresh: bool
    profile_hits: int
    profile_misses: int
    hit_rate: float | None
    created_at: datetime
    updated_at: datetime


class CacheStats(Response):
    """The profile cache in all: hits, misses, hit rate (target over 0.8), TTL."""

    hits: int
    misses: int
    hit_rate: float | None
    target: float
    ttl_hours: int


class VoiceAgentList(Response):
    """GET /voice/agents."""

    items: list[VoiceAgent]
    cache: CacheStats


class VoiceSecretsUpdate(Request):
    """POST /voice/secrets (admins)."""

    rotate_webhook_secret: bool = Field(
        default=False, description="Make a new client-data secret (sent as X-Voice-Secret); shown once."
    )
    post_call_secret: Annotated[str, StringConstraints(min_length=8, max_length=500)] | None = Field(
        default=None, description="The post-call webhook's HMAC secret, as the platform shows it."
    )
    platform_api_key: Annotated[str, StringConstraints(min_length=8, max_length=500)] | None = Field(
        default=None, description="The platform API key (xi-api-key) for its agents API."
    )


class VoiceSecrets(Response):
    """POST /voice/secrets response: the new client-data secret once; the others are never shown."""

    webhook_secret: str | None
    webhook_secret_prefix: str | None
    post_call_secret_set: bool
    platform_api_key_set: bool
    updated_at: datetime
