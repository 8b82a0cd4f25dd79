"""The MCP server: Cortex's tools and resources for one agent, over the SDK (HTTP).

Why the SDK and not the service layer: `cortex mcp` usually runs where the agent runs (Claude
Desktop and Claude Code start it as a local process), which should hold an agent key and a URL,
never database credentials; over HTTP every call passes the API's authentication, validation, rate
and budget rules and RLS exactly as any other client's, so the MCP server adds no second path to
the data. The cost is one local HTTP hop per tool call.

The key (`CORTEX_API_KEY` / `--key`, an agent key or a JWT) decides the tenant and the agent: the
server sees only what that agent may see, and a read-only agent's writes are refused by Cortex.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ValidationError

from cortex.client import AsyncClient
from cortex.client.errors import APIConnectionError, APIError, CortexClientError, RateLimitError
from cortex.mcp_server.tools import TOOLS, ToolSpec

# Tools whose `agent` argument defaults to the server's own agent.
_OWN_AGENT_DEFAULT = {"budget_check", "get_briefing"}
_FIX_BY_STATUS = {
    401: "the MCP server's key was refused: set CORTEX_API_KEY (or --key) to a valid agent key "
    "(an operator issues one with: cortex keys create <tenant> <agent>) and restart the server",
    403: "your agent may not do this (a read-only agent can only read; admin operations need an "
    "admin key): use a read tool instead, or ask a human",
    404: "there is no such object in your tenant: check the id (search_contacts and "
    "get_pending_handoffs return valid ids)",
    409: "the object is not in a state that allows this: read it again (its allowed moves are "
    "listed) and choose one of them",
}


MAX_CLIENTS = 256  # SDK clients kept for keys that HTTP requests carried (each holds a connection pool)


@dataclass(frozen=True)
class Settings:
    """What `cortex mcp` connects with: Cortex's URL, the key (none: over HTTP each request brings
    its own) and, when known, the key's agent name."""

    url: str | None
    key: str | None
    agent: str | None = None


class Callers:
    """The SDK client and agent for a call: the key an HTTP request carries (`Authorization:
    Bearer`), else the server's own key. Cortex checks every key on every call."""

    def __init__(self, settings: Settings, client: AsyncClient | None = None) -> None:
        self.settings = settings
        self._clients: dict[str, AsyncClient] = {}
        self._agents: dict[str, str] = {}  # agent names Cortex gave for keys (GET /me)
        if settings.key and client is not None:
            self._clients[settings.key] = client

    def key(self, headers: Mapping[str, str] | None = None) -> str:
        """The key to act with, or a refusal saying how to give one."""
        given = (headers or {}).get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        if self.settings.key:
            return self.settings.key
        raise ToolError(
            "no Cortex key: send Authorization: Bearer <agent key> with each MCP request, or start "
            "cortex mcp with CORTEX_API_KEY (or --key)"
        )

    def client(self, key: str) -> AsyncClient:
        """The SDK client of `key` (made on first use; the oldest is dropped past MAX_CLIENTS)."""
        found = self._clients.get(key)
        if found is None:
            if len(self._clients) >= MAX_CLIENTS:
                self._clients.pop(next(k for k in self._clients if k != self.settings.key))
            found = self._clients[key] = AsyncClient(base_url=self.settings.url, api_key=key)
        return found

    def known_agent(self, key: str) -> str | None:
        """The agent `key` acts as, when known without asking (the configured name for the
        server's key; a JWT's claim)."""
        if key == self.settings.key and self.settings.agent:
            return self.settings.agent
        return agent_of(key) or self._agents.get(key)

    async def agent(self, key: str) -> str | None:
        """The agent `key` acts as: known, or asked of Cortex once (`GET /me`). None when Cortex
        refuses the key; the call that needed the name then fails with Cortex's own reason."""
        known = self.known_agent(key)
        if known:
            return known
        try:
            me = await self.client(key).whoami()
        except CortexClientError:
            return None
        if len(self._agents) >= MAX_CLIENTS:
            self._agents.pop(next(iter(self._agents)))
        self._agents[key] = me.agent
        return me.agent


