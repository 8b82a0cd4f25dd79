"""What every capability's HTTP payloads share: the request/response bases, constrained field
types, and the error body.

Request models forbid unknown keys and repeat the SQL check constraints (enums, lengths) so a
bad request is refused before a model is called or a transaction opened, with the field named;
SQL checks everything again, so PostgREST callers get the same rules. Response models describe
the JSON the SQL functions return and allow extra keys, so adding a field in SQL is never a
breaking change. The OpenAPI document is generated from these classes (`cortex.openapi`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

AgentName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
Email = Annotated[str, StringConstraints(min_length=1, max_length=320)]
Name = Annotated[str, StringConstraints(max_length=500)]
Phone = Annotated[str, StringConstraints(max_length=50)]
Source = Annotated[str, StringConstraints(max_length=100)]
Ref = Annotated[str, StringConstraints(max_length=200)]  # owner_human_id, human_id, external_id, ...
Subject = Annotated[str, StringConstraints(max_length=1000)]
RawContent = Annotated[str, StringConstraints(max_length=1_000_000)]
SearchText = Annotated[str, StringConstraints(max_length=200)]


class Request(BaseModel):
    """Base of request models: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    """Base of response models: extra keys are allowed (adding a field in SQL is not breaking)."""

    model_config = ConfigDict(extra="allow")


class FieldError(Response):
    """One validation failure."""

    field: str
    message: str
    type: str


class ErrorDetail(Response):
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


class ErrorResponse(Response):
    """Every error response has this body."""

    error: ErrorDetail
