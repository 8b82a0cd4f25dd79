"""Payloads of tenancy: who the caller is."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import Field

from cortex.schemas import Response


class Me(Response):
    """The caller as the API sees it: the tenant and agent its key or JWT acts as (public.whoami)."""

    tenant_id: UUID
    tenant: str = Field(description="the tenant's slug", examples=["acme"])
    tenant_name: str
    time_zone: str = Field(examples=["Europe/Berlin"])
    agent: str = Field(examples=["luna"])
    display_name: str | None = None
    role: Literal["agent", "monitor", "admin"]
    read_only: bool
    can_write: bool = Field(description="false for a read-only agent: its writes are refused (403)")
    is_admin: bool = Field(description="an admin may act for the tenant's other agents")
