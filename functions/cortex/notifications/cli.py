"""The `cortex` commands of notifications."""

from __future__ import annotations

import click

from cortex.console import current_state, emit, table, when

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
