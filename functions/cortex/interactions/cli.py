"""The `cortex` commands of interactions."""

from __future__ import annotations

import csv
import json
import sys
import time
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from cortex.console import current_state, emit, json_object, table, timestamp, when

# --- interactions --------------------------------------------------------------------------------


@click.group()
def interactions() -> None:
    """Interactions: log and list."""


@interactions.command("log")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option(
    "--type",
    "itype",
    required=True,
    help="email_sent, email_received, ticket_opened, ticket_resolved, call, note, order_placed, "
    "refund_processed, nudge_sent, sequence_started or sequence_completed.",
)
@click.option("--direction", help="inbound or outbound.")
@click.option("--subject")
@click.option("--content", help="The raw content (summarised at once).")
@click.option("--content-file", type=click.File("r"), help="Read the raw content from a file (- for stdin).")
@click.option("--external-id", help="Id in the source system; a repeat is a duplicate, not a new row.")
@click.option("--thread-id")
@click.option("--campaign-id")
@click.option("--metadata", help="A JSON object.")
def interactions_log(
    contact_id: uuid.UUID,
    itype: str,
    direction: str | None,
    subject: str | None,
    content: str | None,
    content_file: IO[str] | None,
    external_id: str | None,
    thread_id: str | None,
    campaign_id: str | None,
    metadata: str | None,
) -> None:
    """Log an interaction with a contact; it is summarised at write time (log_interaction)."""
    if content is not None and content_file is not None:
        raise click.UsageError("give --content or --content-file, not both")
    raw = content_file.read() if content_file is not None else content
    from cortex.interactions import service as interactions_svc  # loads the Anthropic SDK: only when needed

    result = interactions_svc.log_interaction(
        current_state().claims(),
        contact_id=str(contact_id),
        type=itype,
        direction=direction,
        subject=subject,
        raw_content=raw,
        external_id=external_id,
        thread_id=thread_id,
        campaign_id=campaign_id,
        metadata=json_object(metadata, "--metadata"),
    )

    def human() -> None:
        state = "duplicate of an earlier log" if result.get("duplicate") else "logged"
        click.echo(f"{state}: interaction {result['id']} ({result['type']} by {result['agent']})")
        if result.get("summary"):
            click.echo(f"  summary:   {result['summary']}")
            click.echo(f"  sentiment: {result.get('sentiment')}   intent: {result.get('intent')}")
        else:
            click.echo("  summary:   pending (the worker summarises it)")
        if result.get("context_refresh_triggered"):
            click.echo("  context refresh queued")

    emit(result, human)


@interactions.command("list")
@click.option("--contact-id", required=True, type=click.UUID)
@click.option("--agent", "by_agent", help="Only this agent's interactions.")
@click.option("--type", "itype")
@click.option("--since", help="ISO 8601 timestamp.")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--include-raw", is_flag=True, help="Include raw_content.")
def interactions_list(
    contact_id: uuid.UUID,
    by_agent: str | None,
    itype: str | None,
    since: str | None,
    limit: int,
    include_raw: bool,
) -> None:
    """A contact's interactions, newest first (list_interactions)."""
    from cortex.interactions import service as interactions_svc

    result = interactions_svc.list_interactions(
        current_state().claims(),
        contact_id=str(contact_id),
        agent=by_agent,
        type=itype,
        since=timestamp(since),
        limit=limit,
        include_raw=include_raw or None,
    )

    def human() -> None:
        items = [
            {**i, "created_at": when(i.get("created_at")), "summary": i.get("summary") or "(pending)"}
            for i in result["items"]
        ]
        if not items:
            click.echo("no interactions")
            return
        click.echo(
            table(
                items,
                [
                    ("created_at", "date"),
                    ("agent", "agent"),
                    ("type", "type"),
                    ("sentiment", "sentiment"),
                    ("summary", "summary"),
                ],
                width=70,
            )
        )
        if include_raw:
            for i in result["items"]:
                click.echo(f"\n--- {i['id']} {i.get('subject') or ''}\n{i.get('raw_content') or ''}")

    emit(result, human)


# --- cortex import FILE (backfill) ---------------------------------------------------------------

# CSV columns: the import item's fields; key_points and tags are `;`-separated (tags go to
# metadata.tags, interactions have no tags of their own); `metadata` is a JSON object; any
# `metadata.<key>` column adds that key (its cell parsed as JSON when it is JSON, else text).
CSV_FIELDS = (
    "contact_id", "contact_email", "type", "occurred_at", "external_id", "agent", "human_id", "direction",
    "subject", "raw_content", "summary", "key_points", "sentiment", "intent", "campaign_id", "thread_id",
    "metadata", "tags",
)  # fmt: skip


