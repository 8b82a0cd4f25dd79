"""The drop folder: `$CORTEX_DATA_DIR/ingest/<tenant>/<agent>/FILE`, polled by the worker.

Layout (created by the operator; the sweep makes only processed/ and failed/):

    $CORTEX_DATA_DIR/ingest/
      acme/kai/MEMORY.md                 a file for agent kai of tenant acme (slug or UUID)
      processed/acme/kai/MEMORY.md       after ingest, with MEMORY.md.report.json beside it
      failed/acme/kai/photo.png          a bad file, with photo.png.report.json saying why

Each file is ingested as its agent (cortex.ingest.service.ingest_bytes, source "folder"), then
moved with its report (the JSON the API returns; also kept in cortex.ingest_files). A name taken
in processed/ or failed/ gets a numbered suffix. Files still being written (modified less than
`SETTLE_SECONDS` ago), hidden files and *.part / *.tmp / *.report.json are left alone. A file
outside a tenant/agent folder, or for an unknown tenant or agent, goes to failed/ with a report
saying so. The sweep handles at most `BATCH` files a round.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

from cortex import db
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.ingest import service
from cortex.queue.worker import register_sweep

log = logging.getLogger("cortex.ingest.folder")

SETTLE_SECONDS = 2.0
BATCH = 20
SKIPPED_SUFFIXES = (".part", ".tmp", ".report.json", ".swp", "~")
OUTBOXES = ("processed", "failed")


def ingest_root() -> Path:
    """The drop folder: `$CORTEX_DATA_DIR/ingest`."""
    return Path(get_settings().data_dir).expanduser() / "ingest"


@register_sweep("ingest_folder")
def sweep_ingest_folder(conn: psycopg.Connection[Any], worker_id: str, stop: threading.Event | None = None) -> int:
    """One round of the drop folder on the worker's connection; the number of files handled."""
    root = ingest_root()
    if not root.is_dir():
        return 0
    return len(sweep_folder(root, conn=conn, stop=stop))


def sweep_folder(
    root: Path,
    *,
    conn: psycopg.Connection[Any] | None = None,
    settle_seconds: float = SETTLE_SECONDS,
    stop: threading.Event | None = None,
    limit: int = BATCH,
) -> list[dict[str, Any]]:
    """Ingests the files waiting under `root` (at most `limit`) and moves each to processed/ or
    failed/ with its report; returns the reports. Operator work: `conn` is an owner connection
    (the worker's; else one from the pool) on which each file is ingested as its agent."""
    reports: list[dict[str, Any]] = []
    for path in _waiting(root, settle_seconds):
        if (stop is not None and stop.is_set()) or len(reports) >= limit:
            break
        reports.append(_handle(root, path, conn))
    return reports


def _waiting(root: Path, settle_seconds: float) -> Iterator[Path]:
    now = time.time()
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] in OUTBOXES or any(p.startswith(".") for p in rel.parts):
            continue
        if not path.is_file() or path.name.endswith(SKIPPED_SUFFIXES):
            continue
        try:
            if now - path.stat().st_mtime < settle_seconds:
                continue  # perhaps still being written
        except FileNotFoundError:
            continue
        yield path


def _handle(root: Path, path: Path, conn: psycopg.Connection[Any] | None) -> dict[str, Any]:
    rel = path.relative_to(root)
    report: dict[str, Any]
    try:
        if len(rel.parts) != 3:
            raise CortexError(422, "ingest_misplaced", f"{rel}: put files in ingest/<tenant>/<agent>/", "file")
        tenant_ref, agent, name = rel.parts
        claims = _claims(tenant_ref, agent, conn)
        data = path.read_bytes()
        report = service.ingest_bytes(claims, name, data, source="folder", conn=conn)
        outbox = "processed"
    except service.IngestRejected as exc:
        report = {**exc.details["report"], "error": exc.message}
        outbox = "failed"
    except CortexError as exc:
        report = {"file_name": path.name, "status": "failed", "chunks": 0, "created": 0, "duplicates": 0,
                  "errors": [{"field": exc.field, "message": exc.message}], "logged": False}  # fmt: skip
        outbox = "failed"
    except OSError as exc:
        report = {"file_name": path.name, "status": "failed", "chunks": 0, "created": 0, "duplicates": 0,
                  "errors": [{"field": "file", "message": f"{rel}: cannot read: {exc}"}], "logged": False}  # fmt: skip
        outbox = "failed"
    target = _free_name(root / outbox / rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    path.replace(target)
    report = {**report, "moved_to": str(target)}
    target.with_name(target.name + ".report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    log.info("ingest folder: %s -> %s", rel, target)
    return report


def _claims(tenant_ref: str, agent: str, conn: psycopg.Connection[Any] | None) -> dict[str, str]:
    with db.transaction(conn) as c:
        tenant_id = db.call(c, "cortex.resolve_tenant", p_ref=tenant_ref)
    if tenant_id is None:
        raise CortexError(
            404, "unknown_tenant", f"unknown tenant {tenant_ref!r} (folder ingest/{tenant_ref}/)", "tenant"
        )
    return db.agent_claims(str(tenant_id), agent)


def _free_name(target: Path) -> Path:
    if not target.exists():
        return target
    stem, suffix = target.stem, target.suffix
    n = 1
    while (candidate := target.with_name(f"{stem}-{n}{suffix}")).exists():
        n += 1
    return candidate
