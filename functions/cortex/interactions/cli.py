"""The `cortex` commands of interactions."""

from __future__ import annotations

import uuid
from typing import IO

import click

from cortex.console import current_state, emit, json_object, table, timestamp, when

# --- interactions --------------------------------------------------------------------------------


@click.group()
def interactions() -> None:
    """Interactions: log and list."""


@interactions.command("log")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option(
    "--type",
    "itype",
    required=True,
    help="email_sent, email_received, ticket_opened, ticket_resolved, call, note, order_placed, "
    "refund_processed, nudge_sent, sequence_started or sequence_completed.",
)
@click.option("--direction", help="inbound or outbound.")
@click.option("--subject")
@click.option("--content", help="The raw content (summarised at once).")
@click.option("--content-file", type=click.File("r"), help="Read the raw content from a file (- for stdin).")
@click.option("--external-id", help="Id in the source system; a repeat is a duplicate, not a new row.")
@click.option("--thread-id")
@click.option("--campaign-id")
@click.option("--metadata", help="A JSON object.")
def interactions_log(
    contact_id: uuid.UUID,
    itype: str,
    direction: str | None,
    subject: str | None,
    content: str | None,
    content_file: IO[str] | None,
    external_id: str | None,
    thread_id: str | None,
    campaign_id: str | None,
    metadata: str | None,
) -> None:
    """Log an interaction with a contact; it is summarised at write time (log_interaction)."""
    if content is not None and content_file is not None:
        raise click.UsageError("give --content or --content-file, not both")
    raw = content_file.read() if content_file is not None else content
    from cortex.interactions import service as interactions_svc  # loads the Anthropic SDK: only when needed

    result = interactions_svc.log_interaction(
        current_state().claims(),
        contact_id=str(contact_id),
        type=itype,
        direction=direction,
        subject=subject,
        raw_content=raw,
        external_id=external_id,
        thread_id=thread_id,
        campaign_id=campaign_id,
        metadata=json_object(metadata, "--metadata"),
    )

    def human() -> None:
        state = "duplicate of an earlier log" if result.get("duplicate") else "logged"
        click.echo(f"{state}: interaction {result['id']} ({result['type']} by {result['agent']})")
        if result.get("summary"):
            click.echo(f"  summary:   {result['summary']}")
            click.echo(f"  sentiment: {result.get('sentiment')}   intent: {result.get('intent')}")
        else:
            click.echo("  summary:   pending (the worker summarises it)")
        if result.get("context_refresh_triggered"):
            click.echo("  context refresh queued")

    emit(result, human)


@interactions.command("list")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option("--agent", "by_agent", help="Only this agent's interactions.")
@click.option("--type", "itype")
@click.option("--since", help="ISO 8601 timestamp.")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--include-raw", is_flag=True, help="Include raw_content.")
def interactions_list(
    contact_id: uuid.UUID,
    by_agent: str | None,
    itype: str | None,
    since: str | None,
    limit: int,
    include_raw: bool,
) -> None:
    """A contact's interactions, newest first (list_interactions)."""
    from cortex.interactions import service as interactions_svc

    result = interactions_svc.list_interactions(
        current_state().claims(),
        contact_id=str(contact_id),
        agent=by_agent,
        type=itype,
        since=timestamp(since),
        limit=limit,
        include_raw=include_raw or None,
    )

    def human() -> None:
        items = [
            {**i, "created_at": when(i.get("created_at")), "summary": i.get("summary") or "(pending)"}
            for i in result["items"]
        ]
        if not items:
            click.echo("no interactions")
            return
        click.echo(
            table(
                items,
                [
                    ("created_at", "date"),
                    ("agent", "agent"),
                    ("type", "type"),
                    ("sentiment", "sentiment"),
                    ("summary", "summary"),
                ],
                width=70,
            )
        )
        if include_raw:
            for i in result["items"]:
                click.echo(f"\n--- {i['id']} {i.get('subject') or ''}\n{i.get('raw_content') or ''}")

    emit(result, human)