@dataclass
class _Record:
    number: int  # 1-based: JSONL line, CSV data row (the header not counted)
    item: Any  # the item, or backfill.Unsendable when the record cannot be read
    end: int  # bytes of the file read up to the end of this record


def _lines(stream: IO[bytes]) -> Iterator[tuple[str, int]]:
    pos = 0
    for raw in stream:
        pos += len(raw)
        yield raw.decode("utf-8-sig" if pos == len(raw) else "utf-8"), pos


def _jsonl_records(stream: IO[bytes]) -> Iterator[_Record]:
    from cortex.interactions.backfill import Unsendable

    for number, (line, end) in enumerate(_lines(stream), start=1):
        if not line.strip():
            continue
        try:
            item: Any = json.loads(line)
        except ValueError as exc:
            item = Unsendable("item", f"line is not valid JSON: {exc}")
        yield _Record(number, item, end)


def _csv_cell(column: str, cell: str) -> Any:
    if column in ("key_points", "tags"):
        return [p.strip() for p in cell.split(";") if p.strip()]
    if column == "metadata" or column.startswith("metadata."):
        try:
            return json.loads(cell)
        except ValueError:
            if column == "metadata":
                raise
            return cell
    return cell


def _csv_records(stream: IO[bytes]) -> Iterator[_Record]:
    from cortex.interactions.backfill import Unsendable

    lines = _lines(stream)
    end = [0]

    def text() -> Iterator[str]:
        for line, pos in lines:
            end[0] = pos
            yield line

    reader = csv.reader(text())
    header = next(reader, None)
    if not header:
        raise click.UsageError("the CSV file is empty: it needs a header row")
    header = [h.strip() for h in header]
    unknown = [h for h in header if h not in CSV_FIELDS and not h.startswith("metadata.")]
    if unknown:
        raise click.UsageError(
            f"unknown CSV column(s): {', '.join(unknown)}; allowed: {', '.join(CSV_FIELDS)}, metadata.<key>"
        )
    for number, row in enumerate(reader, start=1):
        if not any(c.strip() for c in row):
            continue
        item: Any
        try:
            if len(row) != len(header):
                raise ValueError(f"has {len(row)} cells, the header {len(header)}")
            item = {}
            metadata: dict[str, Any] = {}
            for column, cell in zip(header, row, strict=True):
                if cell == "":
                    continue
                try:
                    value = _csv_cell(column, cell)
                except ValueError as exc:
                    raise ValueError(f"{column} is not valid JSON: {exc}") from None
                if column == "metadata":
                    if not isinstance(value, dict):
                        raise ValueError("metadata must be a JSON object")
                    metadata = {**value, **metadata}
                elif column == "tags":
                    metadata["tags"] = value
                elif column.startswith("metadata."):
                    metadata[column.removeprefix("metadata.")] = value
                else:
                    item[column] = value
            if metadata:
                item["metadata"] = metadata
        except ValueError as exc:
            item = Unsendable("item", f"row {exc}")
        yield _Record(number, item, end[0])


def _checkpoint_path(path: Path) -> Path:
    return path.with_name(path.name + ".cortex-import")


def _fingerprint(path: Path) -> dict[str, Any]:
    stat = path.stat()
    return {"file": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _read_checkpoint(path: Path) -> dict[str, Any] | None:
    checkpoint = _checkpoint_path(path)
    try:
        saved = json.loads(checkpoint.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or {k: saved.get(k) for k in ("file", "size", "mtime_ns")} != _fingerprint(path):
        return None  # another file, or the file changed since: start afresh (idempotency makes it safe)
    return saved


def _write_checkpoint(path: Path, next_record: int, totals: dict[str, Any]) -> None:
    checkpoint = _checkpoint_path(path)
    try:
        tmp = checkpoint.with_name(checkpoint.name + ".tmp")
        tmp.write_text(json.dumps({**_fingerprint(path), "next_record": next_record, "totals": totals}))
        tmp.replace(checkpoint)
    except OSError as exc:  # a read-only folder: the import goes on, re-runs are still safe
        click.echo(f"warning: cannot write checkpoint {checkpoint}: {exc}", err=True)


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["auto", "jsonl", "csv"]), default="auto", show_default=True,
              help="auto: csv for *.csv, else JSON lines.")  # fmt: skip
