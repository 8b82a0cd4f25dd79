"""The `cortex` commands of notifications."""

from __future__ import annotations

import uuid

import click

from cortex.console import current_state, emit, table, when
from cortex.notifications import service as notifications_svc

# --- outbox (webhook dead letters) -------------------------------------------------------------


@click.group()
def notifications() -> None:
    """Notifications: the webhook outbox's dead letters (list, replay)."""


_DEAD_COLUMNS = (("id", "id"), ("event", "event"), ("recipient", "recipient"), ("attempts", "tries"),
                 ("last_status_code", "http"), ("last_error", "last error"), ("updated_at", "dead since"))  # fmt: skip


@notifications.command("dead")
@click.option("--limit", type=click.IntRange(1, 10000), default=100, show_default=True, help="At most this many.")
@click.option("--all-tenants", is_flag=True, help="Every tenant's dead letters, not only --tenant's.")
def notifications_dead(limit: int, all_tenants: bool) -> None:
    """List dead-lettered webhook messages, oldest first, with their last error."""
    from cortex.notifications import delivery

    state = current_state()
    tenant_id = None if all_tenants else state.tenant_id()
    with state.connect() as conn:
        rows = delivery.list_dead_letters(conn, tenant_id=tenant_id, limit=limit)

    def human() -> None:
        if not rows:
            click.echo("no dead letters")
            return
        click.echo(table([{**r, "updated_at": when(r["updated_at"])} for r in rows], _DEAD_COLUMNS))

    emit(rows, human)


@notifications.command("replay")
@click.argument("ids", nargs=-1, type=click.IntRange(min=1))
@click.option("--all", "all_dead", is_flag=True, help="Replay every dead letter of --tenant.")
@click.option("--all-tenants", is_flag=True, help="Do not limit to --tenant (with --all: every tenant's).")
def notifications_replay(ids: tuple[int, ...], all_dead: bool, all_tenants: bool) -> None:
    """Queue dead letters again with a fresh set of attempts: the given IDs, or --all."""
    from cortex.notifications import delivery

    if bool(ids) == all_dead:
        raise click.UsageError("give the IDs of the dead letters to replay, or --all (not both)")
    state = current_state()
    tenant_id = None if all_tenants else state.tenant_id()
    with state.connect() as conn:
        n = delivery.replay_dead_letters(conn, list(ids) or None, tenant_id=tenant_id, all_dead=all_dead)
    emit({"replayed": n}, f"replayed {n} dead letter(s); the worker delivers them again now")


# --- webhook endpoints (admins) ------------------------------------------------------------------

_WEBHOOK_COLUMNS = (("id", "id"), ("recipient", "recipient"), ("url", "url"), ("enabled", "enabled"),
                    ("created_at", "created"))  # fmt: skip


@click.group()
def webhooks() -> None:
    """Webhook endpoints: where each recipient's notifications go (add, list, remove; admins)."""


@webhooks.command("add")
@click.argument("recipient")
@click.argument("url")
@click.option("--secret", help="Signing secret (16-200 characters); generated when absent.")
@click.option("--disabled", is_flag=True, help="Add it disabled: its recipient's messages are skipped.")
def webhooks_add(recipient: str, url: str, secret: str | None, disabled: bool) -> None:
    """Send RECIPIENT's notifications (agent:NAME, human:ID, monitor or admin) to URL (add_webhook).

    The signing secret is printed once; it cannot be shown again."""
    result = notifications_svc.add_webhook(
        current_state().claims(), recipient=recipient, url=url, secret=secret, enabled=not disabled
    )
    emit(result, f"webhook {result['id']}: {result['recipient']} -> {result['url']}"
                 f"{'' if result['enabled'] else ' (disabled)'}\n"
                 f"signing secret (shown once): {result['secret']}")  # fmt: skip


@webhooks.command("list")
@click.option("--recipient", help="Only this recipient's endpoint.")
def webhooks_list(recipient: str | None) -> None:
    """The tenant's webhook endpoints, by recipient; secrets are never listed (list_webhooks)."""
    result = notifications_svc.list_webhooks(current_state().claims(), recipient)
    items = [{**w, "created_at": when(w["created_at"])} for w in result["items"]]
    emit(result, table(items, _WEBHOOK_COLUMNS, width=80) if items else "no webhook endpoints")


@webhooks.command("remove")
@click.argument("webhook_id", type=click.UUID)
def webhooks_remove(webhook_id: uuid.UUID) -> None:
    """Remove a webhook endpoint by its id (remove_webhook)."""
    result = notifications_svc.remove_webhook(current_state().claims(), str(webhook_id))
    emit(result, f"removed webhook {result['id']} of {result['recipient']}")
