"""`cortex mcp`: serve Cortex's MCP tools for one agent, over stdio (default) or streamable HTTP."""

from __future__ import annotations

import anyio
import click

from cortex.mcp_server.server import Settings, build


@click.command("mcp")
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: an MCP client starts this process; http: streamable HTTP on --host/--port.",
)
@click.option("--url", envvar="CORTEX_URL", help="Cortex's base URL (default http://127.0.0.1:8080).")
@click.option(
    "--key",
    envvar="CORTEX_API_KEY",
    help="The agent key (ctx_...) or JWT the server acts with; required for stdio. Over http optional: "
    "each request may bring its own in Authorization: Bearer.",
)
@click.option(
    "--agent",
    "agent_name",
    envvar="CORTEX_AGENT",
    help="Optional: the key's agent name. Without it the server asks Cortex once (GET /api/v1/me); a JWT names it.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="http: the address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535), help="http: the port.")
@click.option("--path", "http_path", default="/mcp", show_default=True, help="http: the MCP endpoint's path.")
def mcp(
    transport: str, url: str | None, key: str | None, agent_name: str | None, host: str, port: int, http_path: str
) -> None:
    """Serve Cortex to MCP clients (Claude Desktop, Claude Code, ...) as one agent: the key decides
    the tenant and the agent, so the client sees only what that agent may see. Over http a request's
    own `Authorization: Bearer <key>` wins; without --key every request must carry one (else anyone
    who reaches the port acts as the server's agent: keep it on loopback)."""
    if not key and transport == "stdio":
        raise click.UsageError("no key: set CORTEX_API_KEY or pass --key (an agent key: cortex keys create)")
    server = build(Settings(url=url, key=key, agent=agent_name))
    if transport == "stdio":
        anyio.run(server.run_stdio_async)
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=http_path, host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")