def agent_of(key: str) -> str | None:
    """The agent a JWT names (read, not verified: Cortex verifies it on every call); None for a key."""
    if key.count(".") != 2:
        return None
    try:
        claims: dict[str, Any] = jwt.decode(key, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        return None
    metadata = claims.get("app_metadata") if isinstance(claims.get("app_metadata"), dict) else {}
    agent = claims.get("agent") or (metadata or {}).get("agent")
    return str(agent) if agent else None


def explain(error: CortexClientError) -> str:
    """A refusal as a model should read it: what Cortex said, the field, and how to fix the call."""
    if isinstance(error, APIConnectionError):
        return f"Cortex is not reachable: {error.message}. Try again later, or tell the user."
    assert isinstance(error, APIError)
    parts = [f"Cortex refused the call ({error.status} {error.code}): {error.message}."]
    if error.field:
        parts.append(f"Argument at fault: {error.field}.")
    if error.hint:
        parts.append(f"Hint: {error.hint}.")
    if isinstance(error, RateLimitError):
        wait = f" after {error.retry_after:.0f} s" if error.retry_after is not None else " later"
        parts.append(f"Fix: you are over today's token budget; defer the operation and retry{wait}.")
    elif error.status in _FIX_BY_STATUS:
        parts.append(f"Fix: {_FIX_BY_STATUS[error.status]}.")
    elif error.status in (400, 413, 422):
        parts.append("Fix: correct that argument (the tool's input schema lists the allowed values) and call again.")
    elif error.request_id:
        parts.append(f"Retry shortly; quote request id {error.request_id} if it persists.")
    return " ".join(parts)


def invalid_arguments(spec: ToolSpec, exc: ValidationError) -> ToolError:
    """Arguments the tool's model refuses: each argument at fault, and the allowed ones."""
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
        for e in exc.errors(include_url=False, include_context=False, include_input=False)
    ]
    fields = spec.arguments.model_fields
    required = [name for name, field in fields.items() if field.is_required()]
    allowed = ", ".join([*required, *(f"{name}?" for name in fields if name not in required)])
    return ToolError(
        f"Invalid arguments for {spec.name}: {'; '.join(problems)}. "
        f"Fix: correct these and call again; the arguments are {allowed} (? = optional)."
    )


class _RawArguments(FuncMetadata):
    """Hands the tool its arguments unvalidated (after the SDK's repair of JSON sent as strings):
    the tool validates them itself, so that a refusal says how to fix the call."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        """{"arguments": the raw arguments}."""
        return {"arguments": self.pre_parse_json(arguments_to_validate)}

    def convert_result(self, result: Any) -> CallToolResult | InputRequiredResult:
        """The response model as JSON text and as structured content."""
        if isinstance(result, BaseModel):
            data = result.model_dump(mode="json", by_alias=True)
            return CallToolResult(
                content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                structured_content=data,
            )
        return super().convert_result(result)


def _headers(context: Context[Any, Any]) -> Mapping[str, str] | None:
    """The HTTP request's headers (None over stdio, or outside a request)."""
    try:
        return context.headers
    except ValueError:
        return None


def _tool(spec: ToolSpec, callers: Callers) -> Tool:
    async def run(arguments: dict[str, Any], context: Context[Any, Any]) -> BaseModel:
        key = callers.key(_headers(context))
        agent = await callers.agent(key) if spec.name in _OWN_AGENT_DEFAULT else None
        if agent:
            arguments = {"agent": agent, **arguments}
        try:
            validated = spec.arguments.model_validate(arguments)
        except ValidationError as exc:
            raise invalid_arguments(spec, exc) from None
        try:
            return await spec.call(callers.client(key), validated)
        except CortexClientError as exc:
            raise ToolError(explain(exc)) from None

    arg_model = type(f"{spec.arguments.__name__}Model", (spec.arguments, ArgModelBase), {})
    return Tool(
        fn=run,
        name=spec.name,
        title=spec.name.replace("_", " "),
        description=spec.description,
        parameters=spec.arguments.model_json_schema(),
        fn_metadata=_RawArguments(arg_model=arg_model, output_schema=spec.result.model_json_schema(by_alias=True)),
        is_async=True,
        context_kwarg="context",
        annotations=ToolAnnotations(read_only_hint=spec.read_only, destructive_hint=False, open_world_hint=False),
    )


