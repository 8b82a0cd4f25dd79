"""`cortex ingest PATH... [--agent NAME]`: files (or the files of folders) into memories."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from cortex.console import current_state, emit
from cortex.errors import CortexError
from cortex.ingest import chunking, service


def _files(paths: tuple[Path, ...]) -> list[Path]:
    # A folder stands for the files under it of the formats ingest reads (hidden ones skipped).
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.suffix.lower() in chunking.FORMATS
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        else:
            found.append(path)
    return found


def _line(report: dict[str, Any]) -> str:
    if report.get("status") == "failed":
        errors = "; ".join(e.get("message", "") for e in report.get("errors", []))
        return f"failed     {report.get('file_name')}: {errors}"
    if report.get("already_ingested"):
        return f"unchanged  {report['file_name']}: already ingested (file {report['file_id']})"
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(report.get("by_kind", {}).items()))
    return (
        f"ingested   {report['file_name']}: {report['chunks']} chunks, {report['created']} created, "
        f"{report['duplicates']} duplicates ({kinds})"
    )


@click.command("ingest")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--agent", help="Ingest as this agent (default: the global --agent).")
def ingest(paths: tuple[Path, ...], agent: str | None) -> None:
    """Ingest files (md, txt, json, yaml, csv, log) into memories, one transaction per file.

    A folder stands for its files of those formats. Each file is chunked (markdown by heading,
    the others by lines or top-level items), classified, de-duplicated against existing memories
    and logged with its report; the same file again changes nothing. Exit status 1 when a file
    failed (nothing of it is written)."""
    state = current_state()
    claims = (dataclasses.replace(state, agent=agent) if agent else state).claims()
    reports: list[dict[str, Any]] = []
    for path in _files(paths):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise click.FileError(str(path), str(exc)) from None
        try:
            reports.append(service.ingest_bytes(claims, path.name, data, source="cli"))
        except service.IngestRejected as exc:
            reports.append(exc.details["report"])
    emit({"files": reports}, lambda: click.echo("\n".join(_line(r) for r in reports) or "no files to ingest"))
    failed = [r for r in reports if r.get("status") == "failed"]
    if failed:
        message = f"{len(failed)} of {len(reports)} file(s) failed; nothing of them was written"
        raise CortexError(422, "ingest_failed", message, "file")
