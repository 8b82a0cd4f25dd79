"""The `cortex memories` commands: remember, get, list, update, supersede, forget."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import click

from cortex.console import current_state, emit, json_object, key_values, table, when
from cortex.memories import service as memories_svc
from cortex.memories.search_cli import COMMANDS

_COLUMNS = [
    ("id", "id"),
    ("kind", "kind"),
    ("title", "title"),
    ("status", "status"),
    ("source_agent", "agent"),
    ("importance", "imp"),
    ("created_at", "created"),
]


def _instant(option: str) -> Callable[[click.Context, click.Parameter, str | None], datetime | None]:
    def parse(_ctx: click.Context, _param: click.Parameter, value: str | None) -> datetime | None:
        if value is None:
            return None
        try:
            return datetime.fromisoformat(value)
        except ValueError as exc:
            raise click.BadParameter(f"not an ISO 8601 timestamp: {value!r}", param_hint=option) from exc

    return parse


def _links(values: tuple[str, ...]) -> list[dict[str, Any]] | None:
    # TARGET_ID:RELATION[:WEIGHT]; SQL checks the target and the relation.
    links = []
    for value in values:
        parts = value.split(":")
        if len(parts) not in (2, 3):
            raise click.BadParameter(f"expected TARGET_ID:RELATION[:WEIGHT], got {value!r}", param_hint="--link")
        link: dict[str, Any] = {"target_id": parts[0], "relation": parts[1]}
        if len(parts) == 3:
            try:
                link["weight"] = float(parts[2])
            except ValueError as exc:
                raise click.BadParameter(f"weight must be a number, got {parts[2]!r}", param_hint="--link") from exc
        links.append(link)
    return links or None


def _node_text(n: Mapping[str, Any]) -> str:
    lines = [f"[{n['kind']}] {n['title']}  ({n['status']}, {n['visibility']})"]
    if n.get("body"):
        lines.append(f"  {n['body']}")
    fields = [
        ("id", n.get("id")),
        ("agent", n.get("source_agent")),
        ("key", n.get("key")),
        ("contact", n.get("contact_id")),
        ("tags", ", ".join(n.get("tags") or []) or None),
        ("weight", f"importance {n['importance']:.2f}, confidence {n['confidence']:.2f}"),
        ("valid", f"{when(n.get('valid_from'))} .. {when(n.get('valid_to')) if n.get('valid_to') else 'now'}"),
        ("review", n.get("review_reason") or ("yes" if n.get("needs_review") else None)),
        ("index", f"embedding {n['embed_status']}, links {n['link_status']}"),
    ]
    lines += [f"  {k + ':':<9} {v}" for k, v in fields if v]
    for e in n.get("edges") or []:
        other = e["target_id"] if str(e["source_id"]) == str(n["id"]) else e["source_id"]
        arrow = "->" if str(e["source_id"]) == str(n["id"]) else "<-"
        lines.append(f"  {arrow} {e['relation']:<17} {other}  ({e['current_weight']:.2f})")
    return "\n".join(lines)


def _write_options(f: Callable[..., None]) -> Callable[..., None]:
    for option in reversed(
        [
            click.option("--body", help="The memory's text beyond its title."),
            click.option("--importance", type=click.FloatRange(0, 1)),
            click.option("--confidence", type=click.FloatRange(0, 1)),
            click.option("--tag", "tags", multiple=True, help="Repeatable."),
            click.option("--private", is_flag=True, default=None, help="Only this agent sees it."),
            click.option("--key", help="A slot: the memory holding it is superseded."),
            click.option("--contact-id", type=click.UUID),
            click.option("--valid-from", callback=_instant("--valid-from"), help="ISO 8601; default now."),
            click.option("--permanent", is_flag=True, default=None, help="Its edges never decay."),
            click.option("--metadata", help="A JSON object."),
            click.option("--link", "links", multiple=True, metavar="TARGET_ID:RELATION[:WEIGHT]", help="Repeatable."),
            click.option("--agent", help="Write as this agent (admins only)."),
        ]
    ):
        f = option(f)
    return f


def _fields(options: Mapping[str, Any]) -> dict[str, Any]:
    fields = dict(options)
    fields["tags"] = memories_svc.as_list(fields.pop("tags"))
    fields["links"] = _links(fields.pop("links"))
    fields["metadata"] = json_object(fields.pop("metadata"), "--metadata")
    private = fields.pop("private")
    fields["visibility"] = "private" if private else None
    if fields.get("contact_id") is not None:
        fields["contact_id"] = str(fields["contact_id"])
    return fields


@click.group()
def memories() -> None:
    """Memories: remember, get, list, update, supersede, forget."""


@memories.command("remember")
@click.option("--kind", required=True, help="fact, decision, event, preference, pattern, goal, observation, ...")
@click.option("--title", required=True)
@_write_options
def memories_remember(kind: str, title: str, **options: Any) -> None:
    """Remember something; a duplicate reinforces the existing memory (remember)."""
    result = memories_svc.remember(current_state().claims(), kind=kind, title=title, **_fields(options))

    def human() -> None:
        status = "created" if result["created"] else f"duplicate ({result['deduplicated']}), reinforced"
        click.echo(f"{status}\n{_node_text(result['memory'])}")
        for old in result["superseded"]:
            click.echo(f"  supersedes {old}")

    emit(result, human)


@memories.command("get")
@click.argument("memory_id", type=click.UUID)
@click.option("--as-of", callback=_instant("--as-of"), help="ISO 8601: only if valid then.")
@click.option("--edges/--no-edges", default=True, show_default=True)
def memories_get(memory_id: uuid.UUID, as_of: datetime | None, edges: bool) -> None:
    """Show one memory and its edges (get_memory)."""
    result = memories_svc.get_memory(current_state().claims(), str(memory_id), as_of=as_of, include_edges=edges)
    emit(result, lambda: click.echo(_node_text(result)))


@memories.command("list")
@click.option("--kind", "kinds", multiple=True, help="Repeatable.")
@click.option("--agent")
@click.option("--contact-id", type=click.UUID)
@click.option("--tag", "tags", multiple=True, help="Repeatable; nodes carrying all of them.")
@click.option("--status", help="active, superseded or archived.")
@click.option("--since", callback=_instant("--since"), help="Created at or after (ISO 8601).")
@click.option("--until", callback=_instant("--until"), help="Created before (ISO 8601).")
@click.option("--as-of", callback=_instant("--as-of"), help="The nodes valid then (ISO 8601).")
@click.option("--include-superseded", is_flag=True)
@click.option("--needs-review", type=bool, help="true or false.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="next_cursor of the previous page.")
def memories_list(
    kinds: tuple[str, ...],
    agent: str | None,
    contact_id: uuid.UUID | None,
    tags: tuple[str, ...],
    status: str | None,
    since: datetime | None,
    until: datetime | None,
    as_of: datetime | None,
    include_superseded: bool,
    needs_review: bool | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List memories, newest first (list_memories)."""
    result = memories_svc.list_memories(
        current_state().claims(),
        kinds=memories_svc.as_list(kinds),
        agent=agent,
        contact_id=str(contact_id) if contact_id else None,
        tags=memories_svc.as_list(tags),
        status=status,
        since=since,
        until=until,
        as_of=as_of,
        include_superseded=include_superseded,
        needs_review=needs_review,
        limit=limit,
        cursor=cursor,
    )

    def human() -> None:
        items = [{**n, "created_at": when(n.get("created_at"))} for n in result["items"]]
        click.echo(table(items, _COLUMNS, width=40) if items else "no memories match")
        if result.get("next_cursor"):
            click.echo(f"(more: --cursor {result['next_cursor']})")

    emit(result, human)


