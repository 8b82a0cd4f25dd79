"""Reading and chunking files for ingest: bytes in, chunks {title, body, section, line} out.

Formats (by extension): md (.md, .markdown), txt, log, csv, json, yaml (.yaml, .yml).
- md: split by heading; a chunk's title is its heading and its body the section's text. A
  section whose text is a bullet list becomes one chunk per top-level bullet (title: the bullet's
  first line, body: the whole bullet), the heading path kept as `section`, because MEMORY.md and
  AGENTS.md keep one fact, decision or rule per bullet. Text before the first heading is a chunk
  titled by its first line.
- txt: paragraphs (blank-line separated), long ones in groups of `LINES_PER_CHUNK` lines.
- log: one chunk per entry (a line, with the indented continuation lines that follow it).
- csv: one chunk per row after the header: title = the first non-empty cell, body = "column: value"
  pairs.
- json / yaml: one chunk per top-level item: an object's keys (title: the key) or an array's
  elements (title: the element's title/name/summary/text field or its first string value). An
  element's `kind` field, when it is a memory kind, is used as given.

A file is refused whole (`IngestFileError`, naming the file) when it is empty, larger than
`MAX_FILE_BYTES`, binary (a NUL byte), not UTF-8 (a UTF-8 or UTF-16 byte order mark is honoured),
of an unknown extension, unparsable (json, yaml, csv), or yields more than `MAX_CHUNKS` chunks.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime
from pathlib import PurePath
from typing import Any, Literal

# Ingest refuses larger files: 1 MiB of text is about 250,000 tokens, far more than any memory
# file; a bigger export belongs in the interactions import.
MAX_FILE_BYTES = 1024 * 1024
# public.ingest_chunks takes at most this many chunks per file (one transaction).
MAX_CHUNKS = 2000
LINES_PER_CHUNK = 20
MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 20000
MAX_SECTION_CHARS = 500

FORMATS: dict[str, str] = {
    ".md": "md",
    ".markdown": "md",
    ".txt": "txt",
    ".text": "txt",
    ".log": "log",
    ".csv": "csv",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
}
MEMORY_KINDS = ("fact", "decision", "event", "preference", "pattern", "goal", "observation")

Reason = Literal["empty", "too_large", "binary", "encoding", "unknown_format", "unparsable", "too_many_chunks"]


class IngestFileError(Exception):
    """A file that cannot be ingested; `reason` is the kind of fault, `status` the HTTP answer."""

    STATUS: Mapping[str, int] = {"too_large": 413, "unknown_format": 415}

    def __init__(self, file_name: str, reason: Reason, message: str, field: str = "file") -> None:
        super().__init__(f"{file_name}: {message}")
        self.file_name = file_name
        self.reason = reason
        self.message = f"{file_name}: {message}"
        self.field = field

    @property
    def status(self) -> int:
        """413 too large, 415 unknown format, else 422."""
        return self.STATUS.get(self.reason, 422)


@dataclass(frozen=True)
class Chunk:
    """One memory-to-be: a title, its body, the heading path it sat under, the line it began on,
    and a kind when the file (or the model) said so."""

    title: str
    body: str = ""
    section: str | None = None
    line: int | None = None
    kind: str | None = None
    classified_by: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The chunk as public.ingest_chunks takes it (nulls left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}


@dataclass(frozen=True)
class Document:
    """A file read and checked: its name, format, text, size and SHA-256."""

    file_name: str
    format: str
    text: str
    size_bytes: int
    sha256: str


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data` in hex: a file's identity in the ingest log."""
    return hashlib.sha256(data).hexdigest()


def file_format(file_name: str) -> str:
    """The ingest format of a file name, or IngestFileError (415) for an unknown extension."""
    suffix = PurePath(file_name).suffix.lower()
    found = FORMATS.get(suffix)
    if found is None:
        known = ", ".join(sorted(FORMATS))
        raise IngestFileError(
            file_name,
            "unknown_format",
            f"unsupported file type {suffix or '(no extension)'!r}; ingest reads {known}",
            "file_name",
        )
    return found


