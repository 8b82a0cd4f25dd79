"""Import (backfill) of interactions: batches checked and stored by one SQL call each
(import_interactions). No model is called here, so this module does not load the LLM clients:
`cortex import` starts in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cortex import db

Claims = Mapping[str, Any]


class Unsendable:
    """An item that cannot reach SQL at all (a JSON line that does not parse): reported at the edge."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message


# Blank JSON lines keep the line numbering but are not items.
BLANK = object()


def _nul_path(value: Any, path: str) -> str | None:
    # PostgreSQL text and jsonb cannot hold U+0000: such an item is refused here, by itself.
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            if "\x00" in k:
                return path or "item"
            found = _nul_path(v, f"{path}.{k}" if path else k)
            if found:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            found = _nul_path(v, f"{path}.{i}" if path else str(i))
            if found:
                return found
    return None


def unsendable_if_nul(item: Any) -> Any:
    """The item, or its error when a key or string in it holds NUL (which SQL cannot receive)."""
    nul = _nul_path(item, "")
    if nul is None:
        return item
    return Unsendable(nul.split(".")[0] or "item", f"{nul} contains a NUL character (U+0000)")


def _prepare(items: Sequence[Any]) -> tuple[list[Any], list[int], list[dict[str, Any]], int]:
    """The items SQL can receive, their positions in the batch, the errors found here, and the count
    of items (blank lines excluded)."""
    send: list[Any] = []
    where: list[int] = []
    errors: list[dict[str, Any]] = []
    received = 0
    for index, item in enumerate(items):
        if item is BLANK:
            continue
        received += 1
        if isinstance(item, Unsendable):
            errors.append({"index": index, "field": item.field, "message": item.message})
            continue
        checked = unsendable_if_nul(item)
        if isinstance(checked, Unsendable):
            errors.append({"index": index, "field": checked.field, "message": checked.message})
            continue
        send.append(item)
        where.append(index)
    return send, where, errors, received


def _merge(result: dict[str, Any], where: list[int], errors: list[dict[str, Any]], received: int) -> dict[str, Any]:
    sql_errors = [{**e, "index": where[e["index"]]} for e in result.get("errors") or []]
    merged = sorted(errors + sql_errors, key=lambda e: e["index"])
    return {**result, "received": received, "failed": len(merged), "errors": merged}


def import_interactions(claims: Claims, items: Sequence[Any]) -> dict[str, Any]:
    """Stores one batch (≤ 5,000 items) with one SQL call (import_interactions): new rows are
    stored with analysis pending and a summarise job each; duplicates by (contact, type,
    external_id) are counted, bad items reported as {index, field, message} and not written."""
    send, where, errors, received = _prepare(items)
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "import_interactions", items=db.Jsonb(send))
    return _merge(result, where, errors, received)


async def aimport_interactions(claims: Claims, items: Sequence[Any]) -> dict[str, Any]:
    """`import_interactions` on the async pool (the HTTP edge)."""
    send, where, errors, received = _prepare(items)
    result: dict[str, Any] = await db.acall_as(claims, "import_interactions", items=db.Jsonb(send))
    return _merge(result, where, errors, received)
