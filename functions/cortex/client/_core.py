"""The SDK's machinery: an `Op` (one route call, built and checked by a capability module), the
sync and async transports that send it with retries, and the two adapters that turn an op builder
into a typed method of `Client` and of `AsyncClient`.

A capability module writes each route once, as a function returning `Op[ResponseModel]`; its
`Methods` and `AsyncMethods` classes expose it with `method(build)` and `amethod(build)`, which
keep the builder's signature and docstring and type the result (`T` or `Awaitable[T]`).

Retries: GET, PUT and DELETE are retried on a dropped connection, a timeout, 429 (after its
Retry-After), 502, 503 and 504, with exponential backoff and jitter. POST and PATCH are retried
only when the connection was never made (nothing was sent): the server has no Idempotency-Key,
so a second POST could write twice.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, cast
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from cortex.client.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    RateLimitError,
    from_response,
    from_validation,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")

API_PREFIX = "/api/v1"
DEFAULT_URL = "http://127.0.0.1:8080"
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})
RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class Op(Generic[T]):
    """One call of one route: method, path under /api/v1, query, JSON body and the response's parser."""

    route: str
    method: str
    path: str
    parse: Callable[[Any], T]
    query: Mapping[str, Any] | None = None
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # The answer is server-sent events (`data: {json}` lines): parse gets the list of their JSON.
    events: bool = False


def checked(model: type[M], given: M | None, fields: Mapping[str, Any], where: str) -> M:
    """`given`, or `fields` validated by the server's own model: InvalidRequestError naming the
    field when they do not fit (nothing is sent)."""
    if given is not None and fields:
        raise TypeError(f"pass either a {model.__name__} or keyword fields, not both")
    if isinstance(given, model):
        return given
    try:  # a plain dict in the model's place is read as its fields
        return model.model_validate(given if given is not None else dict(fields))
    except ValidationError as exc:
        raise from_validation(exc, where) from None


def dump(model: BaseModel | None) -> dict[str, Any] | None:
    """The fields the caller set, as JSON values (what the server's model reads back)."""
    if model is None:
        return None
    dumped: dict[str, Any] = model.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return dumped


def query_of(model: BaseModel) -> dict[str, Any]:
    """Query parameters: the fields set, JSON-rendered; booleans as true/false, lists comma-joined."""
    out: dict[str, Any] = {}
    for key, value in (dump(model) or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, list):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = value
    return out


def segment(value: Any) -> str:
    """One path segment, percent-encoded (a phone's `+`, an agent name)."""
    return quote(str(value), safe="")


def sse_data(text: str) -> list[Any]:
    """The JSON of each `data:` line of a server-sent event stream, up to `data: [DONE]`."""
    items = []
    for line in text.splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload == "[DONE]":
                break
            items.append(json.loads(payload))
    return items


def parser(model: type[M]) -> Callable[[Any], M]:
    """The response parser of a route: the server's response model."""
    return model.model_validate


# --- retries ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait: `max_retries` more attempts, backoff doubling from
    `backoff` seconds (with jitter) up to `max_backoff`; a Retry-After longer than `max_wait`
    is not waited for (the RateLimitError is raised at once)."""

    max_retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0
    max_wait: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before attempt number `attempt + 1`."""
        if retry_after is not None:
            return retry_after
        base: float = min(self.max_backoff, self.backoff * 2**attempt)
        return base * (0.5 + random.random() / 2)


def _retry_wait(op: Op[Any], error: APIError, policy: RetryPolicy, attempt: int) -> float | None:
    """Seconds to wait before retrying after `error`, or None when it must not be retried."""
    if op.method not in IDEMPOTENT or error.status not in RETRY_STATUSES or attempt >= policy.max_retries:
        return None
    retry_after = error.retry_after if isinstance(error, RateLimitError) else None
    if retry_after is not None and retry_after > policy.max_wait:
        return None
    return policy.delay(attempt, retry_after)


def _transport_retryable(op: Op[Any], exc: httpx.TransportError) -> bool:
    # A connection never made sent nothing, so even a POST may go again.
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) or op.method in IDEMPOTENT


def _transport_error(op: Op[Any], base_url: str, exc: httpx.TransportError, attempts: int) -> APIConnectionError:
    tries = f" (after {attempts} attempts)" if attempts > 1 else ""
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(
            f"{op.method} {base_url}{op.path}: no answer in time{tries} ({type(exc).__name__}); "
            "raise the client's timeout or check the server's load"
        )
    return APIConnectionError(
        f"cannot reach Cortex at {base_url}{tries}: {type(exc).__name__}: {exc or 'connection failed'}; "
        "check base_url and that the server is running"
    )


# --- the transports --------------------------------------------------------------------------------


