"""The HTTP API (seed 000's `/api/v1`), one WSGI-style function for functions-framework.

`handle(request)` matches the path against one route table (werkzeug `Map`), authenticates the
caller (`cortex.auth`), validates path, query and body with the pydantic models of
`cortex.models`, and calls the service function of `cortex.contacts`, `cortex.interactions` or
`cortex.context`, which opens its own transaction as the caller. Handlers hold no business rule:
SQL decides, and its errors (SQLSTATE, field, hint) come back as JSON
`{"error": {"code", "message", "field", "hint", "sqlstate", ...}}`. The OpenAPI document at
`/api/v1/openapi.json` is generated from the same route table and models, so it cannot drift.

Served by `functions-framework --source functions/main.py --target api`, which routes every
path and method to this one function (gunicorn, one worker, 4 threads per core by default).
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import json
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TypeVar

import anthropic
import flask
import psycopg
import psycopg_pool
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import MethodNotAllowed, NotFound
from werkzeug.routing import Map, RequestRedirect, Rule

from cortex import contacts, context, db, handoffs, interactions, migrate, usage
from cortex.auth import authenticate
from cortex.config import get_settings
from cortex.errors import CortexError
from cortex.models import (
    BudgetCheck,
    BudgetCheckPath,
    BudgetCheckQuery,
    Contact,
    ContactCreate,
    ContactCreated,
    ContactList,
    ContactListQuery,
    ContactPatch,
    ContactPath,
    ContextPath,
    ContextQuery,
    ContextRefresh,
    ErrorResponse,
    Handoff,
    HandoffCreate,
    HandoffCreated,
    HandoffList,
    HandoffListQuery,
    HandoffPath,
    HandoffStatusChange,
    Health,
    HealthDeep,
    HealthReady,
    InteractionCreate,
    InteractionList,
    InteractionListQuery,
    InteractionLogged,
    PendingHandoffsQuery,
    UsageRecord,
    UsageRecorded,
    UsageSummary,
    UsageSummaryQuery,
    WorkingContext,
)

logger = logging.getLogger("cortex.api")

API_PREFIX = "/api/v1"
MAX_BODY_BYTES = 8 * 1024 * 1024  # raw_content may be 1,000,000 characters of any script
READY_TIMEOUT_SECONDS = 3.0
DEEP_LLM_TIMEOUT_SECONDS = 10.0
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call:
    """One matched request: the caller's claims and the validated path, query and body."""

    request: flask.Request
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
class Reply:
    """What a handler answers: a status and a JSON-able body."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[Call], Reply]


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


# --- handlers (each one call into a service module) ----------------------------------------------


def _create_contact(call: Call) -> Reply:
    body = call.body_as(ContactCreate)
    result = contacts.upsert_contact(call.claims, **body.model_dump(exclude_none=True))
    return Reply(201 if result.get("created") else 200, result)


def _list_contacts(call: Call) -> Reply:
    query = call.query_as(ContactListQuery)
    return Reply(200, contacts.search_contacts(call.claims, **query.model_dump(exclude_none=True)))


def _get_contact(call: Call) -> Reply:
    return Reply(200, contacts.get_contact(call.claims, str(call.path_as(ContactPath).id)))


def _patch_contact(call: Call) -> Reply:
    # Only the keys the caller sent: a key with null clears the field, an absent key keeps it.
    patch = call.body_as(ContactPatch).model_dump(mode="json", exclude_unset=True)
    return Reply(200, contacts.update_contact(call.claims, str(call.path_as(ContactPath).id), patch))


def _log_interaction(call: Call) -> Reply:
    body = call.body_as(InteractionCreate)
    result = interactions.log_interaction(call.claims, **body.model_dump(exclude_none=True))
    return Reply(200 if result.get("duplicate") else 201, result)


def _list_interactions(call: Call) -> Reply:
    query = call.query_as(InteractionListQuery)
    return Reply(200, interactions.list_interactions(call.claims, **query.model_dump(exclude_none=True)))


def _get_context(call: Call) -> Reply:
    query = call.query_as(ContextQuery)
    contact_id = str(call.path_as(ContextPath).contact_id)
    return Reply(200, context.get_context(call.claims, contact_id, level=query.level, refresh=query.refresh))


def _refresh_context(call: Call) -> Reply:
    result = context.refresh_context(call.claims, str(call.path_as(ContextPath).contact_id))
    # Generation failed: the cached context stays, a retry is queued (seed 000).
    return Reply(200 if result.get("regenerated") else 202, result)


def _create_handoff(call: Call) -> Reply:
    body = call.body_as(HandoffCreate).model_dump(mode="json", exclude_none=True)
    return Reply(201, handoffs.create_handoff(call.claims, **body))


def _pending_handoffs(call: Call) -> Reply:
    query = call.query_as(PendingHandoffsQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, handoffs.get_pending_handoffs(call.claims, **query))


def _list_handoffs(call: Call) -> Reply:
    query = call.query_as(HandoffListQuery).model_dump(mode="json", exclude_none=True)
    return Reply(200, handoffs.list_handoffs(call.claims, **query))


def _get_handoff(call: Call) -> Reply:
    return Reply(200, handoffs.get_handoff(call.claims, str(call.path_as(HandoffPath).id)))


def _update_handoff_status(call: Call) -> Reply:
    body = call.body_as(HandoffStatusChange)
    handoff_id = str(call.path_as(HandoffPath).id)
    return Reply(200, handoffs.update_handoff_status(call.claims, handoff_id, body.status, body.note))


def _usage_summary(call: Call) -> Reply:
    query = call.query_as(UsageSummaryQuery)
    return Reply(200, usage.usage_summary(call.claims, query.period, query.agent))


def _budget_check(call: Call) -> Reply:
    agent = call.path_as(BudgetCheckPath).agent
    return Reply(200, usage.budget_check(call.claims, agent, call.query_as(BudgetCheckQuery).estimated_tokens))


def _record_usage(call: Call) -> Reply:
    body = call.body_as(UsageRecord).model_dump(mode="json", exclude_none=True)
    return Reply(201, usage.record_usage(call.claims, **body))


def _version() -> str:
    try:
        return importlib.metadata.version("cortex-memory")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def _health(call: Call) -> Reply:
    return Reply(200, {"status": "ok", "service": "cortex", "version": _version()})


def _readiness() -> tuple[bool, dict[str, Any]]:
    try:
        with db.get_pool().connection(timeout=READY_TIMEOUT_SECONDS) as conn:
            try:
                rows = conn.execute("select version from supabase_migrations.schema_migrations").fetchall()
            except psycopg.errors.UndefinedTable:
                rows = []
    except Exception as exc:  # any failure to reach the database means "not ready"
        logger.warning("readiness check failed: %s", _brief(exc))
        return False, {"status": "unavailable", "database": "unreachable", "error": _brief(exc)}
    applied = {str(r[0]) for r in rows}
    expected = [m.version for m in migrate.list_migrations()]
    pending = [v for v in expected if v not in applied]
    return not pending, {
        "status": "unavailable" if pending else "ok",
        "database": "ok",
        "migrations": {"applied": len(applied), "expected": len(expected), "pending": pending},
    }


def _ready(call: Call) -> Reply:
    ok, body = _readiness()
    return Reply(200 if ok else 503, body)


def _deep(call: Call) -> Reply:
    ok, body = _readiness()
    settings = get_settings()
    if not settings.use_remote_llm:
        body.update(llm="local", llm_model=settings.local_model)
    else:
        # The cheapest real round trip: a one-token answer from the summary model.
        try:
            with anthropic.Anthropic(
                api_key=settings.anthropic_api_key,
                base_url=settings.anthropic_base_url or None,
                timeout=DEEP_LLM_TIMEOUT_SECONDS,
                max_retries=0,
            ) as client:
                client.messages.create(
                    model=settings.summary_model, max_tokens=1, messages=[{"role": "user", "content": "ping"}]
                )
            body.update(llm="ok", llm_model=settings.summary_model)
        except anthropic.AnthropicError as exc:
            logger.warning("deep health check: Claude failed: %s", _brief(exc))
            ok = False
            body.update(llm="error", llm_model=settings.summary_model, llm_error=_brief(exc))
    body["status"] = "ok" if ok else "unavailable"
    return Reply(200 if ok else 503, body)


def _openapi(call: Call) -> Reply:
    return Reply(200, openapi_document())


# --- the route table ---------------------------------------------------------------------------

_P = API_PREFIX
ROUTES: tuple[Route, ...] = (
    Route(
        "POST",
        (f"{_P}/contacts",),
        "upsert_contact",
        _create_contact,
        "Create or update a contact (upsert by email)",
        "contacts",
        {201: ContactCreated, 200: ContactCreated},
        body=ContactCreate,
        description="201 when the contact was created, 200 when an existing one (same normalised "
        "email) was updated: given fields overwrite, tags accumulate, custom_fields merge.",
    ),
    Route(
        "GET",
        (f"{_P}/contacts",),
        "search_contacts",
        _list_contacts,
        "List and search contacts",
        "contacts",
        {200: ContactList},
        query=ContactListQuery,
    ),
    Route(
        "GET",
        (f"{_P}/contacts/<id>",),
        "get_contact",
        _get_contact,
        "Get a contact (details, not context)",
        "contacts",
        {200: Contact},
        path=ContactPath,
        errors=(404,),
    ),
    Route(
        "PATCH",
        (f"{_P}/contacts/<id>",),
        "update_contact",
        _patch_contact,
        "Update contact fields",
        "contacts",
        {200: Contact},
        body=ContactPatch,
        path=ContactPath,
        errors=(404, 409),
        description="Each key present sets that field (null clears it); absent keys are kept.",
    ),
    Route(
        "POST",
        (f"{_P}/interactions",),
        "log_interaction",
        _log_interaction,
        "Log an interaction (summarised at write time)",
        "interactions",
        {201: InteractionLogged, 200: InteractionLogged},
        body=InteractionCreate,
        errors=(404,),
        description="Without a summary Cortex summarises raw_content now and reports the model call in "
        "token_usage. A repeated external_id returns the first row with duplicate=true (200).",
    ),
    Route(
        "GET",
        (f"{_P}/interactions",),
        "list_interactions",
        _list_interactions,
        "A contact's interactions, newest first",
        "interactions",
        {200: InteractionList},
        query=InteractionListQuery,
        errors=(404,),
    ),
    Route(
        "GET",
        (f"{_P}/context/<contact_id>",),
        "get_context",
        _get_context,
        "Working context of a contact, within the level's token budget",
        "context",
        {200: WorkingContext},
        query=ContextQuery,
        path=ContextPath,
        errors=(404,),
        description="Stale context is served with is_stale=true and a regeneration is queued.",
    ),
    Route(
        "POST",
        (f"{_P}/context/<contact_id>/refresh",),
        "refresh_context",
        _refresh_context,
        "Regenerate a contact's working context now",
        "context",
        {200: ContextRefresh, 202: ContextRefresh},
        path=ContextPath,
        errors=(404,),
    ),
    Route(
        "POST",
        (f"{_P}/handoffs",),
        "create_handoff",
        _create_handoff,
        "Hand a contact to another agent or to a human",
        "handoffs",
        {201: HandoffCreated},
        body=HandoffCreate,
        errors=(404,),
        description="In one transaction: the handoff, the new owner, the context marked for regeneration, "
        "and notifications for the receiver and the monitor. context_summary is generated when absent.",
    ),
    Route(
        "GET",
        (f"{_P}/handoffs/pending",),
        "get_pending_handoffs",
        _pending_handoffs,
        "Pending handoffs, most urgent first, then oldest",
        "handoffs",
        {200: HandoffList},
        query=PendingHandoffsQuery,
    ),
    Route(
        "GET",
        (f"{_P}/handoffs",),
        "list_handoffs",
        _list_handoffs,
        "Handoffs created or changed since a time, by status or contact (stand-up view)",
        "handoffs",
        {200: HandoffList},
        query=HandoffListQuery,
    ),
    Route(
        "GET",
        (f"{_P}/handoffs/<id>",),
        "get_handoff",
        _get_handoff,
        "One handoff with its allowed moves and audit trail",
        "handoffs",
        {200: Handoff},
        path=HandoffPath,
        errors=(404,),
    ),
    Route(
        "PATCH",
        (f"{_P}/handoffs/<id>",),
        "update_handoff_status",
        _update_handoff_status,
        "Accept, complete or reject a handoff",
        "handoffs",
        {200: Handoff},
        body=HandoffStatusChange,
        path=HandoffPath,
        errors=(404, 409),
        description="Moves: pending → accepted → completed, pending/accepted → rejected; any other is 409 "
        "with the allowed moves. Of two concurrent accepts exactly one wins.",
    ),
    Route(
        "GET",
        (f"{_P}/usage/summary",),
        "usage_summary",
        _usage_summary,
        "Token usage of the day, week or month (tenant time zone), by agent and model, with budget status",
        "usage",
        {200: UsageSummary},
        query=UsageSummaryQuery,
    ),
    Route(
        "GET",
        (f"{_P}/usage/budget-check/<agent>",),
        "budget_check",
        _budget_check,
        "Check an agent's daily budget before an operation",
        "usage",
        {200: BudgetCheck},
        query=BudgetCheckQuery,
        path=BudgetCheckPath,
        description="Recommendation after the estimated operation: <=80% proceed, <=95% use_haiku, "
        "<=100% defer, over the budget alert_human (within_budget false).",
    ),
    Route(
        "POST",
        (f"{_P}/usage",),
        "record_usage",
        _record_usage,
        "Record a model call against the agent's daily budget",
        "usage",
        {201: UsageRecorded},
        body=UsageRecord,
        errors=(429,),
        description="Over the daily budget the call is refused with 429 and Retry-After (seconds to the "
        "tenant's midnight); the refusal is recorded (budget_exceeded=true) and the monitor notified.",
    ),
    Route(
        "GET",
        ("/health", f"{_P}/health"),
        "health",
        _health,
        "Liveness (no dependency is asked)",
        "health",
        {200: Health},
        auth=False,
    ),
    Route(
        "GET",
        ("/health/ready", f"{_P}/health/ready"),
        "health_ready",
        _ready,
        "Readiness: database round trip and applied migrations",
        "health",
        {200: HealthReady, 503: HealthReady},
        auth=False,
    ),
    Route(
        "GET",
        ("/health/deep", f"{_P}/health/deep"),
        "health_deep",
        _deep,
        "Readiness plus the language model",
        "health",
        {200: HealthDeep, 503: HealthDeep},
        auth=False,
    ),
    Route(
        "GET",
        (f"{_P}/openapi.json",),
        "openapi",
        _openapi,
        "This document (OpenAPI 3.1)",
        "meta",
        {},
        auth=False,
    ),
)
_BY_NAME: dict[str, Route] = {r.name: r for r in ROUTES}
_URL_MAP = Map(
    [Rule(p, endpoint=r.name, methods=[r.method]) for r in ROUTES for p in r.paths],
    strict_slashes=False,
    merge_slashes=False,
)


# --- dispatch ----------------------------------------------------------------------------------


def _location(loc: tuple[int | str, ...], where: str) -> str:
    return ".".join(str(p) for p in loc) or where


def _validate(model: type[M], data: Any, where: str) -> M:
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


def _read_json(request: flask.Request) -> Any:
    too_large = CortexError(413, "payload_too_large", f"request body exceeds {MAX_BODY_BYTES} bytes", "body")
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise too_large
    raw = request.get_data(cache=True)
    if len(raw) > MAX_BODY_BYTES:
        raise too_large
    if not raw.strip():
        raise CortexError(400, "malformed_json", "request body is empty; send a JSON object", "body")
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
        raise CortexError(
            400,
            "malformed_json",
            f"request body is not valid JSON: {exc}",
            "body",
            "send a JSON object with Content-Type: application/json",
        ) from None


def _match(request: flask.Request) -> tuple[Route, dict[str, Any]]:
    adapter = _URL_MAP.bind_to_environ(request.environ)
    try:
        name, args = adapter.match()
    except MethodNotAllowed as exc:
        allowed = sorted(set(exc.valid_methods or ()) - {"HEAD"})
        raise CortexError(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.path}",
            None,
            f"allowed: {', '.join(allowed)}",
            None,
            {"allowed": allowed},
        ) from None
    except (NotFound, RequestRedirect):
        raise CortexError(
            404,
            "route_not_found",
            f"no route for {request.method} {request.path}",
            None,
            f"the routes are listed at {API_PREFIX}/openapi.json",
        ) from None
    return _BY_NAME[str(name)], dict(args)


def _dispatch(request: flask.Request) -> Reply:
    route, args = _match(request)
    claims = authenticate(dict(request.headers)) if route.auth else {}
    path = _validate(route.path, args, "path") if route.path else None
    query = _validate(route.query, request.args.to_dict(), "query") if route.query else None
    body = _validate(route.body, _read_json(request), "body") if route.body else None
    return route.handler(Call(request, claims, path, query, body))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _request_id(request: flask.Request) -> str:
    given = request.headers.get("X-Request-ID", "")
    return given if _REQUEST_ID.match(given) else uuid.uuid4().hex


def _error_reply(exc: CortexError, request_id: str) -> Reply:
    body = exc.to_json()
    body["error"]["request_id"] = request_id
    headers = {"Allow": ", ".join(exc.details["allowed"])} if exc.status == 405 else {}
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="cortex"'
    if exc.status == 429 and "retry_after_seconds" in exc.details:
        headers["Retry-After"] = str(exc.details["retry_after_seconds"])
    return Reply(exc.status, body, headers)


def handle(request: flask.Request) -> flask.Response:
    """The whole API: routes, authenticates, validates, calls the service and answers JSON.
    Every error is JSON with the field at fault; unexpected failures are logged and answer 500."""
    request_id = _request_id(request)
    try:
        reply = _dispatch(request)
    except CortexError as exc:
        if exc.status >= 500:
            logger.error(
                "request %s %s %s failed: %s (sqlstate %s)",
                request_id,
                request.method,
                request.path,
                exc.message,
                exc.sqlstate,
            )
        reply = _error_reply(exc, request_id)
    except psycopg_pool.PoolTimeout as exc:
        logger.error("request %s: database unavailable: %s", request_id, _brief(exc))
        reply = _error_reply(
            CortexError(503, "database_unavailable", "the database is not reachable", None, "retry shortly"),
            request_id,
        )
    except Exception:
        logger.exception("request %s %s %s failed", request_id, request.method, request.path)
        reply = _error_reply(
            CortexError(
                500,
                "internal_error",
                "internal server error",
                None,
                f"quote request id {request_id} when reporting it",
            ),
            request_id,
        )
    response = flask.Response(
        json.dumps(reply.body, ensure_ascii=False, default=_json_default),
        status=reply.status,
        mimetype="application/json",
    )
    response.headers.update(reply.headers)
    response.headers["X-Request-ID"] = request_id
    response.headers["Cache-Control"] = "no-store"
    return response


# --- OpenAPI -----------------------------------------------------------------------------------

_REF = "#/components/schemas/{model}"
_ERROR_TEXT: dict[int, str] = {
    400: "Malformed JSON body (field `body`)",
    401: "Missing, invalid, expired or revoked credentials",
    403: "The calling agent may not do this (a read-only agent writing)",
    404: "Unknown contact; create it first with POST /api/v1/contacts",
    409: "Conflict with existing data (such as an email already taken) or an illegal status move",
    429: "Over the agent's daily token budget; Retry-After gives the seconds to the tenant's midnight",
    413: "Request body too large",
    422: "Invalid input: `field` names the first offending input, `errors` lists all",
    500: "Unexpected failure (logged with the request id)",
    503: "The database is not reachable",
}


def _schema_of(model: type[BaseModel], mode: str, schemas: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=_REF, mode="validation" if mode == "validation" else "serialization")
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    return schema


def _parameters(model: type[BaseModel], where: str, schemas: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _schema_of(model, "validation", schemas)
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        prop.pop("title", None)
        description = prop.pop("description", None)
        # `X | None` is how an optional parameter is typed; in a query string "absent" says it.
        options = prop.get("anyOf")
        if isinstance(options, list):
            non_null = [o for o in options if o != {"type": "null"}]
            if len(non_null) == 1:
                prop.pop("anyOf")
                prop = {**non_null[0], **prop}
                if prop.get("default", 0) is None:
                    prop.pop("default")
        param: dict[str, Any] = {
            "name": name,
            "in": where,
            "required": where == "path" or name in required,
            "schema": prop,
        }
        if description:
            param["description"] = description
        params.append(param)
    return params


def _json_content(model: type[BaseModel]) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=model.__name__)}}}


def _operation(route: Route, schemas: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": route.name, "summary": route.summary, "tags": [route.tag]}
    if route.description:
        op["description"] = route.description
    params: list[dict[str, Any]] = []
    if route.path:
        params += _parameters(route.path, "path", schemas)
    if route.query:
        params += _parameters(route.query, "query", schemas)
    if route.auth:
        params += [{"$ref": "#/components/parameters/XTenantID"}, {"$ref": "#/components/parameters/XAgent"}]
    params.append({"$ref": "#/components/parameters/XRequestID"})
    op["parameters"] = params
    if route.body:
        schemas[route.body.__name__] = _schema_of(route.body, "validation", schemas)
        op["requestBody"] = {"required": True, "content": _json_content(route.body)}
    responses: dict[str, Any] = {}
    for status, model in route.responses.items():
        schemas[model.__name__] = _schema_of(model, "serialization", schemas)
        doc = (model.__doc__ or model.__name__).strip().splitlines()[0]
        responses[str(status)] = {
            "description": doc,
            "content": _json_content(model),
            "headers": {"X-Request-ID": {"$ref": "#/components/headers/XRequestID"}},
        }
    if not route.responses:
        responses["200"] = {
            "description": route.summary,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    errors = set(route.errors) | {500}
    if route.auth:
        errors |= {401, 503}
        if route.method != "GET":
            errors.add(403)
    if route.body:
        errors |= {400, 413, 422}
    if route.path or route.query:
        errors.add(422)
    for status in sorted(errors):
        responses.setdefault(str(status), {"description": _ERROR_TEXT[status], "content": _json_content(ErrorResponse)})
    op["responses"] = responses
    op["security"] = [{"bearerAuth": []}] if route.auth else []
    return op


@functools.cache
def _build_openapi() -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    schemas["ErrorResponse"] = _schema_of(ErrorResponse, "serialization", schemas)
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        for i, rule in enumerate(route.paths):
            templated = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule)
            op = _operation(route, schemas)
            if i:  # operationIds are unique per document: an alias path gets its own
                op["operationId"] = f"{route.name}_{re.sub(r'[^a-z0-9]+', '_', rule).strip('_')}"
            paths.setdefault(templated, {})[route.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Cortex API",
            "version": _version(),
            "summary": "Shared memory for teams of AI agents",
            "description": "Contacts, interactions and token-budgeted working context. Every error body is "
            "an ErrorResponse naming the offending field.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "tags": [{"name": t} for t in dict.fromkeys(r.tag for r in ROUTES)],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(schemas.items())),
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An agent key (ctx_...), a Supabase JWT carrying tenant_id and agent "
                    "(top level or app_metadata), or the service key with X-Tenant-ID.",
                },
            },
            "parameters": {
                "XTenantID": {
                    "name": "X-Tenant-ID",
                    "in": "header",
                    "required": False,
                    "description": "Tenant to act in; accepted only with the service key.",
                    "schema": {"type": "string", "format": "uuid"},
                },
                "XAgent": {
                    "name": "X-Agent",
                    "in": "header",
                    "required": False,
                    "description": "Agent to act as with the service key (default system).",
                    "schema": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,62}$"},
                },
                "XRequestID": {
                    "name": "X-Request-ID",
                    "in": "header",
                    "required": False,
                    "description": "Echoed in the response; generated when absent.",
                    "schema": {"type": "string", "pattern": _REQUEST_ID.pattern},
                },
            },
            "headers": {
                "XRequestID": {
                    "description": "The request id (echoed or generated).",
                    "schema": {"type": "string"},
                },
            },
        },
    }


def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of this API, generated from `ROUTES` and `cortex.models`."""
    return copy.deepcopy(_build_openapi())
