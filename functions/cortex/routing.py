"""The HTTP edge's vocabulary: a capability declares its routes on a `Router`; the app mounts it.

A handler receives a `Call` (the caller's claims and the validated path, query and body) and
returns a `Reply`. Handlers hold no business rule: they call one SQL function (or a service that
calls the model first) and SQL decides. The dispatcher (`cortex.app`) and the OpenAPI document
(`cortex.openapi`) both read the same `Route` records, so they cannot drift.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from cortex.errors import CortexError
from cortex.schemas import MAX_JSON_DEPTH

API_PREFIX = "/api/v1"
# raw_content may be 1,000,000 characters of any script (up to 4 bytes each), plus the rest.
MAX_BODY_BYTES = 8 * 1024 * 1024
# Nesting a request body may have before it is parsed at all: the body object, a JSON field
# (at most schemas.MAX_JSON_DEPTH, which validation names) and some slack. Python's decoder
# recurses once per level, so a deeper body is refused before it is decoded.
MAX_BODY_DEPTH = 40

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call:
    """One matched request: the caller's claims and the validated path, query and body."""

    request: Request
    claims: dict[str, str]
    path: BaseModel | None
    query: BaseModel | None
    body: BaseModel | None

    def path_as(self, model: type[M]) -> M:
        """The validated path parameters, typed."""
        assert isinstance(self.path, model)
        return self.path

    def query_as(self, model: type[M]) -> M:
        """The validated query parameters, typed."""
        assert isinstance(self.query, model)
        return self.query

    def body_as(self, model: type[M]) -> M:
        """The validated body, typed."""
        assert isinstance(self.body, model)
        return self.body


@dataclass(frozen=True)
class RawJSON:
    """A body that is JSON text already (as SQL rendered it): sent as is, never parsed in Python."""

    text: str


@dataclass(frozen=True)
class Stream:
    """A body sent while it is produced (server-sent events): the chunks of an async iterator.
    A client that disconnects cancels the iterator, so whatever it drives (a model stream) stops."""

    chunks: AsyncIterator[bytes]
    media_type: str = "text/event-stream"


@dataclass(frozen=True)
class Page:
    """A body that is a document, not JSON (an HTML page, a vendored script): sent as is."""

    text: str
    media_type: str = "text/html; charset=utf-8"


