"""A minimal MCP server on the official Python SDK (`mcp` 2.3.0), used as a test peer.

Warden's integration tests run it to check interoperability with a server built the way
most third-party Python servers are built. It speaks both protocol eras: the 2025-11-25
`initialize` handshake and the 2026-07-28 `server/discover` + per-request `_meta` style.

Usage (from the repository root, after scripts/install-peers DIR):
    DIR/venv/bin/python tests/peers/py_sdk_server.py              # stdio
    DIR/venv/bin/python tests/peers/py_sdk_server.py http PORT    # Streamable HTTP on 127.0.0.1:PORT/mcp
"""

import sys

from pydantic import BaseModel

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("warden-py-sdk-peer", version="0.1.0")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Return the text in upper case."""
    return text.upper()


class Approval(BaseModel):
    approve: bool


@server.tool()
async def confirm(what: str, ctx: Context) -> str:
    """Ask the user to confirm `what`, reporting progress and writing a log line on the way."""
    await ctx.report_progress(1, 2, "asking")
    await ctx.log("info", f"asking about {what}")
    answer = await ctx.elicit(f"Go ahead with {what}?", schema=Approval)
    await ctx.report_progress(2, 2, "answered")
    return f"confirmed {what}: {answer.action}"


def main() -> None:
    args = sys.argv[1:]
    if not args or args == ["stdio"]:
        server.run("stdio")
    elif len(args) == 2 and args[0] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(args[1]))
    else:
        sys.exit(f"usage: {sys.argv[0]} [stdio | http PORT]")


if __name__ == "__main__":
    main()
