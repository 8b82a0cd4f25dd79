"""The `cortex briefing AGENT` command (read a briefing) and `cortex briefings settings ...` (operators)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click

from cortex.briefings import service
from cortex.console import current_state, emit, key_values


@click.command("briefing")
@click.argument("agent", required=False)
@click.option("--format", "fmt", type=click.Choice(["markdown", "compact"]), default="markdown", show_default=True)
@click.option("--max-chars", type=int, help="Character budget, 500..8000 (default: the agent's settings).")
def briefing(agent: str | None, fmt: str, max_chars: int | None) -> None:
    """Print AGENT's briefing (default: the agent this command acts as) (get_briefing)."""
    result = service.get_briefing(current_state().claims(), agent, format=fmt, max_chars=max_chars)
    emit(result, lambda: click.echo(result["text"], nl=False))


@click.group()
def briefings() -> None:
    """Briefings: operators' settings (read one with `cortex briefing AGENT`)."""


@briefings.group("settings")
def briefings_settings() -> None:
    """The tenant's briefing settings and per-agent overrides."""


def _text(settings: Mapping[str, Any]) -> str:
    return "\n".join(f"{k:<23} {v}" for k, v in settings.items() if k not in ("updated_at",))


@briefings_settings.command("show")
@click.option("--agent", help="One agent's effective settings (default: the tenant's).")
def briefings_settings_show(agent: str | None) -> None:
    """Show the effective briefing settings of the tenant or of one agent."""
    state = current_state()
    with state.connect() as conn:
        settings = service.settings(conn, state.tenant_id(), agent)
    emit(settings, lambda: click.echo(_text(settings)))


@briefings_settings.command("set")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--agent", help="Override for this agent only (KEY:=null clears an override).")
def briefings_settings_set(pairs: tuple[str, ...], agent: str | None) -> None:
    """Set briefing settings, e.g. `max_chars=6000 precompute:=true` (cortex.set_briefing_settings)."""
    state = current_state()
    values = key_values(pairs, "KEY=VALUE")
    with state.connect() as conn:
        result = service.set_settings(conn, state.tenant_id(), values, agent)
    emit(result, lambda: click.echo(_text(result["effective"])))
