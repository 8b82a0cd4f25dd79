"""Handoffs: the briefing is written here (Claude Haiku, or the local generator offline); the
rest (validation, the handoff row, the owner change, context refresh, notifications, the status
machine and its audit trail) lives in SQL, so PostgREST callers get the same rules.

create_handoff validates and reads the material in one short transaction, calls the model with
no connection held, then writes everything in a second transaction. Bad input is refused before
any model call, and a failed model call never fails the handoff: SQL assembles a plainer
briefing from the working context and recent interactions instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from cortex import db, llm
from cortex.llm import prompts
from cortex.usage import budget

Claims = Mapping[str, Any]

# Optional request fields that cortex.check_handoff_request also checks (named p_<field>).
_CHECKED_OPTIONAL = ("reason_detail", "context_summary", "suggested_action", "metadata", "usage", "from_agent")
_JSON_FIELDS = ("metadata", "usage")


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def create_handoff(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Hands a contact from the calling agent to `to_agent` or `to_human_id`.

    Without a `context_summary` the briefing is generated from the contact's working context
    and recent interactions (also `suggested_action`, when not given), and the model call is
    recorded in token_usage with the handoff. Returns the seed's response: {id, contact_id,
    context_summary, status, notifications_sent, context_refreshed, ...}. Raises CortexError
    (4xx naming the field) for bad input, with nothing written and no model called.
    """
    # The jsonb arguments go as JSON whatever their shape, so SQL can name a wrong one.
    fields = {
        k: db.Jsonb(v) if k in _JSON_FIELDS and v is not None and not isinstance(v, db.Jsonb) else v
        for k, v in fields.items()
    }
    if not _blank(fields.get("context_summary")):
        with db.as_caller(claims) as conn:
            given: dict[str, Any] = db.call(conn, "create_handoff", **fields)
        return given
    fields = {k: v for k, v in fields.items() if k != "context_summary"}
    fields, plan, usage = _with_generated_summary(claims, fields)
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "create_handoff", **fields)
        if plan is not None:
            budget.settle(conn, plan, usage, contact_id=str(fields["contact_id"]))
    return result


def _with_generated_summary(
    claims: Claims, fields: dict[str, Any]
) -> tuple[dict[str, Any], budget.Plan | None, llm.Usage | dict[str, Any] | None]:
    """The fields plus a generated briefing and its usage, with the budget's plan and the usage
    to settle it with; the fields unchanged when the model fails (SQL then assembles its
    fallback briefing). The request is checked before the model is asked."""
    tenant_id = str(claims.get("tenant_id"))
    with db.as_caller(claims) as conn:
        from_agent: str = db.call(
            conn,
            "cortex.check_handoff_request",
            p_contact_id=fields.get("contact_id"),
            # Required parameters that may be null: sent as typed nulls rather than omitted.
            p_to_agent=db.typed(fields.get("to_agent"), "text"),
            p_to_human_id=db.typed(fields.get("to_human_id"), "text"),
            p_reason=db.typed(fields.get("reason"), "text"),
            p_urgency=db.typed(fields.get("urgency"), "text"),
            **{f"p_{name}": fields.get(name) for name in _CHECKED_OPTIONAL},
        )
        material = db.call(conn, "cortex.context_material", p_tenant_id=tenant_id, p_contact_id=fields["contact_id"])
        to_party = fields.get("to_agent") or fields.get("to_human_id")
        prompt = prompts.handoff_prompt(from_agent, to_party, fields["reason"], fields.get("reason_detail"), material)
        # A briefing cannot wait for the budget to reset: defer becomes the cheaper model.
        plan = budget.reserve(
            conn,
            tenant_id,
            from_agent,
            "handoff_summary",
            budget.estimate(prompt),
            contact_id=str(fields["contact_id"]),
        )
    try:
        briefing, usage = llm.generate_handoff_summary(
            from_agent, to_party, fields["reason"], fields.get("reason_detail"), material, **plan.llm_args()
        )
    except llm.LLMError as exc:
        return fields, plan, budget.failed_usage(plan, exc)
    extra: dict[str, Any] = {
        "context_summary": briefing.context_summary,
        "usage": db.Jsonb({**asdict(usage), "operation": "handoff_summary"}),
    }
    if _blank(fields.get("suggested_action")) and briefing.suggested_action:
        extra["suggested_action"] = briefing.suggested_action
    if plan.local:
        # Over budget: the local generator wrote the briefing; the handoff says so.
        metadata = fields.get("metadata")
        base = metadata.obj if isinstance(metadata, db.Jsonb) else metadata
        if base is None or isinstance(base, dict):
            extra["metadata"] = db.Jsonb({**(base or {}), "briefing": {"model": usage.model, "generated_by": "local",
                                                                      "reason": "budget"}})  # fmt: skip
    return {**fields, **extra}, plan, usage


def get_handoff(claims: Claims, handoff_id: str) -> dict[str, Any]:
    """One handoff with its contact, allowed next moves and audit history; 404 when unknown."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_handoff", handoff_id=handoff_id)
    return result


def get_pending_handoffs(claims: Claims, **filters: Any) -> dict[str, Any]:
    """Pending handoffs (filters: agent, human_id, urgency, limit), most urgent then oldest first;
    {items, limit}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_pending_handoffs", **filters)
    return result


def list_handoffs(claims: Claims, **filters: Any) -> dict[str, Any]:
    """Handoffs changed since a time (filters: since, status, contact_id, limit), newest first;
    {items, limit}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "list_handoffs", **filters)
    return result


def update_handoff_status(claims: Claims, handoff_id: str, status: str, note: str | None = None) -> dict[str, Any]:
    """Moves a handoff to accepted, completed or rejected; CortexError 409 (with the allowed
    moves) for any other move, 404 when unknown."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "update_handoff_status", handoff_id=handoff_id, status=status, note=note)
    return result
