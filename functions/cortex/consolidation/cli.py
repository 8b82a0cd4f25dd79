"""`cortex consolidate`: seed 003's command line (run, status, process) plus items and undo.

    cortex consolidate [--dry-run] [--json] [--rate-limit N] [-v] run --all | run AGENT
    cortex consolidate status [AGENT] [--json]
    cortex consolidate process ITEM_ID
    cortex consolidate items [--agent A] [--status S] [--urgency U]
    cortex consolidate undo ITEM_ID [--reason TEXT]

Exit codes: 0 ok, 1 error (or an item failed in a run), 2 bad arguments. The commands act as
--agent (default system, the tenant's admin) of --tenant.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import click

from cortex.console import current_state, dump, emit, table
from cortex.consolidation import service
from cortex.consolidation.models import AGENTS


def _options() -> dict[str, Any]:
    ctx = click.get_current_context()
    found: dict[str, Any] = ctx.find_root().meta.get("consolidate", {})
    return found


@click.group("consolidate")
@click.option("--dry-run", is_flag=True, help="Preview without making changes (nothing is written).")
@click.option("--json", "as_json", is_flag=True, help="Output JSON instead of human-readable text.")
@click.option("--rate-limit", type=click.IntRange(1, 100_000), default=100, show_default=True,
              help="Max operations per minute.")  # fmt: skip
@click.option("-v", "--verbose", is_flag=True, help="Verbose logging.")
@click.pass_context
def consolidate(ctx: click.Context, dry_run: bool, as_json: bool, rate_limit: int, verbose: bool) -> None:
    """Consolidation agents over the memory graph (seed 003): decay, cluster, merge, promote, relations."""
    ctx.find_root().meta["consolidate"] = {"dry_run": dry_run, "rate_limit": rate_limit}
    if as_json:
        current_state().as_json = True
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
        logging.getLogger("cortex").setLevel(logging.INFO)


@consolidate.command("run")
@click.argument("agent", required=False, type=click.Choice(list(AGENTS)))
@click.option("--all", "run_all", is_flag=True,
              help="All agents in pipeline order (decay, cluster, merge, promote, relations).")  # fmt: skip
@click.option("--wait", "wait_seconds", type=click.FloatRange(0, 3600), default=0, show_default=True,
              help="Wait up to this many seconds for a run in progress instead of refusing.")  # fmt: skip
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True,
              help="At most this many candidates per agent.")  # fmt: skip
def run(agent: str | None, run_all: bool, wait_seconds: float, limit: int) -> None:
    """Run one agent, or --all of them."""
    if run_all == (agent is not None):
        raise click.UsageError("give an AGENT or --all (not both)")
    state, opts = current_state(), _options()
    names = list(AGENTS) if run_all else [str(agent)]
    report = service.run_agents(state.claims(), names, dry_run=opts["dry_run"], rate_limit=opts["rate_limit"],
                                wait_seconds=wait_seconds, limit=limit)  # fmt: skip

    def human() -> None:
        """One line per agent, then its failures on stderr."""
        prefix = "dry run: " if report["dry_run"] else f"run {report['run_id']}: "
        for name, a in report["agents"].items():
            click.echo(f"{prefix}{name:<9} scanned {a['scanned']:>5}  processed {a['processed']:>5}  "
                       f"failed {a['failed']:>3}  ({a['seconds']} s)")  # fmt: skip
            for f in a["failures"][:20]:
                click.echo(f"  failed {f['id']}: {f['error']}", err=True)

    emit(report, human)
    if any(a["failed"] for a in report["agents"].values()):
        click.get_current_context().exit(1)


@consolidate.command("status")
@click.argument("agent", required=False, type=click.Choice(list(AGENTS)))
@click.option("--json", "as_json", is_flag=True, help="Output JSON.")
def status(agent: str | None, as_json: bool) -> None:
    """Pending, in-progress and blocked items per agent, and the rate limit left this minute."""
    state = current_state()
    result = service.status(state.claims(), agent, _options()["rate_limit"])
    if as_json:
        click.echo(dump(result))
        return

    def human() -> None:
        """A table of the queues, then the totals."""
        rows = [{"agent": n, **result["agents"][n]} for n in AGENTS if n in result["agents"]]
        click.echo(table(rows, [("agent", "agent"), ("pending", "pending"), ("in_progress", "in progress"),
                                ("blocked", "blocked")]))  # fmt: skip
        click.echo(f"total pending {result['total_pending']}, rate limit remaining {result['rate_limit_remaining']}")

    emit(result, human)


@consolidate.command("process")
@click.argument("item_id", type=click.UUID)
def process(item_id: uuid.UUID) -> None:
    """Process one item now, as a person: merge it, apply it, or promote its memory."""
    state, opts = current_state(), _options()
    result = service.process_item(state.claims(), str(item_id), dry_run=opts["dry_run"])
    item = result["item"]
    emit(result, f"{'dry run: ' if opts['dry_run'] else ''}item {item['id']} ({item['agent']}, {item['action']}): "
                 f"{item['status']}" + (f", {item['close_reason']}" if item.get("close_reason") else ""))  # fmt: skip


@consolidate.command("items")
@click.option("--agent", type=click.Choice(list(AGENTS)))
@click.option("--status", "item_status", type=click.Choice(["open", "in_progress", "blocked", "closed"]),
              default="open", show_default=True)  # fmt: skip
@click.option("--urgency", type=click.Choice(["high", "medium", "low"]))
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
def items(agent: str | None, item_status: str, urgency: str | None, limit: int) -> None:
    """List items (all filters apply together)."""
    found = service.items(current_state().claims(), agent=agent, status=item_status, urgency=urgency, limit=limit)
    emit({"items": found}, lambda: click.echo(table(found, [("id", "id"), ("agent", "agent"), ("action", "action"),
                                                            ("urgency", "urgency"), ("status", "status"),
                                                            ("title", "title")])))  # fmt: skip


@consolidate.command("undo")
@click.argument("item_id", type=click.UUID)
@click.option("--reason", help="Why (kept in the audit trail).")
def undo(item_id: uuid.UUID, reason: str | None) -> None:
    """Undo a merge: restore the originals, retire the merged memory."""
    result = service.undo_merge(current_state().claims(), str(item_id), reason)
    emit(result, f"restored {len(result['restored'])} memories, retired {result['retired']}")