def _base_url(base_url: str | None) -> str:
    url = (base_url or os.environ.get("CORTEX_URL") or DEFAULT_URL).rstrip("/")
    return url if url.endswith(API_PREFIX) else url + API_PREFIX


def _headers(api_key: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    key = api_key if api_key is not None else os.environ.get("CORTEX_API_KEY")
    out = {"Accept": "application/json", "User-Agent": "cortex-client"}
    if key:
        out["Authorization"] = f"Bearer {key}"
    out.update(headers or {})
    return out


def _result(op: Op[T], response: httpx.Response) -> T:
    if response.status_code >= 400:
        raise from_response(response)
    try:
        data = sse_data(response.text) if op.events else response.json()
    except ValueError:  # not Cortex answering (a proxy's page): say so rather than fail to parse
        raise APIError(
            response.status_code,
            "invalid_response",
            f"{op.method} {op.path}: the answer is not JSON ({response.headers.get('content-type', 'no type')})",
            request_id=response.headers.get("x-request-id"),
            hint="check that base_url points at Cortex",
        ) from None
    return op.parse(data)


class _Base:
    """Settings both clients share."""

    def __init__(
        self,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        backoff: float,
        headers: Mapping[str, str] | None,
    ) -> None:
        self.base_url = _base_url(base_url)
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff)
        self._timeout = timeout
        self._headers = _headers(api_key, headers)

    def _request(self, op: Op[Any]) -> dict[str, Any]:
        """The keyword arguments of httpx's `request` for `op`."""
        return {
            "method": op.method,
            "url": self.base_url + op.path,
            "headers": {**self._headers, **op.headers},
            "params": op.query or None,
            "json": op.body,
            "timeout": self._timeout,
        }

    def _settle(
        self, op: Op[Any], outcome: httpx.Response | httpx.TransportError, attempt: int
    ) -> tuple[float | None, Any]:
        """What one attempt's outcome means, the same for both clients: (None, result) when done,
        (seconds, None) to retry after a wait; a typed error when it may not be retried."""
        if isinstance(outcome, httpx.TransportError):
            if attempt < self.retry.max_retries and _transport_retryable(op, outcome):
                return self.retry.delay(attempt, None), None
            raise _transport_error(op, self.base_url, outcome, attempt + 1) from outcome
        try:
            return None, _result(op, outcome)
        except APIError as error:
            wait = _retry_wait(op, error, self.retry, attempt)
            if wait is None:
                raise
            return wait, None


class SyncTransport(_Base):
    """The synchronous client's connection (httpx.Client) and retry loop."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout, max_retries, backoff, headers)
        self._http = http_client or httpx.Client(timeout=timeout)
        self._owns_http = http_client is None

    def _run(self, op: Op[T]) -> T:
        """Sends `op`, retrying what may be retried; its parsed result or a typed error."""
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = self._http.request(**self._request(op))
            except httpx.TransportError as exc:
                outcome = exc
            wait, result = self._settle(op, outcome, attempt)
            if wait is None:
                return cast(T, result)
            time.sleep(wait)
            attempt += 1

    def close(self) -> None:
        """Closes the connection pool (when the client made it)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


S = TypeVar("S", bound=SyncTransport)
A = TypeVar("A", bound="AsyncTransport")


class AsyncTransport(_Base):
    """The asynchronous client's connection (httpx.AsyncClient) and retry loop."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout, max_retries, backoff, headers)
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http_client is None

    async def _arun(self, op: Op[T]) -> T:
        """Sends `op`, retrying what may be retried; its parsed result or a typed error."""
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = await self._http.request(**self._request(op))
            except httpx.TransportError as exc:
                outcome = exc
            wait, result = self._settle(op, outcome, attempt)
            if wait is None:
                return cast(T, result)
            await asyncio.sleep(wait)
            attempt += 1

    async def aclose(self) -> None:
        """Closes the connection pool (when the client made it)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


# --- builders to methods -------------------------------------------------------------------------


class Runner(Protocol):
    """Anything that runs an op synchronously (the Client)."""

    def _run(self, op: Op[T]) -> T: ...


class AsyncRunner(Protocol):
    """Anything that runs an op asynchronously (the AsyncClient)."""

    async def _arun(self, op: Op[T]) -> T: ...


def method(build: Callable[P, Op[T]]) -> Callable[Concatenate[Runner, P], T]:
    """A Client method from an op builder: same arguments and docstring, returns the parsed result."""

    @functools.wraps(build)
    def call(self: Runner, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(build(*args, **kwargs))

    return call


def amethod(build: Callable[P, Op[T]]) -> Callable[Concatenate[AsyncRunner, P], Coroutine[Any, Any, T]]:
    """An AsyncClient method from an op builder: same arguments and docstring, awaits the result."""

    @functools.wraps(build)
    async def call(self: AsyncRunner, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._arun(build(*args, **kwargs))

    return call