@click.option("--batch-size", type=click.IntRange(1, 5000), default=1000, show_default=True,
              help="Interactions per SQL call (one transaction each).")  # fmt: skip
@click.option("--resume-from", type=click.IntRange(min=1),
              help="First record to send (JSONL: line number; CSV: data row after the header).")  # fmt: skip
@click.option("--restart", is_flag=True, help="Ignore the checkpoint file and start from the first record.")
@click.option("--no-progress", is_flag=True, help="No progress bar on stderr.")
@click.option("--parallel", type=click.IntRange(1, 8), default=2, show_default=True,
              help="Batches in flight at once, each on its own connection.")  # fmt: skip
def import_interactions(
    file: Path, fmt: str, batch_size: int, resume_from: int | None, restart: bool, no_progress: bool, parallel: int
) -> None:
    """Import interactions from FILE (JSON lines or CSV) in batches (import_interactions).

    Each record needs external_id, occurred_at, type and the contact (contact_id or contact_email);
    a re-run inserts nothing twice. After each batch a checkpoint (FILE.cortex-import) records
    where to go on, so an interrupted import resumes there; it is removed when the file is done.
    Bad records are listed (record number, field, message) and skipped; the exit code is then 1."""
    from cortex.interactions import backfill

    state = current_state()
    claims = state.claims()
    records = _csv_records if (fmt == "csv" or (fmt == "auto" and file.suffix.lower() == ".csv")) else _jsonl_records
    start = resume_from or 1
    totals: dict[str, Any] = {"received": 0, "inserted": 0, "duplicates": 0, "failed": 0, "summaries_queued": 0}
    saved = None if (restart or resume_from) else _read_checkpoint(file)
    if saved is not None:
        start = int(saved["next_record"])
        click.echo(f"resuming {file} at record {start} (checkpoint {_checkpoint_path(file)})", err=True)
    errors: list[dict[str, Any]] = []
    size = file.stat().st_size

    def batches(stream: IO[bytes]) -> Iterator[list[_Record]]:
        batch: list[_Record] = []
        for record in records(stream):
            if record.number < start:
                continue
            batch.append(record)
            if len(batch) >= batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def settle(batch: list[_Record], result: dict[str, Any], bar: Any) -> None:
        for key in totals:
            totals[key] += int(result.get(key) or 0)
        for e in result["errors"]:
            errors.append({"record": batch[e["index"]].number, "field": e["field"], "message": e["message"]})
        _write_checkpoint(file, batch[-1].number + 1, totals)
        bar.update(batch[-1].end - bar.pos)

    show = not no_progress and not state.as_json
    started = time.perf_counter()
    # Up to `parallel` batches are stored at once (the database works on one per connection, and
    # the next batch is read meanwhile); results are settled in file order, so the checkpoint
    # only ever moves past batches that are stored, as do the counts and the progress bar. Two
    # batches naming the same contact queue on its row lock; a re-sent batch is all duplicates.
    in_flight: deque[tuple[list[_Record], Future[dict[str, Any]]]] = deque()
    with (
        open(file, "rb") as stream,
        click.progressbar(length=size, label=f"importing {file.name}", file=sys.stderr, hidden=not show) as bar,
        ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="cortex-import") as pool,
    ):
        for batch in batches(stream):
            in_flight.append((batch, pool.submit(backfill.import_interactions, claims, [r.item for r in batch])))
            if len(in_flight) >= parallel:
                done, future = in_flight.popleft()
                settle(done, future.result(), bar)
        while in_flight:
            done, future = in_flight.popleft()
            settle(done, future.result(), bar)
        bar.update(size - bar.pos)
    seconds = time.perf_counter() - started
    _checkpoint_path(file).unlink(missing_ok=True)
    summary = {**totals, "seconds": round(seconds, 3), "resumed_from": start if start > 1 else None, "errors": errors}

    def human() -> None:
        rate = totals["inserted"] / seconds if seconds > 0 else 0.0
        click.echo(
            f"{totals['inserted']} inserted, {totals['duplicates']} already there, {totals['failed']} failed "
            f"of {totals['received']} in {seconds:.1f} s ({rate:.0f}/s); "
            f"{totals['summaries_queued']} summaries queued for the worker"
        )
        for e in errors[:50]:
            click.echo(f"  record {e['record']}: {e['field']}: {e['message']}")
        if len(errors) > 50:
            click.echo(f"  ... and {len(errors) - 50} more (--json lists all)")

    emit(summary, human)
    if errors:
        raise click.exceptions.Exit(1)
