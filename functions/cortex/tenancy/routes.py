"""HTTP routes of tenancy: `GET /api/v1/me`."""

from __future__ import annotations

from cortex import db
from cortex.routing import Call, Reply, Router
from cortex.tenancy.models import Me

router = Router("tenancy", prefix="me")


@router.route(
    "GET", "", name="whoami", summary="Who am I: the tenant and agent this key acts as", responses={200: Me},
    description="Any caller. A client that holds only a key (the MCP server, an SDK user) learns its agent, role "
    "and whether it may write: exactly what every other route will apply to it.",
)  # fmt: skip
async def whoami(call: Call) -> Reply:
    """The caller's tenant and agent (public.whoami)."""
    return Reply(200, await db.acall_as(call.claims, "whoami"))
