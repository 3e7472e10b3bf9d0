"""Starts the MCP server a client configuration names, as the client would, with the official
`mcp` Python SDK, and prints the tools it lists as one JSON line.

Usage: python mcp_config_client.py <file holding `rl mcp --print-config claude-desktop`>

The server gets the SDK's default environment (HOME, PATH, ...) and the entry's `env` only, as
an MCP client gives it: nothing of the test's own environment. Every wait is bounded.
"""

import json
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

SECONDS = 60


async def main(path: str) -> None:
    with open(path, encoding="utf-8") as file:
        entry = json.load(file)["mcpServers"]["rl"]
    server = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry["env"])
    with anyio.fail_after(SECONDS):
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
    print(json.dumps({"tools": [tool.name for tool in tools.tools]}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