@memories.command("update")
@click.argument("memory_id", type=click.UUID)
@click.option(
    "--set", "sets", multiple=True, metavar="FIELD=VALUE", help="FIELD:=json for numbers, booleans, lists; repeatable."
)
@click.option("--clear-valid-to", is_flag=True, help="Make it true again without end.")
def memories_update(memory_id: uuid.UUID, sets: tuple[str, ...], clear_valid_to: bool) -> None:
    """Change some fields of a memory (update_memory); the others stay."""
    if not sets and not clear_valid_to:
        raise click.UsageError("nothing to change: give --set FIELD=VALUE or --clear-valid-to")
    patch = key_values(sets, "--set")
    if isinstance(patch.get("tags"), str):
        patch["tags"] = [t.strip() for t in patch["tags"].split(",") if t.strip()]
    if clear_valid_to:
        patch["valid_to"] = None
    result = memories_svc.update_memory(current_state().claims(), str(memory_id), patch)
    emit(result, lambda: click.echo(_node_text(result)))


@memories.command("supersede")
@click.argument("memory_id", type=click.UUID)
@click.option("--title", required=True)
@click.option("--kind", help="Default: the old memory's kind.")
@_write_options
def memories_supersede(memory_id: uuid.UUID, title: str, kind: str | None, **options: Any) -> None:
    """Replace an active memory by a new version (supersede_memory)."""
    result = memories_svc.supersede_memory(
        current_state().claims(), str(memory_id), title=title, kind=kind, **_fields(options)
    )
    emit(result, lambda: click.echo(f"{_node_text(result['memory'])}\n  supersedes {result['superseded']['id']}"))


@memories.command("forget")
@click.argument("memory_id", type=click.UUID)
@click.option("--reason", help="Kept in the memory's metadata.")
def memories_forget(memory_id: uuid.UUID, reason: str | None) -> None:
    """Forget a memory: archive it, never delete it (forget_memory)."""
    result = memories_svc.forget_memory(current_state().claims(), str(memory_id), reason)
    emit(result, lambda: click.echo(_node_text(result)))


# Search and the index worker's commands live beside their service (search_cli.py).
for _command in COMMANDS:
    memories.add_command(_command)
