"""`cortex mcp`: Cortex as an MCP server (stdio and streamable HTTP) for one agent of one tenant.

Named `mcp_server` so that it never shadows the `mcp` library it is built on. See docs/mcp.md.
"""
