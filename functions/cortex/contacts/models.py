"""HTTP payloads of contacts (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field, field_validator

from cortex.schemas import (
    JSON_LIMITS,
    MAX_INT,
    AgentName,
    Email,
    JsonObject,
    Name,
    Phone,
    Ref,
    Request,
    Response,
    SearchText,
    Source,
    Tag,
    Tags,
    not_null,
)

Stage = Literal["prospect", "qualified", "opportunity", "customer", "churning", "lost", "recovered"]


# --- contacts -----------------------------------------------------------------------------------


class ContactCreate(Request):
    """POST /contacts: create or update (upsert by normalised email, or by phone when there is no
    email: a caller known by number only). Given fields overwrite, tags accumulate, custom_fields
    merge, the first source is kept."""

    email: Email | None = Field(
        default=None,
        description="Identity of the contact; lower-cased and trimmed. Required unless phone is given.",
        examples=["john@acme.com"],
    )
    name: Name | None = None
    company_name: Name | None = None
    phone: Phone | None = Field(default=None, description="E.164 after normalisation; the identity without an email.")
    stage: Stage | None = Field(default=None, description="Defaults to prospect for a new contact.")
    source: Source | None = Field(default=None, examples=["anna_outbound"])
    owner_agent: AgentName | None = Field(default=None, description="An agent of the tenant.")
    owner_human_id: Ref | None = None
    tags: Tags | None = Field(default=None, description="At most 100 tags of at most 100 characters each.")
    custom_fields: JsonObject | None = Field(default=None, description=JSON_LIMITS)


class ContactPatch(Request):
    """PATCH /contacts/{id}: a key present sets that field (null clears it), an absent key keeps it."""

    # email and stage cannot be cleared: absent keeps them, null is refused (the schema says so).
    email: Email | None = Field(default=None, description="Cannot be null.", json_schema_extra=not_null)
    name: Name | None = None
    company_name: Name | None = None
    phone: Phone | None = None
    stage: Stage | None = Field(default=None, description="Cannot be null.", json_schema_extra=not_null)
    source: Source | None = None
    owner_agent: AgentName | None = None
    owner_human_id: Ref | None = None
    tags: Tags | None = Field(default=None, description="At most 100 tags of at most 100 characters each.")
    custom_fields: JsonObject | None = Field(
        default=None,
        description=f"Replaces the custom fields; cannot be null. {JSON_LIMITS}",
        json_schema_extra=not_null,
    )

    @field_validator("email", "stage", "custom_fields")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("cannot be null")
        return value


class ContactListQuery(Request):
    """GET /contacts query parameters."""

    stage: Stage | None = None
    owner_agent: AgentName | None = None
    owner_human_id: Ref | None = None
    tag: Tag | None = Field(default=None, description="Contacts carrying this tag.")
    search: SearchText | None = Field(default=None, description="Fuzzy match on name, email and company.")
    limit: int = Field(default=20, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=MAX_INT)


class ContactPath(Request):
    """Path parameters of /contacts/{id}."""

    id: UUID


class Contact(Response):
    """A contact as the API returns it."""

    id: UUID
    email: str | None = Field(description="Null for a contact known by phone only (a voice caller).")
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


class ContactList(Response):
    """GET /contacts response, best match first."""

    items: list[Contact]
    limit: int
    offset: int
