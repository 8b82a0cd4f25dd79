"""The `cortex` command line: operators run Cortex and act on a tenant as one of its agents.

Tenant and agent are resolved once (as the database owner); every data command then goes through
the same SQL functions as the HTTP API, with the claims of that agent, so every rule of the SQL
functions (validation, read-only agents, RLS) applies to operators too. Each capability brings its
own command group; this module mounts them.

Exit codes: 0 ok, 1 error (the database or Cortex said no), 2 bad arguments.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import click

from cortex import db
from cortex.alerts.cli import alerts
from cortex.briefings.cli import briefing, briefings
from cortex.config import get_settings
from cortex.console import FUNCTIONS_DIR, CortexGroup, State, current_state, emit
from cortex.consolidation.cli import consolidate
from cortex.contacts.cli import contacts
from cortex.context.cli import context
from cortex.customers.cli import customers
from cortex.dashboard.cli import dashboard
from cortex.demo import DEFAULT_KEYS_FILE, load_demo, use_database
from cortex.graph.cli import graph
from cortex.handoffs.cli import handoffs
from cortex.ingest.cli import ingest
from cortex.interactions.cli import import_interactions, interactions
from cortex.mcp_server.cli import mcp
from cortex.memories.cli import memories
from cortex.migrate import migrate as run_migrations
from cortex.notifications.cli import notifications, webhooks
from cortex.queue.cli import queue
from cortex.tenancy.cli import agents, keys, tenants
from cortex.usage.cli import usage
from cortex.voice.cli import voice


@click.group(cls=CortexGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Machine output: JSON on stdout.")
@click.option("--tenant", envvar="CORTEX_TENANT", help="Tenant slug or UUID (default: the only tenant).")
@click.option(
    "--agent",
    envvar="CORTEX_AGENT",
    default="system",
    show_default=True,
    help="The agent to act as (its rules apply, e.g. read-only).",
)
@click.option("--database-url", envvar="DATABASE_URL", help="PostgreSQL URL (default: settings).")
@click.pass_context
def main(ctx: click.Context, as_json: bool, tenant: str | None, agent: str, database_url: str | None) -> None:
    """Cortex: shared memory for teams of AI agents."""
    url = database_url or get_settings().database_url
    use_database(url)
    ctx.obj = State(as_json, tenant, agent, url)
    # A command line is one short process: give the pool back before exit.
    ctx.call_on_close(db.close_pool)


# --- running Cortex ------------------------------------------------------------------------------


@main.command()
@click.option("--host", envvar="CORTEX_HOST", default="127.0.0.1", show_default=True)
@click.option("--port", envvar="CORTEX_PORT", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--workers", type=click.IntRange(1, 64), help="Server processes (default: WORKERS or one per core).")
def serve(host: str, port: int, workers: int | None) -> None:
    """Serve the HTTP API (functions-framework's ASGI app, uvicorn workers, Cortex's edge limits)."""
    from cortex import server

    # The server processes inherit DATABASE_URL, which the main group has set from --database-url.
    os.environ["DATABASE_URL"] = current_state().database_url
    server.serve(str(FUNCTIONS_DIR / "main.py"), host, port, workers)


@main.command()
def migrate() -> None:
    """Apply pending migrations (and the local Supabase platform stand-in)."""
    done = run_migrations(current_state().database_url)
    emit(
        {"applied": done},
        f"applied {len(done)} migration(s): {', '.join(done)}" if done else "database is up to date",
    )


@main.command()
@click.option("--reset", is_flag=True, help="Delete the demo tenant first and load it afresh.")
@click.option(
    "--keys-file",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="CORTEX_DEMO_KEYS_FILE",
    default=DEFAULT_KEYS_FILE,
    show_default=True,
    help="Where the demo agents' keys are kept.",
)
def demo(reset: bool, keys_file: Path) -> None:
    """Load the Top Cup demo data set (idempotent)."""
    info = load_demo(current_state().database_url, reset=reset, keys_file=keys_file)

    def human() -> None:
        verb = "loaded" if info.loaded else "already loaded"
        click.echo(
            f"demo tenant top-cup ({info.tenant_id}) {verb}: {info.contacts} contacts, "
            f"{info.interactions} interactions, {info.queued_jobs} job(s) queued for the worker"
        )
        for agent, key in info.keys.items():
            click.echo(f"  {agent:<7} {key}")
        click.echo(f"keys kept in {keys_file}")

    emit(asdict(info), human)


# The mounted capabilities: a new one is one line here.
for group in (
    tenants,
    agents,
    keys,
    contacts,
    interactions,
    context,
    handoffs,
    usage,
    notifications,
    queue,
    memories,
    graph,
    briefings,
    voice,
    consolidate,
    dashboard,
    customers,
):
    main.add_command(group)
main.add_command(webhooks)  # notifications' endpoints, a group of their own
main.add_command(alerts)
main.add_command(briefing)  # `cortex briefing AGENT`: read a briefing, a root-level command
main.add_command(ingest)  # `cortex ingest PATH...`: files into memories, a root-level command
main.add_command(import_interactions)  # `cortex import FILE`: the interactions' backfill, a root-level command
main.add_command(mcp)  # `cortex mcp`: the MCP server, a root-level command


if __name__ == "__main__":  # pragma: no cover
    main()
