"""Briefing requests and responses (pydantic); the SQL vocabularies of the same names hold the same lists."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import Field

from cortex.graph.models import NodeKind
from cortex.schemas import Instant, Request, Response

# Each list equals its SQL vocabulary function (tests/test_vocabularies.py).
BriefingFormat = Literal["markdown", "compact"]
BriefingScope = Literal["agent", "shared"]
SectionTitle = Literal[
    "Identity", "Active Context", "Key Relationships", "Patterns & Lessons", "Goals", "Unresolved", "Recent Events"
]
AGENT_PATTERN = r"^[a-z][a-z0-9_-]{0,62}$"


class AgentPath(Request):
    """Path parameters of /briefings/{agent}."""

    agent: str = Field(pattern=AGENT_PATTERN, description="The agent whose briefing is read.")


class BriefingQuery(Request):
    """GET /briefings/{agent} query parameters."""

    format: BriefingFormat = Field(
        default="markdown", description="markdown (bullets with bodies) or compact (titles)."
    )
    max_chars: int | None = Field(
        default=None, ge=500, le=8000, description="Character budget (default: the agent's settings, 8,000)."
    )


class EvidenceItem(Response):
    """An observation supporting a pattern (one edge from it)."""

    id: UUID
    title: str
    kind: NodeKind


class OtherSide(Response):
    """The other side of a contradiction."""

    id: UUID
    title: str
    kind: NodeKind
    body: str


class BriefingItem(Response):
    """One node shown in a section; body is what the markdown renderer shows (cut at 200 characters)."""

    id: UUID
    title: str
    kind: NodeKind
    body: str
    evidence: list[EvidenceItem] | None = None
    contradicts: OtherSide | None = None


class BriefingSection(Response):
    """A section and the items it shows."""

    title: SectionTitle
    items: list[BriefingItem]


class Briefing(Response):
    """GET /briefings/{agent} response (public.get_briefing)."""

    agent: str
    format: BriefingFormat
    text: str = Field(description="The rendered briefing, at most max_chars characters.")
    generated_at: Instant
    graph_version: int
    nodes_consulted: int
    cached: bool
    scope: BriefingScope
    max_chars: int
    chars: int
    tokens: int = Field(description="ceil(chars / 4), at most 2,000.")
    sections: list[BriefingSection]
