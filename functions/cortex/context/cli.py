"""The `cortex` commands of context."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import click

from cortex.console import current_state, emit, table, when

# --- context -------------------------------------------------------------------------------------


def _context_text(r: Mapping[str, Any]) -> None:
    h = r.get("header") or {}
    who = h.get("name") or h.get("email") or r["contact_id"]
    click.echo(
        f"{who}" + (f" — {h['company']}" if h.get("company") else "") + (f" [{h['stage']}]" if h.get("stage") else "")
    )
    click.echo(
        f"  level {r['level']}: {r['token_count']}/{r['token_budget']} tokens"
        + (", truncated" if r.get("truncated") else "")
        + (", stale" if r.get("is_stale") else "")
        + (" (refresh queued)" if r.get("refresh_queued") else "")
        + f"; generated {when(r.get('generated_at'))}"
    )
    if h.get("last_touch"):
        click.echo(
            f"  last touch {when(h['last_touch'])}"
            + (f" by {h['last_touch_agent']}" if h.get("last_touch_agent") else "")
        )
    ctx = r.get("context") or {}
    if ctx.get("summary"):
        click.echo(f"\n{ctx['summary']}")
    if ctx.get("key_facts"):
        click.echo("\nKey facts:")
        for fact in ctx["key_facts"]:
            click.echo(f"  - {fact}")
    for key, label in (("current_status", "Status"), ("recommended_tone", "Tone")):
        if ctx.get(key):
            click.echo(f"{label}: {ctx[key]}")
    sig = ctx.get("signals") or {}
    if sig:
        click.echo(
            f"Signals: churn risk {sig.get('churn_risk', '-')}, upsell potential {sig.get('upsell_potential', '-')}"
            + "".join(f"\n  risk: {f}" for f in sig.get("risk_factors") or [])
            + "".join(f"\n  opportunity: {f}" for f in sig.get("opportunity_factors") or [])
        )
    for t in ctx.get("open_threads") or []:
        click.echo(f"Open thread: {t.get('thread_id', '')} {t.get('subject') or t.get('summary') or ''}".rstrip())
    handoff = r.get("last_handoff")
    if handoff:
        click.echo(f"Last handoff: {handoff.get('from')} -> {handoff.get('to')}: {handoff.get('reason')}")
    items = r.get("recent_interactions")
    if items is not None:
        click.echo(f"\nRecent interactions ({len(items)} of {r.get('interactions_total')}):")
        shown = [{**i, "date": when(i.get("date"))} for i in items]
        click.echo(
            table(
                shown,
                [
                    ("date", "date"),
                    ("agent", "agent"),
                    ("type", "type"),
                    ("sentiment", "sentiment"),
                    ("summary", "summary"),
                ],
                width=70,
            )
            if shown
            else "  none"
        )


@click.group()
def context() -> None:
    """Working context of a contact: get, refresh."""


@context.command("get")
@click.argument("contact_id", type=click.UUID)
@click.option(
    "--level",
    type=click.IntRange(0, 3),
    default=1,
    show_default=True,
    help="0 header, 1 + summary, 2 + recent interactions, 3 + history to the agent's budget.",
)
@click.option("--refresh", is_flag=True, help="Regenerate the context first.")
def context_get(contact_id: uuid.UUID, level: int, refresh: bool) -> None:
    """The contact's working context at a level, within its token budget (get_context)."""
    from cortex.context import service as context_svc

    result = context_svc.get_context(current_state().claims(), str(contact_id), level=level, refresh=refresh)
    emit(result, lambda: _context_text(result))


@context.command("refresh")
@click.argument("contact_id", type=click.UUID)
def context_refresh(contact_id: uuid.UUID) -> None:
    """Regenerate the contact's working context now (refresh_context)."""
    from cortex.context import service as context_svc

    result = context_svc.refresh_context(current_state().claims(), str(contact_id))

    def human() -> None:
        if result.get("regenerated"):
            click.echo(
                f"regenerated context of {result['contact_id']}: {result.get('token_count')} tokens "
                f"(previous {when(result.get('previous_generated_at'))})"
            )
        else:
            click.echo(
                f"context of {result['contact_id']} not regenerated now; queued for the worker"
                + (f": {result['error']}" if result.get("error") else "")
            )

    emit(result, human)
