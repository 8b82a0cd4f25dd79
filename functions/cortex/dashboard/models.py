"""HTTP payloads of the dashboard (pydantic; the OpenAPI document is generated from them)."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal
from uuid import UUID

from pydantic import ConfigDict, Field

from cortex.schemas import AgentName, Request, Response

DashboardRole = Literal["admin", "monitor"]


class SignIn(Request):
    """The key an admin or monitor agent signs in with; it is exchanged for a session cookie."""

    key: str = Field(min_length=1, max_length=2000, description="An admin or monitor agent's key (ctx_...) or JWT.")


class DashboardSession(Response):
    """Who is signed in to the dashboard, and until when."""

    tenant_id: UUID
    tenant_name: str
    tenant_slug: str
    time_zone: str
    agent: str
    role: DashboardRole
    read_only: bool
    expires_at: datetime | None = None


class SignedOut(Response):
    """The answer to a sign-out: whether a session was ended."""

    signed_out: bool


class UsagePoint(Response):
    """One day of an agent's usage."""

    day: date
    total_tokens: int
    refused: int


class AgentUsage(Response):
    """An agent's daily budget and its usage per day, oldest first."""

    agent: str
    role: str
    daily_budget: int
    series: list[UsagePoint]


class UsageSeries(Response):
    """Tokens per agent per day for the last `days` days, in the tenant's time zone."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    days: int
    time_zone: str
    from_: date = Field(alias="from")
    to: date
    agents: list[AgentUsage]


class UsageQuery(Request):
    """How many days the usage chart covers."""

    days: int = Field(default=30, ge=1, le=90)


class AgentQuery(Request):
    """The agent a page is about (default: the first agent of the tenant)."""

    agent: AgentName | None = None


class ContactSearch(Request):
    """A fuzzy search over the tenant's contacts."""

    search: str | None = Field(default=None, max_length=200)


class ContactPath(Request):
    """A contact, by id."""

    contact_id: UUID


class NextQuery(Request):
    """Where to go after signing in (a dashboard path)."""

    next: str | None = Field(default=None, max_length=500, pattern=r"^/dashboard(/[A-Za-z0-9/_-]*)?(\?[^\s<>\"']*)?$")


class StaticPath(Request):
    """A file of the dashboard's static folder: its script, its styles, the chart library and its licence."""

    name: str = Field(pattern=r"^(dashboard\.(js|css)|chart\.umd\.min\.js|chart\.js\.LICENSE\.md)$")


class StaticQuery(Request):
    """The file's version, as the pages link it (the start of its SHA-256): the answer may then be cached."""

    v: str | None = Field(default=None, max_length=64, pattern=r"^[0-9a-f]+$")
