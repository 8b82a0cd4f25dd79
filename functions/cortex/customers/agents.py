"""Seed 002's two customer agents: their prompts, their tools and the handoff tool.

Each tool is one pydantic model (its arguments, validated before anything runs) and one SQL
function of the customers migration, called as the speaking agent; the Anthropic tool definitions
are generated from the models, so the schema the model sees is the one that is enforced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cortex.customers import models as m

CUSTOMER_MGMT = "customer_mgmt"
PRODUCT_MGMT = "product_mgmt"
AGENTS: tuple[str, ...] = (CUSTOMER_MGMT, PRODUCT_MGMT)
HANDOFF_TOOL = "handoff"
# Seed 002's loop prevention: at most this many handoffs per request; the last agent has no handoff tool.
MAX_HANDOFFS = 2

TOOL_MODELS: dict[str, type[BaseModel]] = {
    "updateCustomerStatus": m.UpdateCustomerStatus,
    "updateCustomerInfo": m.UpdateCustomerInfo,
    "createEventLogEntry": m.CreateEventLogEntry,
    "getCustomerSummary": m.GetCustomerSummary,
    "createProject": m.CreateProject,
    "createArtifact": m.CreateArtifact,
    "updateArtifact": m.UpdateArtifact,
    "listProjects": m.ListProjects,
    "listArtifacts": m.ListArtifacts,
}
AGENT_TOOLS: dict[str, tuple[str, ...]] = {
    CUSTOMER_MGMT: ("updateCustomerStatus", "updateCustomerInfo", "createEventLogEntry", "getCustomerSummary"),
    PRODUCT_MGMT: ("createProject", "createArtifact", "updateArtifact", "listProjects", "listArtifacts"),
}
LABELS = {CUSTOMER_MGMT: "Customer Management Agent", PRODUCT_MGMT: "Product Management Agent"}


def other(agent: str) -> str:
    """The other customer agent."""
    return PRODUCT_MGMT if agent == CUSTOMER_MGMT else CUSTOMER_MGMT


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def tool_definition(name: str) -> dict[str, Any]:
    """The Anthropic tool definition of a domain tool (name, description, input_schema)."""
    model = TOOL_MODELS[name]
    return {"name": name, "description": (model.__doc__ or name).strip(), "input_schema": _schema(model)}


def ping_pong_warning(agent: str, previous: str | None) -> str | None:
    """The warning the handoff tool carries when handing back would bounce the conversation to the
    agent that just handed it over (seed 002's ping-pong detection through previousAgent)."""
    if previous is None or previous != other(agent):
        return None
    return (
        f"WARNING: {LABELS[previous]} ({previous}) just handed this conversation to you. Handing it back "
        "would start a loop: do so only if the request truly needs tools you do not have; otherwise answer it."
    )


def handoff_definition(agent: str, previous: str | None) -> dict[str, Any]:
    """The handoff tool of `agent` (to the other agent), with the ping-pong warning when `previous`
    is the other agent."""
    target = other(agent)
    description = (
        f"Transfer the conversation to the {LABELS[target]} ({target}) when the user's request is outside "
        "your domain. Give the reason, a summary of the conversation and the pending request."
    )
    warning = ping_pong_warning(agent, previous)
    if warning:
        description = f"{description}\n\n{warning}"
    return {"name": HANDOFF_TOOL, "description": description, "input_schema": _schema(m.Handoff)}


def tools_for(agent: str, *, with_handoff: bool, previous: str | None = None) -> list[dict[str, Any]]:
    """The agent's tool definitions; the handoff tool only when another handoff is allowed."""
    tools = [tool_definition(name) for name in AGENT_TOOLS[agent]]
    if with_handoff:
        tools.append(handoff_definition(agent, previous))
    return tools


@dataclass(frozen=True)
class HandoffContext:
    """What the receiving agent is told: who handed over, why, the summary and the pending request."""

    from_agent: str
    reason: str
    summary: str
    pending_request: str


_CUSTOMER_MGMT_PROMPT = """You are the Customer Management Agent for this customer.

Your capabilities:
- Engagement strategy and relationship management
- Negotiation guidance and pricing recommendations
- Status management (changing the customer's lifecycle status with updateCustomerStatus)
- Communication drafting (emails, follow-ups, proposals)
- Account health assessment: proactively surface the health signals below (expiring agreements,
  overdue invoices, inactivity)
- Stakeholder mapping and team dynamics

Your tools: updateCustomerStatus, updateCustomerInfo, createEventLogEntry, getCustomerSummary.
If the user asks to create artifacts, strategies, roadmaps or PRDs, or needs project or artifact
tools, hand off to the Product Management Agent with the handoff tool.

After providing advice, suggest exactly ONE relevant follow-up action (for example: "Want me to draft
a follow-up email?")."""

_PRODUCT_MGMT_PROMPT = """You are the Product Management Agent for this customer.

Your capabilities:
- Product strategy (Playing to Win, April Dunford positioning)
- Roadmap development and feature prioritization
- User research synthesis (interview guides, personas, JTBD)
- Competitive analysis (competitor mapping, feature comparison)
- Product specs (PRDs, feature specs, technical requirements)
- Prioritization frameworks (RICE scoring, opportunity sizing)
- Success measurement (KPIs, AARRR metrics, dashboards)
- Ideation facilitation, launch planning (GTM strategy, rollout plans)
- Reference existing deliverables when creating new artifacts (avoid duplication); assess product
  maturity from the number and diversity of artifacts

Your tools: createProject, createArtifact, updateArtifact, listProjects, listArtifacts.
If the user asks to update the customer's status, log events or manage agreements, or needs
customer relationship or financial tools, hand off to the Customer Management Agent with the
handoff tool.

After creating or discussing artifacts, suggest exactly ONE relevant next step."""

PROMPTS = {CUSTOMER_MGMT: _CUSTOMER_MGMT_PROMPT, PRODUCT_MGMT: _PRODUCT_MGMT_PROMPT}


def system_prompt(
    agent: str, customer_id: str, context: str, handoff: HandoffContext | None = None, *, final: bool = False
) -> str:
    """The agent's system prompt: its role, the customer context (build_customer_context), the
    handoff context when it takes over, and on the last iteration the instruction to answer."""
    parts = [PROMPTS[agent], f"The customer's id is {customer_id}.", context]
    if handoff is not None:
        parts.append(
            "## Handoff\n"
            f"The {LABELS.get(handoff.from_agent, handoff.from_agent)} ({handoff.from_agent}) handed this "
            f"conversation to you.\n- Reason: {handoff.reason}\n- Summary: {handoff.summary}\n"
            f"- Pending request: {handoff.pending_request}\nAnswer the pending request now."
        )
    if final:
        parts.append("No further handoff is possible in this response: answer the user yourself.")
    return "\n\n".join(parts)


def handoff_output(agent: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The handoff tool's output, as the seed writes it ({__handoff: true, targetAgent, ...})."""
    return {
        "__handoff": True,
        "targetAgent": other(agent),
        "reason": args.get("reason"),
        "summary": args.get("summary"),
        "pendingRequest": args.get("pendingRequest"),
    }
