"""The `cortex` commands of alerts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from cortex.alerts import service as alerts_svc
from cortex.console import current_state, emit, table, when

_ALERT_COLUMNS = (("id", "id"), ("severity", "severity"), ("kind", "kind"), ("status", "status"),
                  ("created_at", "raised"), ("message", "message"))  # fmt: skip


def _alert_text(a: Mapping[str, Any]) -> str:
    lines = [f"alert {a['id']} [{a['severity']}] {a['kind']}: {a['status']}", f"  {a['message']}"]
    if a.get("acknowledged_at"):
        lines.append(f"  acknowledged {when(a['acknowledged_at'])} by {a.get('acknowledged_by')}"
                     + (f": {a['ack_note']}" if a.get("ack_note") else ""))  # fmt: skip
    return "\n".join(lines)


@click.group()
def alerts() -> None:
    """Alerts for people: parked jobs, webhook dead letters, budget refusals (list, ack)."""


@alerts.command("list")
@click.option("--status", type=click.Choice(["open", "acknowledged", "all"]), default="open", show_default=True)
@click.option("--kind", help="Only this kind: job_parked, webhook_dead_letter, budget_exceeded, ...")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
def alerts_list(status: str, kind: str | None, limit: int) -> None:
    """The tenant's alerts, newest first (list_alerts)."""
    result = alerts_svc.list_alerts(
        current_state().claims(), status=None if status == "all" else status, kind=kind, limit=limit
    )

    def human() -> None:
        if result["items"]:
            rows = [{**a, "created_at": when(a["created_at"])} for a in result["items"]]
            click.echo(table(rows, _ALERT_COLUMNS, width=72))
        else:
            click.echo(f"no {'' if status == 'all' else status + ' '}alerts")
        click.echo(f"{result['open']} open")

    emit(result, human)


@alerts.command("ack")
@click.argument("alert_id", type=click.IntRange(min=1))
@click.option("--note", help="What was done, or why it can wait.")
def alerts_ack(alert_id: int, note: str | None) -> None:
    """Acknowledge an alert, as --agent (a monitor or admin; the default, system, is the admin) (ack_alert)."""
    result = alerts_svc.ack_alert(current_state().claims(), alert_id, note)
    emit(result, _alert_text(result))
