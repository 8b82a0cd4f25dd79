"""The `cortex graph` commands: traversal and links as an agent; backfill, folds and settings as the operator."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import click

from cortex import db
from cortex.console import current_state, emit, key_values, table
from cortex.graph import service as graph_svc

_DIRECTIONS = click.Choice(["out", "in", "both"])
_STRATEGIES = click.Choice(["breadth_first", "weighted"])


def _node_line(memory: Mapping[str, Any]) -> str:
    return f"{memory['id']}  {memory['kind']:<11} {memory['title']}"


@click.group()
def graph() -> None:
    """The memory graph: traverse, neighbors, link, stats, version; operators: backfill, fold, settings."""


@graph.command("traverse")
@click.argument("start_ids", nargs=-1, required=True, type=click.UUID)
@click.option("--depth", type=int, default=2, show_default=True, help="Steps to walk (1..6).")
@click.option("--direction", type=_DIRECTIONS, default="both", show_default=True)
@click.option("--relation", "relations", multiple=True, help="Follow only this relation; repeatable.")
@click.option("--kind", "kinds", multiple=True, help="Reach only this node kind; repeatable.")
@click.option("--min-weight", type=float, help="Default: the tenant's min_weight.")
@click.option("--strategy", type=_STRATEGIES, default="breadth_first", show_default=True)
@click.option("--limit", type=int, default=50, show_default=True)
def graph_traverse(
    start_ids: tuple[uuid.UUID, ...],
    depth: int,
    direction: str,
    relations: tuple[str, ...],
    kinds: tuple[str, ...],
    min_weight: float | None,
    strategy: str,
    limit: int,
) -> None:
    """Walk the graph from START_IDS (traverse_graph)."""
    result = graph_svc.traverse_graph(
        current_state().claims(),
        start_ids,
        depth=depth,
        direction=direction,
        relations=relations or None,
        kinds=kinds or None,
        min_weight=min_weight,
        strategy=strategy,
        limit=limit,
    )

    def human() -> None:
        rows = [
            {
                "depth": n["depth"],
                "score": f"{n['score']:.3f}",
                "kind": n["memory"]["kind"],
                "id": n["memory"]["id"],
                "title": n["memory"]["title"],
                "via": n["via_relation"],
            }
            for n in result["nodes"]
        ]
        columns = [("depth", "depth"), ("score", "score"), ("via", "via"), ("kind", "kind"), ("id", "id"),
                   ("title", "title")]  # fmt: skip
        click.echo(table(rows, columns) if rows else "no nodes reached")

    emit(result, human)


@graph.command("neighbors")
@click.argument("node_id", type=click.UUID)
@click.option("--direction", type=_DIRECTIONS, default="both", show_default=True)
@click.option("--relation", "relations", multiple=True, help="Only this relation; repeatable.")
@click.option("--kind", "kinds", multiple=True, help="Only this node kind; repeatable.")
@click.option("--min-weight", type=float, help="Default: the tenant's min_weight.")
@click.option("--limit", type=int, default=50, show_default=True)
def graph_neighbors(
    node_id: uuid.UUID,
    direction: str,
    relations: tuple[str, ...],
    kinds: tuple[str, ...],
    min_weight: float | None,
    limit: int,
) -> None:
    """The nodes one edge away from NODE_ID, strongest first (neighbors)."""
    result = graph_svc.neighbors(
        current_state().claims(),
        node_id,
        direction=direction,
        relations=relations or None,
        kinds=kinds or None,
        min_weight=min_weight,
        limit=limit,
    )

    def human() -> None:
        rows = [
            {
                "weight": f"{i['weight']:.3f}",
                "edge": ("-> " if i["direction"] == "out" else "<- ") + i["relation"],
                "kind": i["memory"]["kind"],
                "id": i["memory"]["id"],
                "title": i["memory"]["title"],
            }
            for i in result["items"]
        ]
        columns = [("weight", "weight"), ("edge", "edge"), ("kind", "kind"), ("id", "id"), ("title", "title")]
        click.echo(table(rows, columns) if rows else "no neighbours")

    emit(result, human)


@graph.command("link")
@click.argument("source_id", type=click.UUID)
@click.argument("target_id", type=click.UUID)
@click.argument("relation")
@click.option("--weight", type=float, help="0..1 (default 0.5).")
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Edge metadata (KEY:=json); repeatable.")
def graph_link(
    source_id: uuid.UUID, target_id: uuid.UUID, relation: str, weight: float | None, meta: tuple[str, ...]
) -> None:
    """Link SOURCE_ID -RELATION-> TARGET_ID, or reinforce that edge (link_memories)."""
    result = graph_svc.link_memories(
        current_state().claims(),
        source_id,
        target_id,
        relation,
        weight=weight,
        metadata=key_values(meta, "--meta") if meta else None,
    )
    verb = "linked" if result["created"] else "reinforced"
    emit(
        result,
        f"{verb} {result['source_id']} -{result['relation']}-> {result['target_id']} (weight {result['weight']:.3f})",
    )


@graph.command("stats")
def graph_stats() -> None:
    """Node and edge counts as this agent sees them, the graph version and decay settings (graph_stats)."""
    result = graph_svc.graph_stats(current_state().claims())

    def human() -> None:
        nodes, edges = result["nodes"], result["edges"]
        click.echo(f"graph version {result['version']}: {nodes['total']} nodes, {edges['total']} edges")
        kinds = ", ".join(f"{k} {v}" for k, v in nodes["by_kind"].items() if v)
        click.echo(f"  nodes by kind:    {kinds or '-'}")
        click.echo(f"  nodes by status:  {', '.join(f'{k} {v}' for k, v in nodes['by_status'].items())}")
        relations = ", ".join(f"{k} {v}" for k, v in edges["by_relation"].items() if v)
        click.echo(f"  edges:            {relations or '-'}")
        click.echo(
            f"  embedding:        {nodes['pending_embedding']} pending, {nodes['failed_embedding']} failed; "
            f"linking {nodes['pending_linking']} pending, {nodes['failed_linking']} failed; "
            f"{nodes['needs_review']} need review"
        )
        s = result["settings"]
        click.echo(
            f"  decay:            half-life {s['half_life_days']} days, min weight {s['min_weight']}, "
            f"min importance {s['min_importance']}, reinforce step {s['reinforce_step']}"
        )

    emit(result, human)


@graph.command("version")
def graph_version() -> None:
    """The tenant's graph version (graph_version)."""
    result = graph_svc.graph_version(current_state().claims())
    emit(result, str(result["version"]))


