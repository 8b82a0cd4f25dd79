"""The OpenAPI 3.1 document, generated from the mounted routes and their pydantic models.

Nothing here knows a capability: `build` walks whatever routes the app mounted, so a new
capability documents itself by declaring its routes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from cortex.routing import Route
from cortex.schemas import ErrorResponse

REQUEST_ID_PATTERN = r"^[A-Za-z0-9._:-]{1,128}$"

_REF = "#/components/schemas/{model}"
_ERROR_TEXT: dict[int, str] = {
    400: "Malformed JSON body (field `body`)",
    401: "Missing, invalid, expired or revoked credentials",
    403: "The calling agent may not do this (a read-only agent writing)",
    404: "Unknown contact or handoff (a contact is created with POST /api/v1/contacts)",
    409: "Conflict with existing data (such as an email already taken) or an illegal status move",
    429: "Over the agent's daily token budget; Retry-After gives the seconds to the tenant's midnight",
    413: "Request body too large",
    415: "Unsupported Content-Type, or a file type the route does not read",
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


def _json_content(model: type[BaseModel], media_types: Sequence[str] = ("application/json",)) -> dict[str, Any]:
    return {media: {"schema": {"$ref": _REF.format(model=model.__name__)}} for media in media_types}


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
        op["requestBody"] = {"required": True, "content": _json_content(route.body, route.body_media_types)}
    responses: dict[str, Any] = {}
    for status, model in route.responses.items():
        doc = (model.__doc__ or model.__name__).strip().splitlines()[0]
        if route.media_type != "application/json" and status == 200:
            # A page or an event stream: text, described by the model's docstring (its events' shape).
            content: dict[str, Any] = {route.media_type: {"schema": {"type": "string"}}}
        else:
            schemas[model.__name__] = _schema_of(model, "serialization", schemas)
            content = _json_content(model)
        responses[str(status)] = {
            "description": doc,
            "content": content,
            "headers": {"X-Request-ID": {"$ref": "#/components/headers/XRequestID"}},
        }
    if not route.responses:
        responses["200"] = {
            "description": route.summary,
            "content": {
                route.media_type: {"schema": {"type": "object" if route.media_type == "application/json" else "string"}}
            },
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


def build(routes: Sequence[Route], version: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of these routes, generated from their pydantic models."""
    schemas: dict[str, Any] = {}
    schemas["ErrorResponse"] = _schema_of(ErrorResponse, "serialization", schemas)
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
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
            "version": version,
            "summary": "Shared memory for teams of AI agents",
            "description": "Contacts, interactions and token-budgeted working context. Every error body is "
            "an ErrorResponse naming the offending field.",
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "servers": [{"url": "/"}],
        "security": [{"bearerAuth": []}],
        "tags": [{"name": t} for t in dict.fromkeys(r.tag for r in routes)],
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
                    "schema": {"type": "string", "pattern": REQUEST_ID_PATTERN},
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
