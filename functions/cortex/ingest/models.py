"""HTTP payloads of ingest (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, StringConstraints, model_validator

from cortex.graph.models import MemoryKind
from cortex.schemas import AgentName, Instant, Request, Response

IngestFormat = Literal["md", "txt", "json", "yaml", "csv", "log"]
IngestStatus = Literal["pending", "processed", "failed"]
IngestSource = Literal["api", "cli", "folder"]

FileName = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"\S")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class IngestUpload(Request):
    """POST /ingest as JSON: a file's name (its extension is its format) and its content, as text
    or base64. multipart/form-data is read into the same shape (the `file` part's filename and
    bytes)."""

    file_name: FileName = Field(
        description="The file's name; its extension (.md, .txt, .json, .yaml, .csv, .log) is its format."
    )
    content: str | None = Field(default=None, description="The file's text (UTF-8).")
    content_base64: str | None = Field(default=None, description="The file's bytes in base64 (instead of content).")
    agent: AgentName | None = Field(
        default=None, description="Ingest for this agent (admins only); default the caller."
    )

    @model_validator(mode="after")
    def _one_content(self) -> IngestUpload:
        if (self.content is None) == (self.content_base64 is None):
            raise ValueError("send exactly one of content and content_base64")
        return self

    def data(self) -> bytes:
        """The file's bytes."""
        if self.content is not None:
            return self.content.encode("utf-8")
        try:
            return base64.b64decode(self.content_base64 or "", validate=True)
        except (binascii.Error, ValueError):
            from cortex.errors import CortexError

            raise CortexError(422, "validation_error", "content_base64: not valid base64", "content_base64") from None


class IngestNode(Response):
    """One chunk of an ingested file and the memory it became."""

    index: int
    id: UUID
    kind: MemoryKind
    title: str
    created: bool = Field(description="false: it duplicated an existing memory, which was reinforced instead.")
    deduplicated: Literal["exact", "trigram"] | None = None
    classified_by: str = Field(description="heuristic (cortex.classify_chunk), model, file (a kind field) or caller.")


class IngestError(Response):
    """Why a file was not ingested."""

    field: str | None = None
    message: str


class IngestReport(Response):
    """The per-file report: chunks read, memories created, duplicates (existing memories reinforced
    instead), kinds, errors, and each chunk's memory."""

    file_id: UUID
    file_name: str
    format: IngestFormat | None = None
    sha256: str | None = None
    agent: str
    status: IngestStatus
    chunks: int
    created: int
    duplicates: int
    by_kind: dict[str, int] = Field(default_factory=dict)
    errors: list[IngestError] = Field(default_factory=list)
    nodes: list[IngestNode] = Field(default_factory=list)
    already_ingested: bool = Field(
        default=False, description="true: this content was ingested before; nothing was written."
    )


class IngestFile(Response):
    """A file of the ingest log."""

    id: UUID
    agent: str
    created_by: str | None = None
    file_name: str
    sha256: str | None = None
    format: IngestFormat | None = None
    source: IngestSource
    size_bytes: int | None = None
    status: IngestStatus
    report: dict[str, Any]
    created_at: Instant
    finished_at: Instant | None = None


class IngestFileList(Response):
    """The ingest log, newest first (reports without their node lists)."""

    items: list[IngestFile]


class IngestListQuery(Request):
    """GET /ingest filters."""

    status: IngestStatus | None = None
    agent: AgentName | None = None
    sha256: Sha256 | None = None
    limit: int = Field(default=50, ge=1, le=500)


class IngestPath(Request):
    """The file id in /ingest/<id>."""

    id: UUID
