"""HTTP routes of briefings: `/api/v1/briefings`. One call to public.get_briefing, as PostgREST would make it."""

from __future__ import annotations

from cortex import db
from cortex.briefings import service
from cortex.briefings.models import AgentPath, Briefing, BriefingQuery
from cortex.routing import Call, RawJSON, Reply, Router

router = Router("briefings")


@router.route(
    "GET", "/<agent>", name="get_briefing", summary="An agent's briefing: what it needs to know, from the graph",
    responses={200: Briefing}, query=BriefingQuery, path_params=AgentPath, errors=(403,),
    description="Seven sections (Identity, Active Context, Key Relationships, Patterns & Lessons, Goals, "
    "Unresolved, Recent Events) rendered as markdown or compact text within max_chars (at most 8,000 "
    "characters, 2,000 tokens). Served from the cache while the graph version is unchanged and within the "
    "TTL; every node shown is recorded as accessed. An agent reads its own; admins and monitors any agent's "
    "(shared memories only). Active Context is ranked in SQL (text, the anchors' embedding centroid, graph), "
    "so this route and POST /rest/v1/rpc/get_briefing return the same text.",
)  # fmt: skip
async def get_briefing(call: Call) -> Reply:
    """The briefing of the agent in the path."""
    query = call.query_as(BriefingQuery)
    args = service.briefing_args(call.path_as(AgentPath).agent, format=query.format, max_chars=query.max_chars)
    return Reply(200, RawJSON(await db.acall_as_text(call.claims, "get_briefing", **args)))
