"""Memories: thin calls to the SQL functions of the same names (all rules live there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from psycopg.types.json import Jsonb

from cortex import db

Claims = Mapping[str, Any]


def sql_args(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for the SQL functions: links (a list of objects) travel as one jsonb value, and
    importance and confidence as `real` (a Python float is a double, which SQL will not narrow)."""
    args = dict(fields)
    if args.get("links") is not None:
        args["links"] = Jsonb(args["links"])
    for name in ("importance", "confidence"):
        if args.get(name) is not None:
            args[name] = db.typed(args[name], "real")
    return args


def _call(claims: Claims, function: str, **args: Any) -> dict[str, Any]:
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, function, **sql_args(args))
    return result


def remember(claims: Claims, **fields: Any) -> dict[str, Any]:
    """Writes a memory (or reinforces its duplicate); {memory, created, deduplicated, superseded, links}."""
    return _call(claims, "remember", **fields)


def get_memory(claims: Claims, memory_id: str, **options: Any) -> dict[str, Any]:
    """One memory with its edges; CortexError 404 when unknown (or not valid at as_of)."""
    return _call(claims, "get_memory", memory_id=memory_id, **options)


def list_memories(claims: Claims, **filters: Any) -> dict[str, Any]:
    """A page of memories, newest first; {items, next_cursor}."""
    return _call(claims, "list_memories", **filters)


def update_memory(claims: Claims, memory_id: str, patch: Mapping[str, Any]) -> dict[str, Any]:
    """Patches a memory: present keys set, absent keys are kept."""
    return _call(claims, "update_memory", memory_id=memory_id, patch=dict(patch))


def supersede_memory(claims: Claims, memory_id: str, **fields: Any) -> dict[str, Any]:
    """Replaces an active memory by a new version; {memory, superseded, links}."""
    return _call(claims, "supersede_memory", memory_id=memory_id, **fields)


def forget_memory(claims: Claims, memory_id: str, reason: str | None = None) -> dict[str, Any]:
    """Archives a memory (never deletes it); the node."""
    return _call(claims, "forget_memory", memory_id=memory_id, reason=reason)


def as_list(value: Sequence[str] | None) -> list[str] | None:
    """A tuple of CLI options as a list, None when empty (so the SQL default applies)."""
    return list(value) if value else None
