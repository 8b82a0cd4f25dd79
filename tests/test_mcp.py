"""`cortex mcp` driven by the `mcp` package's own client, over streamable HTTP and stdio, against a
live Cortex: tools listed with the server's schemas, every tool called, refusals across tenants and
for read-only agents, unknown tools and wrong arguments answered with how to fix the call."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client as MCPClient
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from starlette.applications import Starlette

from cortex import embeddings
from cortex.cli import main
from cortex.client import Client
from cortex.config import get_settings
from cortex.interactions.models import InteractionCreate
from cortex.mcp_server.server import Settings, build
from cortex.mcp_server.tools import TOOLS
from tests.conftest import Tenant
from tests.test_app import JWT_SECRET, make_jwt
from tests.test_client import live_server, serving  # noqa: F401 (the live_server fixture)

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


@contextmanager
def mcp_http(base: str, key: str | None, agent: str | None = None) -> Iterator[str]:
    """`cortex mcp --transport http` for `key`, served in this process; the MCP endpoint's URL."""
    server = build(Settings(url=base, key=key, agent=agent))
    app: Starlette = server.streamable_http_app(streamable_http_path="/mcp")
    with serving(app, close_pool=False) as url:
        yield f"{url}/mcp"


def over(target: Any, session: Callable[[MCPClient], Awaitable[T]]) -> T:
    """Runs `session` with an MCP client connected to `target` (a URL, a process to start, a transport)."""

    async def run() -> T:
        async with MCPClient(target) as client:
            return await session(client)

    return asyncio.run(run())


