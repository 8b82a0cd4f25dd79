"""The `cortex dashboard` commands: end dashboard sessions (operators)."""

from __future__ import annotations

import click

from cortex import db
from cortex.console import current_state, emit


@click.group()
def dashboard() -> None:
    """Dashboard: the live pages at /dashboard (sign in with an admin or monitor key)."""


@dashboard.command("sign-out")
@click.option("--agent", help="Only this agent's sessions.")
def dashboard_sign_out(agent: str | None) -> None:
    """End every dashboard session of --tenant, or of one agent (close_dashboard_sessions).

    Sessions also end by themselves after 8 hours, and at the next request once their agent is
    disabled or no longer an admin or monitor."""
    state = current_state()
    with state.connect() as conn:
        ended = db.call(conn, "cortex.close_dashboard_sessions", p_tenant_id=state.tenant_id(), p_agent=agent)
    emit({"signed_out": ended}, f"ended {ended} dashboard session(s)")
