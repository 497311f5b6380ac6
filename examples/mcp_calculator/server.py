#!/usr/bin/env python3
"""A calculator served as MCP tools (the `mcp` SDK's MCPServer, formerly FastMCP), over stdio.

astraflow starts it once per rollout rank (environment.tools.mcp), lists its tools, shows their
schemas to the policy through the chat template, and sends each tool call the policy makes as
`tools/call` (docs/tasks.md, "Tools from MCP servers"). Run it alone to see it answer:
    python3 examples/mcp_calculator/server.py   (then type JSON-RPC lines)
or serve it over streamable HTTP, for `environment.tools.mcp: [{name: calculator, url: http://127.0.0.1:8000/mcp}]`:
    python3 examples/mcp_calculator/server.py --http 8000
"""
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("calculator")


@server.tool()
def add(a: float, b: float) -> float:
    """Adds two numbers."""
    return a + b


@server.tool()
def multiply(a: float, b: float) -> float:
    """Multiplies two numbers."""
    return a * b


@server.tool()
def divide(a: float, b: float) -> float:
    """Divides a by b."""
    if b == 0:
        raise ValueError("division by zero")
    return a / b


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))  # POST /mcp
    else:
        server.run()  # stdio: one JSON-RPC message per line
