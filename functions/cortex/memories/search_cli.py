"""The `cortex memories` commands of search: `search` and `reindex` (attached to the memories group)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import click

from cortex import db
from cortex.console import current_state, emit, timestamp
from cortex.memories.search import MemorySearch, search
from cortex.routing import validate


def _hit_line(hit: Mapping[str, Any]) -> str:
    m, r = hit["memory"], hit["rankings"]
    found = " ".join(f"{k}#{v}" for k, v in r.items() if v is not None)
    return f"{hit['score']:.4f}  [{m['kind']}] {m['title']}  ({m['id']}; {found})"


@click.command("search")
@click.argument("query", required=False)
@click.option("--kind", "kinds", multiple=True, help="Repeatable: fact, decision, event, ... contact.")
@click.option("--agent", help="Only memories written by this agent.")
@click.option("--contact-id", type=click.UUID)
@click.option("--tag", "tags", multiple=True, help="Repeatable; results carry all of them.")
@click.option("--since", help="Created at or after (ISO 8601).")
@click.option("--until", help="Created before (ISO 8601).")
@click.option("--as-of", help="Valid at this past time (ISO 8601).")
@click.option("--include-superseded", is_flag=True)
@click.option("--anchor", "anchors", multiple=True, type=click.UUID, help="Repeatable: rank by proximity to these.")
@click.option("--anchor-depth", type=int, default=2, show_default=True)
@click.option("--limit", type=int, default=10, show_default=True)
@click.option("--weight-text", type=float)
@click.option("--weight-vector", type=float)
@click.option("--weight-graph", type=float)
def memories_search(
    query: str | None,
    kinds: tuple[str, ...],
    agent: str | None,
    contact_id: uuid.UUID | None,
    tags: tuple[str, ...],
    since: str | None,
    until: str | None,
    as_of: str | None,
    include_superseded: bool,
    anchors: tuple[uuid.UUID, ...],
    anchor_depth: int,
    limit: int,
    weight_text: float | None,
    weight_vector: float | None,
    weight_graph: float | None,
) -> None:
    """Hybrid search of memories as --agent (search_memories): text, vector and graph, fused by rank."""
    request = validate(
        MemorySearch,
        {
            "query": query,
            "kinds": list(kinds) or None,
            "agent": agent,
            "contact_id": contact_id,
            "tags": list(tags) or None,
            "since": timestamp(since),
            "until": timestamp(until),
            "as_of": timestamp(as_of),
            "include_superseded": include_superseded,
            "anchors": list(anchors) or None,
            "anchor_depth": anchor_depth,
            "limit": limit,
            "weights": {"text": weight_text, "vector": weight_vector, "graph": weight_graph},
        },
        "options",
    )
    result = search(current_state().claims(), request)

    def human() -> None:
        hits = result["results"]
        if not hits:
            click.echo("no memories found")
        for hit in hits:
            click.echo(_hit_line(hit))

    emit(result, human)


@click.command("reindex")
@click.option("--status", "statuses", multiple=True, type=click.Choice(["failed", "skipped"]),
              help="Which nodes to send back (repeatable; default both).")  # fmt: skip
def memories_reindex(statuses: tuple[str, ...]) -> None:
    """Send the tenant's failed or skipped nodes back to the worker for embedding and linking."""
    state = current_state()
    with state.connect() as conn:
        n = db.call(
            conn,
            "cortex.reindex_memories",
            p_tenant_id=state.tenant_id(),
            p_statuses=db.typed(list(statuses or ("failed", "skipped")), "text[]"),
        )
    emit({"reindexed": n}, f"{n} node(s) queued for embedding and linking")


#: Attached to the `memories` group by the lead (cortex.cli).
COMMANDS: list[click.Command] = [memories_search, memories_reindex]
