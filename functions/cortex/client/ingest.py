"""The SDK's ingest methods (routes under /api/v1/ingest)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
from cortex.ingest.models import IngestFile, IngestFileList, IngestListQuery, IngestPath, IngestReport, IngestUpload


def ingest_file(body: IngestUpload | None = None, /, **fields: Any) -> Op[IngestReport]:
    """POST /ingest: Ingest a file (markdown, text, JSON, YAML, CSV, log) into memories."""
    body = checked(IngestUpload, body, fields, "body")
    return Op("ingest_file", "POST", "/ingest", parser(IngestReport), body=dump(body))


def list_ingest_files(query: IngestListQuery | None = None, /, **fields: Any) -> Op[IngestFileList]:
    """GET /ingest: The ingest log, newest first."""
    query = checked(IngestListQuery, query, fields, "query")
    return Op("list_ingest_files", "GET", "/ingest", parser(IngestFileList), query=query_of(query))


def get_ingest_file(id: UUID | str, /) -> Op[IngestFile]:
    """GET /ingest/<id>: One ingested file and its full report."""
    where = checked(IngestPath, None, {"id": id}, "path")
    return Op("get_ingest_file", "GET", f"/ingest/{segment(where.id)}", parser(IngestFile))


class Methods:
    """ingest: the Client's methods."""

    ingest_file = method(ingest_file)
    list_ingest_files = method(list_ingest_files)
    get_ingest_file = method(get_ingest_file)


class AsyncMethods:
    """ingest: the AsyncClient's methods."""

    ingest_file = amethod(ingest_file)
    list_ingest_files = amethod(list_ingest_files)
    get_ingest_file = amethod(get_ingest_file)