def decode(file_name: str, data: bytes) -> str:
    """The text of a file: UTF-8 (a BOM of UTF-8 or UTF-16 is honoured); IngestFileError when
    it is binary or not valid in its encoding."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise IngestFileError(file_name, "encoding", f"broken UTF-16 at byte {exc.start}") from None
    if b"\x00" in data:
        at = data.index(b"\x00")
        raise IngestFileError(file_name, "binary", f"looks binary (a NUL byte at offset {at}); ingest reads text files")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestFileError(
            file_name, "encoding", f"is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def read(file_name: str, data: bytes) -> Document:
    """Checks a file (extension, size, text) and returns it as a Document; IngestFileError names
    the file and the fault."""
    fmt = file_format(file_name)
    if len(data) > MAX_FILE_BYTES:
        raise IngestFileError(
            file_name, "too_large", f"is {len(data)} bytes; ingest takes files of at most {MAX_FILE_BYTES} bytes"
        )
    text = decode(file_name, data)
    if not text.strip():
        raise IngestFileError(file_name, "empty", "is empty; there is nothing to ingest")
    return Document(file_name, fmt, text, len(data), sha256_hex(data))


def chunk(doc: Document) -> list[Chunk]:
    """The chunks of a document in its format; IngestFileError when it cannot be parsed or has
    no content or too many chunks."""
    splitters = {"md": chunk_markdown, "txt": chunk_text, "log": chunk_log, "csv": chunk_csv}
    try:
        if doc.format in splitters:
            chunks = splitters[doc.format](doc.text)
        else:
            chunks = chunk_structured(load_structured(doc), doc.format)
        chunks = [c for part in chunks for c in _fit(part)]
    except csv.Error as exc:
        raise IngestFileError(doc.file_name, "unparsable", f"is not valid CSV: {exc}") from None
    except RecursionError:
        raise IngestFileError(doc.file_name, "unparsable", "nests too deeply to read") from None
    if not chunks:
        raise IngestFileError(doc.file_name, "empty", "has no content to ingest")
    if len(chunks) > MAX_CHUNKS:
        raise IngestFileError(
            doc.file_name, "too_many_chunks", f"makes {len(chunks)} chunks; at most {MAX_CHUNKS} per file: split it"
        )
    return chunks


# --- titles and sizes ------------------------------------------------------------------------------


def cut(text: str, limit: int) -> str:
    """`text` on one line, at most `limit` characters, cut on a word boundary (with an ellipsis)."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:-") + "…"


def _fit(c: Chunk) -> Iterator[Chunk]:
    # Titles of at most MAX_TITLE_CHARS; a body over MAX_BODY_CHARS becomes numbered parts.
    title = cut(c.title, MAX_TITLE_CHARS) or cut(c.body, MAX_TITLE_CHARS)
    if not title:
        return
    section = cut(c.section, MAX_SECTION_CHARS) if c.section else None
    body = c.body.strip()
    if body == title:
        body = ""
    if len(body) <= MAX_BODY_CHARS:
        yield Chunk(title, body, section, c.line, c.kind, c.classified_by)
        return
    parts = [body[i : i + MAX_BODY_CHARS] for i in range(0, len(body), MAX_BODY_CHARS)]
    for n, part in enumerate(parts, 1):
        yield Chunk(cut(f"{title} (part {n})", MAX_TITLE_CHARS), part, section, c.line, c.kind, c.classified_by)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# --- markdown -------------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_BULLET = re.compile(r"^([-*+]|\d+[.)])\s+(.*)$")


def chunk_markdown(text: str) -> list[Chunk]:
    """Markdown by heading (see the module docstring); bullet-list sections one chunk per bullet."""
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []
    title: str | None = None
    start = 1
    lines: list[str] = []
    fenced = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        section = " > ".join(t for _, t in path) or None
        if title is None:
            if body:
                chunks.extend(_markdown_section(_first_line(body), body, None, start))
        elif body or len(path) > 0:
            chunks.extend(_markdown_section(title, body, section, start))

    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading is None:
            lines.append(line)
            continue
        flush()
        level, title = len(heading.group(1)), heading.group(2).strip()
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        start, lines = number, []
    flush()
    # A heading with neither text nor sub-headings is no memory; one with sub-headings is their section.
    return [c for c in chunks if c.body or not _has_children(c, chunks)]


def _has_children(c: Chunk, chunks: Sequence[Chunk]) -> bool:
    return any(o.section and c.section and o.section.startswith(c.section + " > ") for o in chunks)


def _markdown_section(title: str, body: str, section: str | None, start: int) -> list[Chunk]:
    bullets = _bullets(body)
    if bullets is None:
        return [Chunk(title, body, section, start)] if body or section else []
    return [
        Chunk(_first_line(item), item, section or title, start + offset)
        for offset, item in bullets
        if _first_line(item)
    ]


def _bullets(body: str) -> list[tuple[int, str]] | None:
    """The top-level items of a body that is a bullet list (an intro line allowed), with their
    line offsets; None when the body is prose."""
    items: list[tuple[int, list[str]]] = []
    prose = 0
    for offset, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        match = _BULLET.match(line)
        if match and not line[0].isspace():
            items.append((offset, [match.group(2).strip()]))
        elif items and line[0].isspace():
            items[-1][1].append(line.strip())
        else:
            prose += 1
    if not items or prose > 1:
        return None
    return [(offset, "\n".join(parts)) for offset, parts in items]


# --- lines ----------------------------------------------------------------------------------------


def chunk_text(text: str) -> list[Chunk]:
    """Plain text: paragraphs, each cut into groups of at most LINES_PER_CHUNK lines."""
    chunks: list[Chunk] = []
    paragraph: list[tuple[int, str]] = []

    def flush() -> None:
        for i in range(0, len(paragraph), LINES_PER_CHUNK):
            group = paragraph[i : i + LINES_PER_CHUNK]
            body = "\n".join(line for _, line in group).strip()
            chunks.append(Chunk(_first_line(body), body, None, group[0][0]))
        paragraph.clear()

    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            paragraph.append((number, line.rstrip()))
        else:
            flush()
    flush()
    return chunks


