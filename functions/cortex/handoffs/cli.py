"""The `cortex` commands of handoffs."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import click

from cortex.console import current_state, dump, emit, table, timestamp, when

# --- handoffs ------------------------------------------------------------------------------------

_HANDOFF_COLUMNS = (("id", "id"), ("urgency", "urgency"), ("status", "status"), ("from_agent", "from"),
                    ("to", "to"), ("reason", "reason"), ("created_at", "created"))  # fmt: skip


def _handoff_rows(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**h, "to": h.get("to_agent") or f"human:{h.get('to_human_id')}",
             "created_at": when(h.get("created_at"))} for h in items]  # fmt: skip


@click.group()
def handoffs() -> None:
    """Handoffs between agents and to humans: create, queue, list, status."""


@handoffs.command("create")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option("--to-agent", help="The receiving agent (or --to-human-id).")
@click.option("--to-human-id", help="The receiving human (or --to-agent).")
@click.option("--reason", required=True, help="warm_reply, escalation, complex_question, upsell_opportunity, "
              "churn_risk, completed_sequence, customer_request or other.")  # fmt: skip
@click.option("--reason-detail")
@click.option("--context-summary", help="What the receiver needs to know (generated when absent).")
@click.option("--suggested-action")
@click.option("--urgency", default="normal", show_default=True, help="low, normal, high or urgent.")
def handoffs_create(contact_id: uuid.UUID, to_agent: str | None, to_human_id: str | None, reason: str,
                    reason_detail: str | None, context_summary: str | None, suggested_action: str | None,
                    urgency: str) -> None:  # fmt: skip
    """Hand a contact from --agent to another agent or a human (create_handoff)."""
    from cortex.handoffs import service as handoffs_svc

    result = handoffs_svc.create_handoff(
        current_state().claims(), contact_id=str(contact_id), to_agent=to_agent, to_human_id=to_human_id, reason=reason,
        reason_detail=reason_detail, context_summary=context_summary, suggested_action=suggested_action,
        urgency=urgency)  # fmt: skip
    emit(result, f"handoff {result['id']} {result['status']}; notified {', '.join(result['notifications_sent'])}\n"
                 f"{result['context_summary']}")  # fmt: skip


@handoffs.command("pending")
@click.option("--for-agent", "agent", help="Only handoffs to this agent.")
@click.option("--human-id", help="Only handoffs to this human.")
@click.option("--urgency")
@click.option("--limit", type=int, default=20, show_default=True)
def handoffs_pending(agent: str | None, human_id: str | None, urgency: str | None, limit: int) -> None:
    """Pending handoffs, most urgent first, then oldest (get_pending_handoffs)."""
    from cortex.handoffs import service as handoffs_svc

    result = handoffs_svc.get_pending_handoffs(current_state().claims(), agent=agent, human_id=human_id,
                                               urgency=urgency, limit=limit)  # fmt: skip
    emit(result, table(_handoff_rows(result["items"]), _HANDOFF_COLUMNS) if result["items"] else "no pending handoffs")


@handoffs.command("list")
@click.option("--since", help="ISO timestamp: created or changed since then.")
@click.option("--status")
@click.option("--contact-id", type=click.UUID)
@click.option("--limit", type=int, default=20, show_default=True)
def handoffs_list(since: str | None, status: str | None, contact_id: uuid.UUID | None, limit: int) -> None:
    """Handoffs by time, status or contact: the stand-up view (list_handoffs)."""
    from cortex.handoffs import service as handoffs_svc

    result = handoffs_svc.list_handoffs(current_state().claims(), since=timestamp(since), status=status,
                                        contact_id=str(contact_id) if contact_id else None, limit=limit)  # fmt: skip
    emit(result, table(_handoff_rows(result["items"]), _HANDOFF_COLUMNS) if result["items"] else "no handoffs")


@handoffs.command("get")
@click.argument("handoff_id", type=click.UUID)
def handoffs_get(handoff_id: uuid.UUID) -> None:
    """One handoff with its allowed moves and audit trail (get_handoff)."""
    from cortex.handoffs import service as handoffs_svc

    result = handoffs_svc.get_handoff(current_state().claims(), str(handoff_id))
    emit(result, dump(result))


@handoffs.command("update")
@click.argument("handoff_id", type=click.UUID)
@click.option("--status", required=True, help="accepted, completed or rejected.")
@click.option("--note")
def handoffs_update(handoff_id: uuid.UUID, status: str, note: str | None) -> None:
    """Move a handoff: pending → accepted → completed, or pending/accepted → rejected (update_handoff_status)."""
    from cortex.handoffs import service as handoffs_svc

    result = handoffs_svc.update_handoff_status(current_state().claims(), str(handoff_id), status, note)
    emit(result, f"handoff {result['id']} is {result['status']}")
