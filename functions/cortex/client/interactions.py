"""The SDK's interactions methods (routes under /api/v1/interactions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of
from cortex.interactions.models import (
    ImportResult,
    InteractionCreate,
    InteractionImportItem,
    InteractionList,
    InteractionListQuery,
    InteractionLogged,
)


def log_interaction(body: InteractionCreate | None = None, /, **fields: Any) -> Op[InteractionLogged]:
    """POST /interactions: Log an interaction (summarised at write time)."""
    body = checked(InteractionCreate, body, fields, "body")
    return Op("log_interaction", "POST", "/interactions", parser(InteractionLogged), body=dump(body))


def list_interactions(query: InteractionListQuery | None = None, /, **fields: Any) -> Op[InteractionList]:
    """GET /interactions: A contact's interactions, newest first."""
    query = checked(InteractionListQuery, query, fields, "query")
    return Op("list_interactions", "GET", "/interactions", parser(InteractionList), query=query_of(query))


def import_interactions(rows: Sequence[InteractionImportItem | Mapping[str, Any]]) -> Op[ImportResult]:
    """POST /interactions/import: Import interactions (backfill), idempotent by external_id."""
    # Rows are checked by the server one by one (ImportResult lists the refused ones), not here.
    body = [
        row.model_dump(mode="json", exclude_unset=True) if isinstance(row, BaseModel) else dict(row) for row in rows
    ]
    return Op("import_interactions", "POST", "/interactions/import", parser(ImportResult), body=body)


class Methods:
    """interactions: the Client's methods."""

    log_interaction = method(log_interaction)
    list_interactions = method(list_interactions)
    import_interactions = method(import_interactions)


class AsyncMethods:
    """interactions: the AsyncClient's methods."""

    log_interaction = amethod(log_interaction)
    list_interactions = amethod(list_interactions)
    import_interactions = amethod(import_interactions)