def text_of(result: CallToolResult) -> str:
    """The text of a tool result."""
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def data_of(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful tool result."""
    assert not result.is_error, text_of(result)
    assert result.structured_content is not None
    return result.structured_content


@pytest.fixture
def contact_id(live_server: str, tenant: Tenant) -> str:  # noqa: F811 (live_server is the imported fixture)
    """A contact of the first tenant, created over the SDK."""
    with Client(base_url=live_server, api_key=tenant.keys["luna"]) as luna:
        return str(luna.upsert_contact(email="john@acme.example", name="John Smith", stage="customer").id)


def test_lists_the_ten_tools_with_descriptions_and_the_servers_schemas(live_server: str, tenant: Tenant) -> None:  # noqa: F811
    with mcp_http(live_server, tenant.keys["luna"], "luna") as url:
        listed = over(url, lambda c: c.list_tools())
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {
        "get_context", "log_interaction", "search_contacts", "create_handoff", "get_pending_handoffs",
        "update_handoff_status", "budget_check", "remember", "search_memories", "get_briefing",
    }  # fmt: skip
    assert tools["log_interaction"].input_schema == InteractionCreate.model_json_schema()
    assert set(tools["get_context"].input_schema["properties"]) == {"contact_id", "level", "refresh"}
    assert tools["get_context"].input_schema["required"] == ["contact_id"]
    for spec in TOOLS:
        tool = tools[spec.name]
        assert tool.description == spec.description and len(tool.description or "") > 100
        assert tool.annotations is not None and tool.annotations.read_only_hint is spec.read_only


@pytest.fixture
def text_only_search(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Memory search without the embedding model (text and graph rankings only): loading the model
    costs seconds and proves nothing about MCP."""
    monkeypatch.setenv("CORTEX_EMBEDDINGS", "none")
    get_settings.cache_clear()
    embeddings.reset()
    yield
    get_settings.cache_clear()
    embeddings.reset()


@pytest.mark.usefixtures("text_only_search")
def test_calls_every_tool_over_streamable_http(live_server: str, tenant: Tenant, contact_id: str) -> None:  # noqa: F811
    with Client(base_url=live_server, api_key=tenant.keys["anna"]) as anna:
        handoff = anna.create_handoff(contact_id=contact_id, to_agent="luna", reason="warm_reply")

    async def session(c: MCPClient) -> dict[str, dict[str, Any]]:
        calls: dict[str, dict[str, Any]] = {
            "search_contacts": {"search": "John Smith"},
            "get_context": {"contact_id": contact_id, "level": 2},
            "log_interaction": {"contact_id": contact_id, "type": "note", "summary": "Asked about pricing."},
            "create_handoff": {"contact_id": contact_id, "to_agent": "jasper", "reason": "warm_reply"},
            "get_pending_handoffs": {"agent": "luna"},
            "update_handoff_status": {"id": str(handoff.id), "status": "accepted"},
            "budget_check": {"estimated_tokens": 500},  # agent: the server's own
            "remember": {"kind": "fact", "title": "John prefers email", "body": "Never call before 10."},
            "search_memories": {"query": "John prefers email"},
            "get_briefing": {"format": "compact"},  # agent: the server's own, asked of Cortex (GET /me)
        }
        return {name: data_of(await c.call_tool(name, args)) for name, args in calls.items()}

    with mcp_http(live_server, tenant.keys["luna"]) as url:  # no --agent
        results = over(url, session)
    assert results["search_contacts"]["items"][0]["id"] == contact_id
    assert results["get_context"]["contact_id"] == contact_id and results["get_context"]["level"] == 2
    assert results["log_interaction"]["agent"] == "luna"
    assert results["create_handoff"]["status"] == "pending"
    assert [h["id"] for h in results["get_pending_handoffs"]["items"]] == [str(handoff.id)]
    assert results["update_handoff_status"]["status"] == "accepted"
    assert results["budget_check"]["agent"] == "luna" and results["budget_check"]["within_budget"] is True
    assert results["remember"]["created"] is True
    assert any(r["memory"]["title"] == "John prefers email" for r in results["search_memories"]["results"])
    assert results["get_briefing"]["agent"] == "luna" and results["get_briefing"]["format"] == "compact"


def test_resources_are_the_agents_briefing_and_a_contacts_context(
    live_server: str,  # noqa: F811
    tenant: Tenant,
    contact_id: str,
) -> None:
    async def session(c: MCPClient) -> tuple[list[str], list[str], str, str]:
        resources = [str(r.uri) for r in (await c.list_resources()).resources]
        templates = [t.uri_template for t in (await c.list_resource_templates()).resource_templates]
        briefing = await c.read_resource("cortex://briefing")
        context = await c.read_resource(f"cortex://contacts/{contact_id}/context")
        return resources, templates, briefing.contents[0].text, context.contents[0].text  # type: ignore[union-attr]

    with mcp_http(live_server, tenant.keys["luna"]) as url:  # no --agent: the server asks Cortex who luna's key is
        resources, templates, briefing, context = over(url, session)
    with Client(base_url=live_server, api_key=tenant.keys["luna"]) as luna:
        expected = luna.get_briefing("luna").text
    assert resources == ["cortex://briefing"]
    assert sorted(templates) == ["cortex://briefing/{agent}", "cortex://contacts/{contact_id}/context"]
    assert briefing.split("\n")[0] == expected.split("\n")[0] and "luna" in briefing.split("\n")[0].lower()
    assert json.loads(context)["contact_id"] == contact_id and json.loads(context)["level"] == 2


def test_over_http_resources_are_read_with_the_requests_own_key(
    live_server: str,  # noqa: F811
    tenant: Tenant,
    other_tenant: Tenant,
    contact_id: str,
) -> None:
    def as_key(url: str, key: str) -> Any:
        return streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}))

    async def reads(c: MCPClient) -> list[Any]:
        found: list[Any] = []
        for uri in ("cortex://briefing/helios", f"cortex://contacts/{contact_id}/context", "cortex://briefing"):
            try:
                found.append((await c.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
            except MCPError as exc:
                found.append(exc)
        return found

    with mcp_http(live_server, None) as url:  # a server without a key of its own
        helios = over(as_key(url, tenant.keys["helios"]), reads)
        stranger = over(as_key(url, other_tenant.keys["luna"]), reads)
    briefing, context, static = helios
    assert "helios" in briefing.split("\n")[0].lower() and json.loads(context)["contact_id"] == contact_id
    assert isinstance(static, MCPError) and "read cortex://briefing/{agent} with your key" in str(static)
    other_briefing, other_context, _ = stranger
    assert isinstance(other_briefing, MCPError) and "403" in str(other_briefing)
    assert isinstance(other_context, MCPError) and "404" in str(other_context)


def test_an_agent_keys_own_agent_is_asked_of_cortex_once_for_default_arguments(
    live_server: str,  # noqa: F811
    tenant: Tenant,
) -> None:
    async def session(c: MCPClient) -> list[dict[str, Any]]:
        return [data_of(await c.call_tool("budget_check", {"estimated_tokens": 10})) for _ in range(3)]

    with mcp_http(live_server, tenant.keys["helios"]) as url:
        checks = over(url, session)
    assert [c["agent"] for c in checks] == ["helios"] * 3


@pytest.mark.slow  # starts a `cortex mcp` process
def test_stdio_transport_serves_the_same_tools_from_a_cortex_mcp_process(
    live_server: str,  # noqa: F811
    tenant: Tenant,
    contact_id: str,
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "functions"), "CORTEX_URL": live_server}
    env["CORTEX_API_KEY"] = tenant.keys["luna"]
    process = StdioServerParameters(
        command=sys.executable, args=["-c", "from cortex.cli import main; main()", "mcp"], env=env
    )

    async def session(c: MCPClient) -> tuple[int, dict[str, Any], CallToolResult]:
        tools = await c.list_tools()
        context = data_of(await c.call_tool("get_context", {"contact_id": contact_id}))
        unknown = await c.call_tool("get_contexts", {"contact_id": contact_id})
        return len(tools.tools), context, unknown

    count, context, unknown = over(process, session)
    assert count == 10 and context["contact_id"] == contact_id
    assert unknown.is_error and "Unknown tool 'get_contexts'" in text_of(unknown)
    assert "get_context, log_interaction" in text_of(unknown)


def test_another_tenants_ids_are_refused_as_not_found_with_how_to_fix(
    live_server: str,  # noqa: F811
    other_tenant: Tenant,
    contact_id: str,
) -> None:
    async def session(c: MCPClient) -> list[CallToolResult]:
        return [
            await c.call_tool("get_context", {"contact_id": contact_id}),
            await c.call_tool("log_interaction", {"contact_id": contact_id, "type": "note", "summary": "x"}),
        ]

    with mcp_http(live_server, other_tenant.keys["luna"], "luna") as url:
        refusals = over(url, session)
    for refused in refusals:
        assert refused.is_error
        assert "404" in text_of(refused) and "Fix: there is no such object in your tenant" in text_of(refused)


def test_a_read_only_agent_reads_but_its_writes_are_refused(
    live_server: str,  # noqa: F811
    tenant: Tenant,
    contact_id: str,
) -> None:
    async def session(c: MCPClient) -> tuple[CallToolResult, CallToolResult, CallToolResult]:
        return (
            await c.call_tool("get_context", {"contact_id": contact_id}),
            await c.call_tool("log_interaction", {"contact_id": contact_id, "type": "note", "summary": "x"}),
            await c.call_tool("remember", {"kind": "fact", "title": "helios was here"}),
        )

    with mcp_http(live_server, tenant.keys["helios"], "helios") as url:
        read, logged, remembered = over(url, session)
    assert data_of(read)["contact_id"] == contact_id
    for refused in (logged, remembered):
        assert refused.is_error and "403" in text_of(refused)
        assert "read-only agent can only read" in text_of(refused)


def test_unknown_tools_and_wrong_arguments_are_refused_with_how_to_fix(live_server: str, tenant: Tenant) -> None:  # noqa: F811
    async def session(c: MCPClient) -> list[CallToolResult]:
        return [
            await c.call_tool("delete_everything", {}),
            await c.call_tool("get_context", {"contact_id": "not-a-uuid"}),
            await c.call_tool("search_contacts", {"colour": "red"}),
            await c.call_tool("create_handoff", {"reason": "warm_reply"}),
            await c.call_tool("budget_check", {"agent": "nobody"}),
        ]

    with mcp_http(live_server, tenant.keys["luna"], "luna") as url:
        unknown, bad_id, extra, missing, server_side = over(url, session)
    assert all(r.is_error for r in (unknown, bad_id, extra, missing, server_side))
    assert "Unknown tool 'delete_everything'. Fix: call one of: get_context" in text_of(unknown)
    assert "Invalid arguments for get_context: contact_id:" in text_of(bad_id)
    assert "the arguments are contact_id, level?, refresh? (? = optional)" in text_of(bad_id)
    assert "colour: Extra inputs are not permitted" in text_of(extra)
    assert "contact_id: Field required" in text_of(missing)
    assert "Argument at fault: agent." in text_of(server_side) and "Fix: correct that argument" in text_of(server_side)


def test_a_wrong_key_is_refused_with_how_to_fix_and_cortex_mcp_needs_a_key(live_server: str) -> None:  # noqa: F811
    with mcp_http(live_server, "ctx_wrong_key") as url:
        refused = over(url, lambda c: c.call_tool("search_contacts", {}))
    assert refused.is_error and "401" in text_of(refused) and "set CORTEX_API_KEY" in text_of(refused)
    result = CliRunner().invoke(main, ["mcp"], env={"CORTEX_API_KEY": ""})
    assert result.exit_code == 2 and "no key: set CORTEX_API_KEY or pass --key" in result.output


def test_a_jwt_scopes_the_server_to_the_agent_it_names(
    live_server: str,  # noqa: F811
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CORTEX_JWT_SECRET", JWT_SECRET)
    get_settings.cache_clear()
    token = make_jwt({"sub": "user-1", "app_metadata": {"tenant_id": tenant.id, "agent": "mia"}})

    async def session(c: MCPClient) -> tuple[dict[str, Any], dict[str, Any], str | None]:
        budget = data_of(await c.call_tool("budget_check", {"estimated_tokens": 10}))
        logged = data_of(await c.call_tool("log_interaction", {"contact_id": cid, "type": "note", "summary": "x"}))
        return budget, logged, c.instructions

    with Client(base_url=live_server, api_key=tenant.keys["luna"]) as luna:
        cid = str(luna.upsert_contact(email="jwt@acme.example").id)
    with mcp_http(live_server, token) as url:  # no --agent: the JWT names it
        budget, logged, instructions = over(url, session)
    assert budget["agent"] == "mia" and logged["agent"] == "mia"
    assert instructions is not None and "You are agent 'mia'" in instructions


def test_over_http_each_request_acts_as_the_agent_of_its_own_bearer_key(
    live_server: str,  # noqa: F811
    tenant: Tenant,
    other_tenant: Tenant,
    contact_id: str,
) -> None:
    def as_key(url: str, key: str | None) -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))

    async def calls(c: MCPClient) -> CallToolResult:
        return await c.call_tool("get_context", {"contact_id": contact_id})

    with mcp_http(live_server, None) as url:  # a server without a key of its own
        mine = over(as_key(url, tenant.keys["helios"]), calls)
        stranger = over(as_key(url, other_tenant.keys["luna"]), calls)
        nobody = over(as_key(url, None), calls)
    assert data_of(mine)["contact_id"] == contact_id
    assert stranger.is_error and "404" in text_of(stranger)
    assert nobody.is_error and "no Cortex key: send Authorization: Bearer <agent key>" in text_of(nobody)