def chunk_log(text: str) -> list[Chunk]:
    """A log: one chunk per entry (a line and the indented lines continuing it)."""
    entries: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if entries and line[0].isspace():
            entries[-1][1].append(line.strip())
        else:
            entries.append((number, [line.strip()]))
    return [Chunk(lines[0], "\n".join(lines), None, number) for number, lines in entries]


def chunk_csv(text: str) -> list[Chunk]:
    """CSV with a header row: one chunk per data row."""
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    if len(rows) < 2:
        return []
    header = [h.strip() or f"column {i + 1}" for i, h in enumerate(rows[0])]
    chunks = []
    for n, row in enumerate(rows[1:], 2):
        cells = [(header[i] if i < len(header) else f"column {i + 1}", v.strip()) for i, v in enumerate(row)]
        filled = [(k, v) for k, v in cells if v]
        if not filled:
            continue
        kind = next((v.lower() for k, v in filled if k.lower() == "kind" and v.lower() in MEMORY_KINDS), None)
        rest = [(k, v) for k, v in filled if not (k.lower() == "kind" and kind)]
        title = next((v for k, v in rest if k.lower() in _TITLE_KEYS), rest[0][1] if rest else "")
        body = "\n".join(f"{k}: {v}" for k, v in rest)
        chunks.append(Chunk(title, body, None, n, kind, "file" if kind else None))
    return chunks


# --- json and yaml --------------------------------------------------------------------------------

_TITLE_KEYS = ("title", "name", "summary", "text", "subject")


def load_structured(doc: Document) -> Any:
    """The data of a json or yaml document; IngestFileError (unparsable) naming the line."""
    if doc.format == "json":
        try:
            return json.loads(doc.text)
        except (ValueError, RecursionError) as exc:
            raise IngestFileError(doc.file_name, "unparsable", f"is not valid JSON: {exc}") from None
    try:
        import yaml  # PyYAML (a dependency of Cortex)
    except ImportError:  # pragma: no cover - PyYAML is installed with Cortex
        raise IngestFileError(doc.file_name, "unparsable", "YAML needs PyYAML (pip install PyYAML)") from None
    try:
        return yaml.safe_load(doc.text)
    except (yaml.YAMLError, RecursionError) as exc:
        raise IngestFileError(doc.file_name, "unparsable", f"is not valid YAML: {exc}") from None


def render(value: Any) -> str:
    """A JSON/YAML value as readable text: strings as they are, lists one item a line, objects
    as "key: value" lines, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, date | datetime):  # YAML reads 2024-09-01 as a date
        return value.isoformat()
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return "\n".join(f"- {render(v)}" for v in value)
    if isinstance(value, dict):
        return "\n".join(
            f"{k}: {render(v) if not isinstance(v, dict | list) else _compact(v)}" for k, v in value.items()
        )
    return _compact(value)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


def chunk_structured(data: Any, fmt: str) -> list[Chunk]:
    """Top-level items of a json/yaml value: an object's entries or an array's elements; a
    scalar document is one chunk."""
    if isinstance(data, dict):
        return [_item(str(key), value) for key, value in data.items()]
    if isinstance(data, list):
        return [_element(value, n) for n, value in enumerate(data)]
    if data is None:
        return []
    return [Chunk(render(data), render(data))]


def _item(key: str, value: Any) -> Chunk:
    if isinstance(value, dict):
        inner = _element(value, None)
        return Chunk(inner.title if inner.title != key else key, inner.body, key, None, inner.kind, inner.classified_by)
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and value:
        return Chunk(key, render(value), None)
    body = render(value)
    return Chunk(key if len(body) > MAX_TITLE_CHARS or "\n" in body else f"{key}: {body}", body, None)


def _element(value: Any, index: int | None) -> Chunk:
    if not isinstance(value, dict):
        text = render(value)
        return Chunk(_first_line(text), text)
    kind = value.get("kind")
    kind = kind.lower() if isinstance(kind, str) and kind.lower() in MEMORY_KINDS else None
    fields = {k: v for k, v in value.items() if not (k == "kind" and kind)}
    title_key = next((k for k in fields if str(k).lower() in _TITLE_KEYS and isinstance(fields[k], str)), None)
    if title_key is None:
        title_key = next((k for k, v in fields.items() if isinstance(v, str) and v.strip()), None)
    title = str(fields[title_key]) if title_key is not None else f"item {index}"
    rest = {k: v for k, v in fields.items() if k != title_key}
    body_key = next((k for k in rest if str(k).lower() in ("body", "description", "details", "content")), None)
    body = render(rest.pop(body_key)) if body_key is not None and isinstance(rest.get(body_key), str) else ""
    if rest:
        body = "\n".join(p for p in (body, render(rest)) if p)
    return Chunk(title, body, None, None, kind, "file" if kind else None)
