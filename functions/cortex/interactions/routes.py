"""HTTP routes of interactions: `/api/v1/interactions`."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.errors import CortexError
from cortex.interactions import backfill, service
from cortex.interactions.models import (
    ImportResult,
    InteractionCreate,
    InteractionImport,
    InteractionList,
    InteractionListQuery,
    InteractionLogged,
)
from cortex.routing import Call, Reply, Router, parse_json

router = Router("interactions")


@router.route(
    "POST", "", name="log_interaction", summary="Log an interaction (summarised at write time)",
    responses={201: InteractionLogged, 200: InteractionLogged}, body=InteractionCreate, errors=(404,),
    description="Without a summary Cortex summarises raw_content now and reports the model call in "
    "token_usage. A repeated external_id returns the first row with duplicate=true (200).",
)  # fmt: skip
async def log_interaction(call: Call) -> Reply:
    """Logs an interaction; the model works in a thread so the event loop keeps serving."""
    body = call.body_as(InteractionCreate).model_dump(exclude_none=True)
    result = await run_in_threadpool(service.log_interaction, call.claims, **body)
    return Reply(200 if result.get("duplicate") else 201, result)


@router.route(
    "GET", "", name="list_interactions", summary="A contact's interactions, newest first",
    responses={200: InteractionList}, query=InteractionListQuery, errors=(404,),
)  # fmt: skip
async def list_interactions(call: Call) -> Reply:
    """A contact's interactions, newest first."""
    query = call.query_as(InteractionListQuery).model_dump(exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_interactions", **query))


NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "application/x-jsonlines")


def parse_import_body(raw: bytes, content_type: str) -> Any:
    """A JSON array (application/json), or JSON lines (application/x-ndjson): one item per line,
    blank lines skipped but counted, so an item's index is its line number - 1. A line that is not
    JSON is that item's error, and so is an item holding NUL (a per-item report, not a 422 for the
    whole body as on other routes); the other items are still imported."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in NDJSON_TYPES:
        data = parse_json(raw)
        if not isinstance(data, list):
            raise CortexError(422, "validation_error", "body: send a JSON array of interactions (or JSON lines "
                              "with Content-Type: application/x-ndjson)", "body")  # fmt: skip
        return [backfill.unsendable_if_nul(item) for item in data]
    items: list[Any] = []
    for line in raw.split(b"\n"):
        if not line.strip():
            items.append(backfill.BLANK)
            continue
        try:
            items.append(backfill.unsendable_if_nul(parse_json(line)))
        except CortexError as exc:
            items.append(backfill.Unsendable("item", exc.message.replace("request body", "line")))
    while items and items[-1] is backfill.BLANK:
        items.pop()
    if not items:
        raise CortexError(400, "malformed_json", "request body is empty; send JSON lines", "body")
    return items


@router.route(
    "POST", "/import", name="import_interactions", summary="Import interactions (backfill), idempotent by external_id",
    responses={200: ImportResult}, body=InteractionImport, body_parser=parse_import_body,
    body_media_types=("application/json", "application/x-ndjson"),
    description="A JSON array, or JSON lines with Content-Type application/x-ndjson, of at most 5,000 "
    "interactions, each with external_id and occurred_at, the contact by contact_id or contact_email. "
    "Stored in one transaction by one SQL call (import_interactions); a re-import inserts nothing "
    "(duplicates). Each bad item is reported in errors as {index, field, message} and nothing of it is "
    "written; the good ones are stored. Rows are stored with analysis pending and summarised by the "
    "worker afterwards (no model call here).",
)  # fmt: skip
async def import_interactions(call: Call) -> Reply:
    """Imports one batch of interactions with one SQL call."""
    items = call.body_as(InteractionImport).root
    return Reply(200, await backfill.aimport_interactions(call.claims, items))
