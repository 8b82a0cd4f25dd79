"""Payloads of customers: the agents' tool arguments (seed 002's schemas, camelCase as the seed
writes them; the Anthropic tool definitions are generated from these models) and the HTTP chat
request in the Vercel AI SDK's UIMessage shape."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, StrictStr, StringConstraints

from cortex.schemas import Request

# Each list equals its SQL vocabulary function (tests/test_vocabularies.py).
CustomerStatus = Literal["lead", "prospect", "active", "paused", "churned", "archived"]
EventType = Literal["note", "meeting", "email", "call", "task", "milestone"]
ProjectStatus = Literal["planning", "active", "on_hold", "completed"]
ArtifactType = Literal["strategy", "research", "roadmap", "spec", "analysis", "report", "other"]
ArtifactStatus = Literal["draft", "review", "final"]
AgentType = Literal["customer_mgmt", "product_mgmt"]

Text = Annotated[str, StringConstraints(min_length=1, max_length=10_000)]


class ToolArgs(BaseModel):
    """Base of a tool's arguments: unknown keys are refused, so a model's typo is an error it sees."""

    model_config = ConfigDict(extra="forbid")


class UpdateCustomerStatus(ToolArgs):
    """Change the customer's lifecycle status; the transition is logged as a status_change event."""

    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")
    newStatus: CustomerStatus
    reason: Annotated[str, StringConstraints(max_length=1000)] = Field(description="Reason for status change")


class UpdateCustomerInfo(ToolArgs):
    """Merge key-value pairs into the customer's info (atomic JSONB merge)."""

    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")
    info: dict[str, Any] = Field(description="Key-value pairs to merge into customer info", min_length=1)


class CreateEventLogEntry(ToolArgs):
    """Log an interaction or note to the customer's event timeline."""

    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")
    eventType: EventType
    description: Text


class GetCustomerSummary(ToolArgs):
    """Re-fetch the full customer context (the same text as the system prompt's)."""

    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")


class CreateProject(ToolArgs):
    """Create a new project for the customer."""

    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    description: Annotated[str, StringConstraints(max_length=4000)] | None = None
    status: ProjectStatus = "planning"


class CreateArtifact(ToolArgs):
    """Create a new artifact (a document with full Markdown content) within a project."""

    projectId: UUID
    title: Annotated[str, StringConstraints(min_length=1, max_length=300)]
    type: ArtifactType
    content: Annotated[str, StringConstraints(max_length=200_000)] = Field(description="Full Markdown content")
    status: ArtifactStatus = "draft"


class UpdateArtifact(ToolArgs):
    """Update an existing artifact's content, title or status."""

    artifactId: UUID
    content: Annotated[str, StringConstraints(max_length=200_000)] | None = None
    title: Annotated[str, StringConstraints(min_length=1, max_length=300)] | None = None
    status: ArtifactStatus | None = None


class ListProjects(ToolArgs):
    """List all projects of the customer."""

    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")


class ListArtifacts(ToolArgs):
    """List the artifacts of a project, or across all the customer's projects."""

    projectId: UUID | None = None
    customerId: UUID | None = Field(default=None, description="The customer (default: this chat's customer).")


class Handoff(ToolArgs):
    """Transfer the conversation to the other agent when the request is outside your domain."""

    reason: Annotated[str, StringConstraints(min_length=1, max_length=2000)] = Field(
        description="Why the other agent should take over"
    )
    summary: Annotated[str, StringConstraints(min_length=1, max_length=4000)] = Field(
        description="What was discussed so far, for the other agent"
    )
    pendingRequest: Annotated[str, StringConstraints(min_length=1, max_length=2000)] = Field(
        description="The user's request the other agent should answer"
    )


# --- HTTP: the chat request (the AI SDK's useChat body) ---------------------------------------------------


class MessagePart(BaseModel):
    """One part of a UIMessage: text parts are read; other parts (tool, data, step) are kept as sent."""

    model_config = ConfigDict(extra="allow")

    type: StrictStr = Field(max_length=100)
    text: StrictStr | None = Field(default=None, max_length=100_000)


class MessageMetadata(BaseModel):
    """A UIMessage's metadata: Cortex reads agentType (which agent answered)."""

    model_config = ConfigDict(extra="allow")

    agentType: AgentType | None = None


class UIMessage(BaseModel):
    """A message as the AI SDK's useChat sends it: {id, role, parts, metadata}; `content` (a
    string) is accepted for simple clients."""

    model_config = ConfigDict(extra="allow")

    id: StrictStr | None = Field(default=None, max_length=200)
    role: Literal["system", "user", "assistant"]
    parts: list[MessagePart] | None = Field(default=None, max_length=200)
    content: StrictStr | None = Field(default=None, max_length=100_000)
    metadata: MessageMetadata | None = None

    def text(self) -> str:
        """The message's text: its text parts joined, else its content."""
        if self.parts is not None:
            return "".join(p.text or "" for p in self.parts if p.type == "text")
        return self.content or ""


class ChatRequest(Request):
    """POST /customers/{id}/chat/stream: the conversation so far, the last message the user's."""

    model_config = ConfigDict(extra="ignore")

    id: StrictStr | None = Field(default=None, max_length=200, description="The chat id (useChat sends one).")
    messages: list[UIMessage] = Field(min_length=1, max_length=500)
    trigger: StrictStr | None = Field(default=None, max_length=100)
    messageId: StrictStr | None = Field(default=None, max_length=200)


class CustomerPath(Request):
    """Path parameters of /customers/{customer_id}/..."""

    customer_id: UUID


class ContextQuery(Request):
    """Query of GET /customers/{customer_id}/context."""

    max_tokens: int = Field(default=3000, ge=200, le=20000)


class CustomerContext(BaseModel):
    """GET /customers/{customer_id}/context: the markdown context and its estimated tokens."""

    customer_id: UUID
    context: str
    tokens: int


class UIMessageChunk(BaseModel):
    """One part of the UI message stream (sent as `data: {json}` server-sent events, then
    `data: [DONE]`): start, start-step, text-start/-delta/-end, tool-input-available,
    tool-output-available, tool-output-error, data-agent, data-handoff, message-metadata, finish, error."""

    model_config = ConfigDict(extra="allow")

    type: str
