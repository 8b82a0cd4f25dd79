"""The SDK's briefings methods (routes under /api/v1/briefings/)."""

from __future__ import annotations

from typing import Any

from cortex.briefings.models import AgentPath, Briefing, BriefingQuery
from cortex.client._core import Op, amethod, checked, method, parser, query_of, segment


def get_briefing(agent: str, query: BriefingQuery | None = None, /, **fields: Any) -> Op[Briefing]:
    """GET /briefings/<agent>: An agent's briefing: what it needs to know, from the graph."""
    where = checked(AgentPath, None, {"agent": agent}, "path")
    query = checked(BriefingQuery, query, fields, "query")
    return Op("get_briefing", "GET", f"/briefings/{segment(where.agent)}", parser(Briefing), query=query_of(query))


class Methods:
    """briefings: the Client's methods."""

    get_briefing = method(get_briefing)


class AsyncMethods:
    """briefings: the AsyncClient's methods."""

    get_briefing = amethod(get_briefing)