@dataclass(frozen=True)
class Reply:
    """What a handler answers: a status and a JSON-able body."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Awaitable[Reply]]
# Turns a raw body and its Content-Type into the data the body model validates (default: JSON).
BodyParser = Callable[[bytes, str], Any]


@dataclass(frozen=True)
class Route:
    """One operation of the API; the dispatcher and the OpenAPI document both read these."""

    method: str
    paths: tuple[str, ...]
    name: str
    handler: Handler
    summary: str
    tag: str
    responses: Mapping[int, type[BaseModel]]
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    path: type[BaseModel] | None = None
    auth: bool = True
    errors: tuple[int, ...] = ()
    description: str = ""
    body_parser: BodyParser | None = None
    body_media_types: tuple[str, ...] = ("application/json",)
    # What a 200 is when it is not JSON: a page (text/html), an event stream (text/event-stream).
    media_type: str = "application/json"


class Router:
    """The routes of one capability, under `/api/v1/<prefix>`; the app mounts it with one line."""

    def __init__(self, tag: str, prefix: str | None = None) -> None:
        self.tag = tag
        self.prefix = f"{API_PREFIX}/{tag if prefix is None else prefix}".rstrip("/")
        self.routes: list[Route] = []

    def route(
        self,
        method: str,
        path: str,
        *,
        name: str,
        summary: str,
        responses: Mapping[int, type[BaseModel]],
        body: type[BaseModel] | None = None,
        query: type[BaseModel] | None = None,
        path_params: type[BaseModel] | None = None,
        auth: bool = True,
        errors: tuple[int, ...] = (),
        description: str = "",
        absolute: tuple[str, ...] = (),
        body_parser: BodyParser | None = None,
        body_media_types: tuple[str, ...] = ("application/json",),
        media_type: str = "application/json",
    ) -> Callable[[Handler], Handler]:
        """Declares `handler` as `METHOD <prefix><path>` (plus any `absolute` alias paths)."""

        def register(handler: Handler) -> Handler:
            self.routes.append(
                Route(
                    method,
                    (*absolute, f"{self.prefix}{path}"),
                    name,
                    handler,
                    summary,
                    self.tag,
                    responses,
                    body,
                    query,
                    path_params,
                    auth,
                    errors,
                    description,
                    body_parser,
                    body_media_types,
                    media_type,
                )
            )
            return handler

        return register


# --- validation and bodies ------------------------------------------------------------------------


def _location(loc: tuple[int | str, ...], where: str) -> str:
    return ".".join(str(p) for p in loc) or where


def _nul_at(data: Any, where: str) -> str | None:
    """The dotted location of the first NUL character in a key or string of `data`, if any."""
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return ".".join(loc) or where
        elif isinstance(node, dict):
            for key, value in node.items():
                if "\x00" in key:
                    return ".".join((*loc, key.replace("\x00", "\\u0000")))
                stack.append((value, (*loc, key)))
        elif isinstance(node, list):
            stack.extend((value, (*loc, str(i))) for i, value in enumerate(node))
    return None


def reject_nul(data: Any, where: str) -> None:
    """422 naming the field when a key or string of `data` holds NUL (U+0000), which Postgres
    text cannot store: every path, query and body value passes here before validation."""
    at = _nul_at(data, where)
    if at is not None:
        raise CortexError(
            422,
            "validation_error",
            f"{at}: NUL characters (\\u0000) are not allowed",
            at,
            "remove the NUL characters",
            None,
            {"in": where, "errors": [{"field": at, "message": "NUL characters are not allowed", "type": "nul"}]},
        )


def validate(model: type[M], data: Any, where: str) -> M:
    """`data` as `model`, or a 422 naming the first offending field and listing all."""
    reject_nul(data, where)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [
            {"field": _location(tuple(e["loc"]), where), "message": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        first = errors[0]
        hint = None
        if first["type"] == "extra_forbidden":
            noun = {"body": "fields", "query": "query parameters"}.get(where, "parameters")
            hint = f"allowed {noun}: {', '.join(model.model_fields)}"
        raise CortexError(
            422,
            "validation_error",
            f"{first['field']}: {first['message']}",
            first["field"],
            hint,
            None,
            {"in": where, "errors": errors},
        ) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _too_large(limit: int) -> CortexError:
    return CortexError(413, "payload_too_large", f"request body exceeds {limit} bytes", "body")


async def read_body(request: Request, limit: int | None = None) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` bytes: a declared
    Content-Length over the limit is refused before reading, and a chunked body is counted while
    it streams in, so an oversized body is never buffered whole."""
    limit = MAX_BODY_BYTES if limit is None else limit
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


def json_nesting(raw: bytes) -> int:
    """How deep the JSON text `raw` nests (`{}` is 1), in linear time and without recursion:
    strings are skipped, then brackets counted (malformed text gives some number; the parser
    refuses it later)."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    if brackets.count(b"[") + brackets.count(b"{") <= 1:
        return len(brackets) and 1
    steps = memoryview(brackets.translate(_BRACKET_STEP)).cast("b")
    return max(accumulate(steps))


def _too_deep(limit: int) -> CortexError:
    return CortexError(
        422,
        "too_deep",
        f"request body is nested deeper than {limit} levels",
        "body",
        f"JSON values may nest at most {MAX_JSON_DEPTH} levels",
    )


def parse_json(raw: bytes, max_depth: int | None = None) -> Any:
    """A JSON body, or 400 naming `body` (empty, malformed, NaN/Infinity, bad UTF-8), or 422
    naming `body` when it nests deeper than `max_depth` (MAX_BODY_DEPTH) levels."""
    if not raw.strip():
        raise CortexError(400, "malformed_json", "request body is empty; send a JSON object", "body")
    limit = MAX_BODY_DEPTH if max_depth is None else max_depth
    if raw.count(b"[") + raw.count(b"{") > limit and json_nesting(raw) > limit:
        raise _too_deep(limit)
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except RecursionError:  # not reached after the scan above; never a 500 all the same
        raise _too_deep(limit) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
        raise CortexError(
            400,
            "malformed_json",
            f"request body is not valid JSON: {exc}",
            "body",
            "send a JSON object with Content-Type: application/json",
        ) from None
