"""Ingest: a file's bytes -> checked, chunked, classified -> public.ingest_chunks (one transaction).

The three entries (`cortex ingest`, `POST /api/v1/ingest`, the drop folder) all call
`ingest_bytes`. Python reads and chunks the file (`cortex.ingest.chunking`); SQL classifies
(cortex.classify_chunk), de-duplicates and writes every chunk through `remember` and logs the
file with its report, all or nothing. A file that cannot be read, or whose chunks SQL refuses,
is logged as failed (public.fail_ingest) and `IngestRejected` is raised with its report: no
memory is written.

With a Claude key configured, the model classifies the chunks first (at most `MODEL_CHUNKS`
per file, one call), budgeted like every model call: reserved for the acting agent before the
call, settled with the usage (recorded in token_usage, operation `ingest_classify`) in the
transaction that writes the chunks. Kinds the model names for chunks it was sent are passed
explicitly (classified_by "model"); the rest, and every chunk when the model fails or the budget
says no, fall back to the SQL heuristic.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from cortex import db, llm
from cortex.config import Settings, get_settings
from cortex.errors import CortexError
from cortex.ingest import chunking
from cortex.ingest.chunking import Chunk, IngestFileError
from cortex.llm import prompts
from cortex.usage import budget

log = logging.getLogger("cortex.ingest")

Claims = Mapping[str, Any]
OPERATION = "ingest_classify"
# Chunks shown to the model per file (one call); the rest are classified by the heuristic.
MODEL_CHUNKS = 60


class IngestRejected(CortexError):
    """A file that was not ingested: its error (413, 415 or 422 naming the field) and the
    failure report logged in cortex.ingest_files (in `details["report"]`)."""


def _rejected(status: int, code: str, message: str, field: str | None, report: Mapping[str, Any]) -> IngestRejected:
    return IngestRejected(status, code, message, field, None, None, {"report": dict(report)})


def ingest_bytes(
    claims: Claims,
    file_name: str,
    data: bytes,
    *,
    agent: str | None = None,
    source: str = "api",
    conn: psycopg.Connection[Any] | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Ingests one file as the caller with `claims` (for `agent` when an admin says so) and
    returns its report {file_id, status, chunks, created, duplicates, by_kind, errors, nodes,
    already_ingested}. Raises IngestRejected (the failure logged) for a bad file, CortexError for
    a caller who may not ingest (unknown agent, read-only), with nothing written either way.
    `conn`: run on this connection (the worker's), else on the pool."""
    settings = settings or get_settings()
    sha = chunking.sha256_hex(data)
    fmt = chunking.FORMATS.get(_suffix(file_name))
    try:
        doc = chunking.read(file_name, data)
        chunks = chunking.chunk(doc)
    except IngestFileError as exc:
        failed = _fail(claims, file_name, exc.message, exc.field, fmt, sha, agent, source, len(data), conn)
        raise _rejected(exc.status, f"ingest_{exc.reason}", exc.message, exc.field, failed) from None
    args: dict[str, Any] = {
        "file_name": file_name,
        "format": doc.format,
        "sha256": doc.sha256,
        "agent": agent,
        "source": source,
        "size_bytes": doc.size_bytes,
    }
    plan: budget.Plan | None = None
    usage: llm.Usage | dict[str, Any] | None = None
    if settings.use_remote_llm and not _already_ingested(claims, doc.sha256, agent, conn):
        chunks, plan, usage = _classify_with_model(claims, chunks, agent, settings, conn)
    try:
        with db.as_caller(claims, conn) as c:
            report: dict[str, Any] = db.call(c, "ingest_chunks", chunks=Jsonb([ch.as_json() for ch in chunks]), **args)
            if plan is not None:
                budget.settle(c, plan, usage)
    except CortexError as exc:
        if plan is not None:
            with db.as_caller(claims, conn) as c:
                budget.settle(c, plan, usage)
        if exc.status != 422:
            raise  # the caller may not ingest at all (unknown agent, read-only): nothing to log as theirs
        message = f"{file_name}: {exc.message}"
        failed = _fail(claims, file_name, message, exc.field, doc.format, doc.sha256, agent, source, doc.size_bytes,
                       conn)  # fmt: skip
        raise _rejected(422, "ingest_rejected", message, exc.field, failed) from None
    log.info(
        "ingest %s: %d chunks, %d created, %d duplicates%s",
        file_name,
        report["chunks"],
        report["created"],
        report["duplicates"],
        " (already ingested)" if report.get("already_ingested") else "",
    )
    return report


