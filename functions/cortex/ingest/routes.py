"""HTTP routes of ingest: `POST /api/v1/ingest` (JSON or multipart/form-data), `GET /api/v1/ingest`
and `GET /api/v1/ingest/<id>` (the log)."""

from __future__ import annotations

import base64
import email.parser
import email.policy
from typing import Any

from starlette.concurrency import run_in_threadpool

from cortex import db
from cortex.errors import CortexError
from cortex.ingest import service
from cortex.ingest.models import IngestFile, IngestFileList, IngestListQuery, IngestPath, IngestReport, IngestUpload
from cortex.routing import Call, Reply, Router, parse_json

router = Router("ingest")

MEDIA_TYPES = ("application/json", "multipart/form-data")


def parse_upload_body(raw: bytes, content_type: str) -> Any:
    """The upload as IngestUpload's fields: a JSON object, or multipart/form-data whose `file`
    part (its filename and bytes; or text fields file_name and content) is the file and whose
    optional `agent` field names the agent. 415 for any other Content-Type."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in ("", "application/json"):
        return parse_json(raw)
    if media != "multipart/form-data":
        raise CortexError(415, "unsupported_media_type",
                          f"Content-Type {media} is not accepted here", "body",
                          "send multipart/form-data with a file field, or JSON {file_name, content}")  # fmt: skip
    return _multipart(raw, content_type)


def _multipart(raw: bytes, content_type: str) -> dict[str, Any]:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart() or message.get_param("boundary") is None:
        raise CortexError(400, "malformed_multipart", "the multipart body has no boundary or no parts", "body")
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if name == "file":
            fields.setdefault("file_name", part.get_filename() or "")
            fields["content_base64"] = base64.b64encode(data).decode("ascii")
        elif name in ("file_name", "agent", "content"):
            # A text field: file_name (overrides the part's filename), agent, or content as text.
            text = data.decode("utf-8", "replace")
            fields[str(name)] = text
    if "content_base64" not in fields and "content" not in fields:
        raise CortexError(422, "validation_error", "file: a multipart upload needs a file field", "file",
                          'send the file as a part named "file" (curl -F file=@MEMORY.md)')  # fmt: skip
    return fields


_INGEST_DOC = (
    "The file is read and checked (extension md, txt, json, yaml, csv or log: 415 naming file_name "
    "otherwise; at most 1 MiB: 413 naming file; binary, broken encoding, empty or unparsable: 422 "
    "naming file), split into chunks (markdown by heading, bullets one by one; the others by lines "
    "or top-level items), each chunk classified (keyword heuristics plus a date rule, or the model "
    "when configured) and written through remember in one transaction: duplicates of existing "
    "memories are reinforced, not re-created, and nothing is half ingested. 201 with the report; "
    "200 when this content was already ingested for the agent (nothing written). A refused file is "
    "logged as failed and its report is in the error's `report`."
)


@router.route(
    "POST", "", name="ingest_file", summary="Ingest a file (markdown, text, JSON, YAML, CSV, log) into memories",
    responses={201: IngestReport, 200: IngestReport}, body=IngestUpload, errors=(404, 413, 415),
    body_parser=parse_upload_body, body_media_types=MEDIA_TYPES, description=_INGEST_DOC,
)  # fmt: skip
async def ingest_file(call: Call) -> Reply:
    """Ingests one uploaded file."""
    upload = call.body_as(IngestUpload)
    report = await run_in_threadpool(
        service.ingest_bytes, call.claims, upload.file_name, upload.data(), agent=upload.agent, source="api"
    )
    return Reply(200 if report.get("already_ingested") else 201, report)


@router.route(
    "GET", "", name="list_ingest_files", summary="The ingest log, newest first", responses={200: IngestFileList},
    query=IngestListQuery,
)  # fmt: skip
async def list_ingest_files(call: Call) -> Reply:
    """Files ingested or refused, with their reports (without node lists)."""
    query = call.query_as(IngestListQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, await db.acall_as(call.claims, "list_ingest_files", **query))


@router.route(
    "GET", "/<id>", name="get_ingest_file", summary="One ingested file and its full report",
    responses={200: IngestFile}, path_params=IngestPath, errors=(404,),
)  # fmt: skip
async def get_ingest_file(call: Call) -> Reply:
    """A file of the ingest log with every chunk's memory."""
    file_id = str(call.path_as(IngestPath).id)
    return Reply(200, await db.acall_as(call.claims, "get_ingest_file", file_id=file_id))
