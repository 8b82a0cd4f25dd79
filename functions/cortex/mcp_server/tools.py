"""The MCP tools: for each, its arguments (the server's own request models, combined when a route
has path and body or query parameters), a description written for a model, and the SDK call.

Arguments are validated here with those models, so a refusal names the argument and says how to
fix the call, before anything is sent to Cortex.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cortex.briefings.models import AgentPath, Briefing, BriefingQuery
from cortex.client import AsyncClient
from cortex.contacts.models import ContactList, ContactListQuery
from cortex.context.models import ContextPath, ContextQuery, WorkingContext
from cortex.handoffs.models import (
    Handoff,
    HandoffCreate,
    HandoffCreated,
    HandoffList,
    HandoffPath,
    HandoffStatusChange,
    PendingHandoffsQuery,
)
from cortex.interactions.models import InteractionCreate, InteractionLogged
from cortex.memories.models import MemoryCreate, MemoryWritten
from cortex.memories.search import MemorySearch, MemorySearchResults
from cortex.usage.models import BudgetCheck, BudgetCheckPath, BudgetCheckQuery

# Routes with path parameters and a query or body: one argument object, from both models.


class GetContextArguments(ContextPath, ContextQuery):
    """get_context: the contact and the level of detail."""


class UpdateHandoffStatusArguments(HandoffPath, HandoffStatusChange):
    """update_handoff_status: the handoff and its new status."""


class BudgetCheckArguments(BudgetCheckPath, BudgetCheckQuery):
    """budget_check: the agent and the tokens the next operation will use."""


class GetBriefingArguments(AgentPath, BriefingQuery):
    """get_briefing: the agent and the format."""


def part(model: type[Any], arguments: BaseModel) -> Any:
    """The arguments that belong to `model` (one of the combined models), as that model."""
    fields = arguments.model_dump(include=set(model.model_fields), exclude_unset=True)
    return model.model_validate(fields)


Call = Callable[[AsyncClient, Any], Awaitable[BaseModel]]


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool: its name, arguments model, result model, description and SDK call."""

    name: str
    arguments: type[BaseModel]
    result: type[BaseModel]
    description: str
    call: Call
    read_only: bool


async def _get_context(c: AsyncClient, a: GetContextArguments) -> BaseModel:
    return await c.get_context(a.contact_id, part(ContextQuery, a))


async def _log_interaction(c: AsyncClient, a: InteractionCreate) -> BaseModel:
    return await c.log_interaction(a)


async def _search_contacts(c: AsyncClient, a: ContactListQuery) -> BaseModel:
    return await c.search_contacts(a)


async def _create_handoff(c: AsyncClient, a: HandoffCreate) -> BaseModel:
    return await c.create_handoff(a)


async def _get_pending_handoffs(c: AsyncClient, a: PendingHandoffsQuery) -> BaseModel:
    return await c.get_pending_handoffs(a)


async def _update_handoff_status(c: AsyncClient, a: UpdateHandoffStatusArguments) -> BaseModel:
    return await c.update_handoff_status(a.id, part(HandoffStatusChange, a))


async def _budget_check(c: AsyncClient, a: BudgetCheckArguments) -> BaseModel:
    return await c.budget_check(a.agent, part(BudgetCheckQuery, a))


async def _remember(c: AsyncClient, a: MemoryCreate) -> BaseModel:
    return await c.remember(a)


async def _search_memories(c: AsyncClient, a: MemorySearch) -> BaseModel:
    return await c.search_memories(a)


async def _get_briefing(c: AsyncClient, a: GetBriefingArguments) -> BaseModel:
    return await c.get_briefing(a.agent, part(BriefingQuery, a))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "get_context", GetContextArguments, WorkingContext,
        "Read what Cortex knows about one contact (a customer or prospect) before you answer them: a "
        "summary, key facts, the recommended tone, open threads and the last handoff. level 0 is a "
        "header only (~50 tokens), 1 a briefing (~200, the default), 2 adds recent interactions "
        "(~500), 3 everything (~2000). Use search_contacts first when you only have a name or email.",
        _get_context, True,
    ),
    ToolSpec(
        "log_interaction", InteractionCreate, InteractionLogged,
        "Record something that happened with a contact (an email sent or received, a ticket opened or "
        "resolved, a call, a note) so that every agent knows it. Pass raw_content (Cortex summarises "
        "it) or your own summary. Give external_id (the email or ticket id) so that logging the same "
        "event twice is harmless. agent defaults to you.",
        _log_interaction, False,
    ),
    ToolSpec(
        "search_contacts", ContactListQuery, ContactList,
        "Find contacts by a fuzzy search on name, email and company (search), or filter by stage, "
        "owner or tag. Returns up to limit contacts (default 20) with their ids, which the other "
        "tools take as contact_id. Page with offset.",
        _search_contacts, True,
    ),
    ToolSpec(
        "create_handoff", HandoffCreate, HandoffCreated,
        "Hand a contact over to another agent (to_agent) or to a human (to_human_id): exactly one of "
        "the two. Say why (reason, and reason_detail in a sentence), what to do next "
        "(suggested_action) and how urgent it is (urgency). Cortex writes the context summary for the "
        "receiver when you give none, and notifies them.",
        _create_handoff, False,
    ),
    ToolSpec(
        "get_pending_handoffs", PendingHandoffsQuery, HandoffList,
        "List handoffs waiting to be picked up, most urgent first, then oldest. Filter by the "
        "receiving agent (agent, usually yourself) or human (human_id), or by urgency.",
        _get_pending_handoffs, True,
    ),
    ToolSpec(
        "update_handoff_status", UpdateHandoffStatusArguments, Handoff,
        "Move a handoff addressed to you: pending -> accepted -> completed, or pending/accepted -> "
        "rejected (say why in note). id is the handoff's id from get_pending_handoffs. A move that "
        "is not allowed is refused with the allowed ones.",
        _update_handoff_status, False,
    ),
    ToolSpec(
        "budget_check", BudgetCheckArguments, BudgetCheck,
        "Before an expensive operation, check whether estimated_tokens fit an agent's daily token "
        "budget (agent: usually yourself). recommendation is proceed, use_haiku (use a smaller model), "
        "defer (wait until tomorrow) or alert_human (over budget).",
        _budget_check, True,
    ),
    ToolSpec(
        "remember", MemoryCreate, MemoryWritten,
        "Store a durable memory that other agents (visibility shared, the default) or only you "
        "(private) will find later: a fact, a decision, a preference, a lesson, a goal... kind says "
        "which; title is one line, body the detail. A duplicate reinforces the existing memory; with a "
        "key (e.g. 'pricing.enterprise') the memory holding that key is replaced. Link it to a contact "
        "with contact_id.",
        _remember, False,
    ),
    ToolSpec(
        "search_memories", MemorySearch, MemorySearchResults,
        "Search the shared memory (and your private memories) by meaning and by words: query is plain "
        "text. Narrow with kinds, tags, contact_id, agent or a time range; anchors ranks by closeness "
        "in the memory graph to those memory ids.",
        _search_memories, True,
    ),
    ToolSpec(
        "get_briefing", GetBriefingArguments, Briefing,
        "Read an agent's briefing (usually your own: agent is your agent name): who you are, the active "
        "context, key relationships, patterns and lessons, goals, unresolved items and recent events, "
        "rendered from the memory graph (markdown, or compact for fewer tokens). Read it at the start "
        "of a session.",
        _get_briefing, True,
    ),
)  # fmt: skip