# --- operators ---------------------------------------------------------------------------------


@graph.command("backfill")
@click.option("--all-tenants", is_flag=True, help="Every tenant, not only --tenant.")
def graph_backfill(all_tenants: bool) -> None:
    """Mirror agents, contacts, interactions and handoffs that have no node yet (cortex.backfill_graph)."""
    state = current_state()
    tenant_id = None if all_tenants else state.tenant_id()
    with state.connect() as conn:
        result = db.call(conn, "cortex.backfill_graph", p_tenant_id=tenant_id)
    emit(result, f"added {result['nodes_added']} node(s) and {result['edges_added']} edge(s)")


@graph.command("fold")
def graph_fold() -> None:
    """Apply the access log (access counts, edge reinforcement) and fold graph versions, for every tenant
    (what the scheduled jobs do each minute)."""
    with current_state().connect() as conn:
        access = db.call(conn, "cortex.fold_memory_access")
        tenants = db.call(conn, "cortex.fold_graph_changes")
    result = {"access": access, "versions_folded": tenants}
    emit(
        result,
        f"reinforced {access['edges']} edge(s) of {access['nodes']} accessed node(s); "
        f"folded the graph versions of {tenants} tenant(s)",
    )


@graph.group("settings")
def graph_settings() -> None:
    """The tenant's memory settings (decay, thresholds, search weights)."""


def _settings_text(settings: Mapping[str, Any]) -> str:
    return "\n".join(f"{k:<15} {v}" for k, v in settings.items() if k not in ("tenant_id",))


@graph_settings.command("show")
def graph_settings_show() -> None:
    """Show the tenant's memory settings."""
    state = current_state()
    with state.connect() as conn:
        row = conn.execute(
            "select to_jsonb(s) - 'tenant_id' as s from cortex.memory_settings s where s.tenant_id = %s",
            (state.tenant_id(),),
        ).fetchone()
    settings = row["s"] if row else {}
    emit(settings, lambda: click.echo(_settings_text(settings)))


@graph_settings.command("set")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def graph_settings_set(pairs: tuple[str, ...]) -> None:
    """Set some of the tenant's memory settings, e.g. `half_life_days=14 min_weight=0.25`
    (cortex.set_memory_settings)."""
    state = current_state()
    values = key_values(pairs, "KEY=VALUE")
    with state.connect() as conn:
        settings = db.call(conn, "cortex.set_memory_settings", p_tenant_id=state.tenant_id(), p_settings=values)
    emit(settings, lambda: click.echo(_settings_text(settings)))