class CortexMCP(MCPServer[Any]):
    """MCPServer whose refusal of an unknown tool lists the tools there are."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Calls tool `name`; an unknown name is refused with the list of tools."""
        if self._tool_manager.get_tool(name) is None:
            names = ", ".join(t.name for t in self._tool_manager.list_tools())
            raise ToolError(f"Unknown tool {name!r}. Fix: call one of: {names}.")
        return await super().call_tool(name, arguments, context)


def _instructions(agent: str | None) -> str:
    who = (
        f"You are agent {agent!r} of your team's Cortex tenant."
        if agent
        else "You act as one agent of a Cortex tenant."
    )
    return (
        f"Cortex is your team's shared memory. {who} Before answering a contact, read get_context; "
        "after acting, log_interaction; hand work over with create_handoff; check budget_check before "
        "expensive work; store lasting knowledge with remember and find it with search_memories; read "
        "get_briefing at the start of a session. Ids come from search_contacts and get_pending_handoffs."
    )


def build(settings: Settings, client: AsyncClient | None = None) -> CortexMCP:
    """The MCP server for the agent `settings.key` names, or (over HTTP, without a key) for the
    agent each request's key names: tools and resources over the SDK."""
    callers = Callers(settings, client)
    server = CortexMCP(
        name="cortex",
        title="Cortex shared memory",
        instructions=_instructions(callers.known_agent(settings.key) if settings.key else None),
        tools=[_tool(spec, callers) for spec in TOOLS],
    )

    def key_of(context: Context[Any, Any] | None) -> str:
        # The request's own key over HTTP; the server's key over stdio (a static resource gets no
        # request context, so it always reads with the server's key).
        try:
            return callers.key(_headers(context) if context is not None else None)
        except ToolError as exc:
            raise ResourceError(str(exc)) from None

    async def briefing_text(key: str, agent: str) -> str:
        try:
            return (await callers.client(key).get_briefing(agent)).text
        except CortexClientError as exc:
            raise ResourceError(explain(exc)) from None

    @server.resource(
        "cortex://briefing", name="briefing", title="My briefing", mime_type="text/markdown",
        description="This agent's briefing (markdown): read it at the start of a session.",
    )  # fmt: skip
    async def briefing() -> str:
        if not settings.key:
            raise ResourceError(
                "this server has no key of its own: read cortex://briefing/{agent} with your key, "
                "or start cortex mcp with CORTEX_API_KEY"
            )
        agent = await callers.agent(settings.key)
        if not agent:
            raise ResourceError("Cortex refused this server's key: set CORTEX_API_KEY to a valid agent key")
        return await briefing_text(settings.key, agent)

    @server.resource(
        "cortex://briefing/{agent}", name="agent_briefing", title="An agent's briefing", mime_type="text/markdown",
        description="An agent's briefing (markdown), read with the caller's key: your own, or another agent's "
        "if your key is an admin's.",
    )  # fmt: skip
    async def agent_briefing(agent: str, context: Context[Any, Any]) -> str:
        return await briefing_text(key_of(context), agent)

    @server.resource(
        "cortex://contacts/{contact_id}/context", name="contact_context", title="A contact's context",
        mime_type="application/json",
        description="A contact's working context at level 2 (briefing and recent interactions), as JSON.",
    )  # fmt: skip
    async def contact_context(contact_id: str, context: Context[Any, Any]) -> str:
        try:
            found = await callers.client(key_of(context)).get_context(contact_id, level=2)
        except CortexClientError as exc:
            raise ResourceError(explain(exc)) from None
        return found.model_dump_json(by_alias=True)

    return server
