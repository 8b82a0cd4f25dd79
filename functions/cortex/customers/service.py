"""Customers' operations: the context, the tools (each one SQL function, run as the speaking
agent, so RLS and the writer rules apply), the chat's start and its recorded handoffs, and the
budget of every model turn (reserved before, settled after, as all model work in Cortex)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from cortex import db
from cortex.config import get_settings
from cortex.customers import agents
from cortex.customers import models as m
from cortex.errors import CortexError
from cortex.usage import budget

OPERATION = "customer_chat"


def estimate(text: str) -> int:
    """Tokens as everywhere in Cortex: ceil(chars / 4)."""
    return math.ceil(len(text) / 4) if text else 0


# --- the context ----------------------------------------------------------------------------------


def build_context(claims: Mapping[str, Any], customer_id: str, max_tokens: int = 3000) -> str:
    """public.build_customer_context (synchronous: the CLI)."""
    return str(db.call_as(claims, "build_customer_context", customer_id=customer_id, max_tokens=max_tokens))


async def abuild_context(claims: Mapping[str, Any], customer_id: str, max_tokens: int = 3000) -> str:
    """public.build_customer_context on the async pool."""
    return str(await db.acall_as(claims, "build_customer_context", customer_id=customer_id, max_tokens=max_tokens))


@dataclass(frozen=True)
class ChatStart:
    """What public.start_customer_chat answered: the tenant, the customer and its context."""

    tenant_id: str
    customer_id: str
    name: str
    context: str

    def claims(self, agent: str) -> dict[str, str]:
        """The claims the speaking agent's tools and budget run with."""
        return db.agent_claims(self.tenant_id, agent)


async def start_chat(claims: Mapping[str, Any], customer_id: str) -> ChatStart:
    """public.start_customer_chat: 403 unless a customer agent (or admin) asks, 404 for an unknown
    customer, 409 when the two customer agents are not registered."""
    found = await db.acall_as(claims, "start_customer_chat", customer_id=customer_id)
    return ChatStart(str(found["tenant_id"]), str(found["customer_id"]), str(found["name"]), str(found["context"]))


# --- the tools ------------------------------------------------------------------------------------


class ToolError(Exception):
    """A tool call that cannot run: answered to the model as a tool error (never a 500)."""


def _first_error(exc: ValidationError) -> str:
    parts = []
    for e in exc.errors(include_url=False, include_input=False, include_context=False)[:5]:
        where = ".".join(str(p) for p in e["loc"]) or "input"
        parts.append(f"{where}: {e['msg']}")
    return "invalid arguments: " + "; ".join(parts)