def _suffix(file_name: str) -> str:
    dot = file_name.rfind(".")
    return file_name[dot:].lower() if dot > 0 else ""


def _fail(
    claims: Claims,
    file_name: str,
    message: str,
    field: str | None,
    fmt: str | None,
    sha: str | None,
    agent: str | None,
    source: str,
    size: int,
    conn: psycopg.Connection[Any] | None,
) -> dict[str, Any]:
    """Logs a failed file (public.fail_ingest) and returns its report; when even that is refused
    (the caller may not write), a report that says so, logged nowhere."""
    try:
        with db.as_caller(claims, conn) as c:
            report: dict[str, Any] = db.call(
                c,
                "fail_ingest",
                file_name=file_name[:255] or "(unnamed)",
                error=message,
                field=field,
                format=fmt,
                sha256=sha,
                agent=agent,
                source=source,
                size_bytes=size,
            )
    except CortexError as exc:
        log.warning("ingest %s failed and could not be logged: %s", file_name, exc.message)
        return {"file_name": file_name, "status": "failed", "chunks": 0, "created": 0, "duplicates": 0,
                "errors": [{"field": field, "message": message}], "logged": False}  # fmt: skip
    log.warning("ingest %s failed: %s", file_name, message)
    return report


def _already_ingested(claims: Claims, sha: str, agent: str | None, conn: psycopg.Connection[Any] | None) -> bool:
    # The same file again is a no-op: no model call for it either.
    with db.as_caller(claims, conn) as c:
        found = db.call(c, "list_ingest_files", status="processed", sha256=sha, agent=agent or claims.get("agent"))
    return bool(found["items"])


def _classify_with_model(
    claims: Claims,
    chunks: Sequence[Chunk],
    agent: str | None,
    settings: Settings,
    conn: psycopg.Connection[Any] | None,
) -> tuple[list[Chunk], budget.Plan | None, llm.Usage | dict[str, Any] | None]:
    """The chunks with the model's kinds (classified_by "model"), the budget's plan and the
    usage to settle it with; the chunks unchanged when the budget says no or the model fails."""
    shown = [{"title": c.title, "body": c.body, "section": c.section} for c in chunks[:MODEL_CHUNKS] if c.kind is None]
    if not shown:
        return list(chunks), None, None
    open_chunks = [i for i, c in enumerate(chunks[:MODEL_CHUNKS]) if c.kind is None]
    prompt = prompts.ingest_classification_prompt(shown)
    tenant_id = str(claims.get("tenant_id"))
    with db.as_caller(claims, conn) as c:
        plan = budget.reserve(c, tenant_id, agent or str(claims.get("agent")), OPERATION, budget.estimate(prompt),
                              settings=settings)  # fmt: skip
    if plan.model is None:  # over budget: the heuristic classifies
        log.info("ingest: model classification skipped (%s)", plan.action)
        return list(chunks), plan, None
    try:
        answer, usage = llm.classify_chunks(shown, settings, model=plan.model, max_tokens=plan.max_tokens)
    except llm.LLMError as exc:
        log.warning("ingest: model classification failed, heuristics instead: %s", exc)
        return list(chunks), plan, budget.failed_usage(plan, exc)
    kinds = {k.chunk: k.kind for k in answer.kinds if k.chunk < len(open_chunks)}
    out = list(chunks)
    for n, kind in kinds.items():
        i = open_chunks[n]
        old = out[i]
        out[i] = Chunk(old.title, old.body, old.section, old.line, kind, "model")
    return out, plan, usage


def list_files(claims: Claims, **filters: Any) -> dict[str, Any]:
    """The ingest log, newest first; {items}."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "list_ingest_files", **filters)
    return result


def get_file(claims: Claims, file_id: str) -> dict[str, Any]:
    """One file of the ingest log with its full report; CortexError 404 when unknown."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "get_ingest_file", file_id=file_id)
    return result