def parse_args(name: str, raw: Any, allowed: tuple[str, ...]) -> BaseModel:
    """The tool's arguments validated against its model, or ToolError saying what is wrong."""
    if name not in allowed:
        raise ToolError(f"unknown tool {name!r}; available: {', '.join(allowed)}")
    model = m.Handoff if name == agents.HANDOFF_TOOL else agents.TOOL_MODELS[name]
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except ValueError:
            raise ToolError("invalid arguments: the input is not valid JSON") from None
    if not isinstance(raw, dict):
        raise ToolError("invalid arguments: the input must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise ToolError(_first_error(exc)) from None


def _sql_call(name: str, args: BaseModel, customer_id: str) -> tuple[str, dict[str, Any]]:
    """The SQL function and arguments of one tool call."""
    cid = str(getattr(args, "customerId", None) or customer_id)
    if isinstance(args, m.UpdateCustomerStatus):
        return "update_customer_status", {"customer_id": cid, "new_status": args.newStatus, "reason": args.reason}
    if isinstance(args, m.UpdateCustomerInfo):
        return "merge_customer_info", {"cid": cid, "new_info": args.info}
    if isinstance(args, m.CreateEventLogEntry):
        return "log_customer_event", {"customer_id": cid, "event_type": args.eventType, "description": args.description}
    if isinstance(args, m.GetCustomerSummary):
        return "build_customer_context", {"customer_id": cid}
    if isinstance(args, m.CreateProject):
        return "create_customer_project", {
            "customer_id": cid, "name": args.name, "description": args.description, "status": args.status,
        }  # fmt: skip
    if isinstance(args, m.CreateArtifact):
        return "create_customer_artifact", {
            "project_id": str(args.projectId), "title": args.title, "type": args.type, "content": args.content,
            "status": args.status,
        }  # fmt: skip
    if isinstance(args, m.UpdateArtifact):
        return "update_customer_artifact", {
            "artifact_id": str(args.artifactId), "content": args.content, "title": args.title, "status": args.status,
        }  # fmt: skip
    if isinstance(args, m.ListProjects):
        return "list_customer_projects", {"customer_id": cid}
    if isinstance(args, m.ListArtifacts):
        project = str(args.projectId) if args.projectId else None
        return "list_customer_artifacts", {"project_id": project, "customer_id": None if project else cid}
    raise ToolError(f"no SQL function for {name}")


async def run_tool(claims: Mapping[str, Any], name: str, args: BaseModel, customer_id: str) -> Any:
    """Runs one validated tool call as the speaking agent; ToolError with the database's message
    when SQL refuses (an unknown or other tenant's customer, a bad value)."""
    function, sql_args = _sql_call(name, args, customer_id)
    try:
        result = await db.acall_as(claims, function, **sql_args)
    except CortexError as exc:
        raise ToolError(exc.message + (f" (field {exc.field})" if exc.field else "")) from None
    if function == "build_customer_context":
        return {"summary": result}
    return result


async def record_handoff(claims: Mapping[str, Any], customer_id: str, to_agent: str, args: m.Handoff) -> dict[str, Any]:
    """public.record_customer_handoff as the handing agent: a Cortex handoff, completed at once."""
    result: dict[str, Any] = await db.acall_as(
        claims, "record_customer_handoff", customer_id=customer_id, to_agent=to_agent, reason=args.reason,
        summary=args.summary, pending_request=args.pendingRequest,
    )  # fmt: skip
    return result


# --- the budget -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnPlan:
    """What the budget decided for one model turn: the model to ask, or the local agent."""

    tenant_id: str
    reservation_id: str | None
    action: str
    model: str | None
    max_tokens: int

    @property
    def local(self) -> bool:
        """Over budget, or no key: the deterministic local agent answers this turn."""
        return self.model is None


async def reserve_turn(claims: Mapping[str, Any], tenant_id: str, agent: str, prompt_tokens: int) -> TurnPlan:
    """cortex.reserve_tokens for one turn of `agent`, as that agent (its own daily budget)."""
    settings = get_settings()
    answer: dict[str, Any] = await db.acall_as(
        claims, "cortex.reserve_tokens", p_tenant_id=tenant_id, p_agent=agent, p_operation=OPERATION,
        p_input_tokens=prompt_tokens, p_complex=True,
    )  # fmt: skip
    action = str(answer["action"])
    model = None
    if settings.use_remote_llm and action in ("proceed", "use_haiku"):
        model = budget.resolve_model(answer.get("model"), complex_work=action == "proceed", settings=settings)
    # The agent's own output cap, as reserved (raise max_output_tokens in agent_config for long artifacts).
    return TurnPlan(tenant_id, answer.get("reservation_id"), action, model, int(answer["max_output_tokens"]))


async def settle_turn(
    claims: Mapping[str, Any],
    plan: TurnPlan,
    model: str,
    input_tokens: int,
    output_tokens: int,
    error: str | None = None,
) -> None:
    """cortex.settle_reservation with what the turn used (recorded in token_usage)."""
    if plan.reservation_id is None:
        return
    usage = {"model": model, "operation": OPERATION, "input_tokens": input_tokens, "output_tokens": output_tokens}
    if error:
        usage["error"] = error[:500]
    await db.acall_as(claims, "cortex.settle_reservation", p_tenant_id=plan.tenant_id,
                      p_reservation_id=plan.reservation_id, p_usage=usage)  # fmt: skip
