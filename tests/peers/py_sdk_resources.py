"""An MCP server on the official Python SDK (`mcp` 2.3.0) whose resources are updated,
used as a test peer for resource subscriptions through Warden's gateway.

In the 2026-07-28 era a client subscribes to resources through `subscriptions/listen`
(the SDK's own server side of it: it acknowledges the URIs it honours and tags every
update with the listen's id). `touch` announces that a resource was updated, to the listen
streams subscribed to it. It runs over stdio or Streamable HTTP.

Usage (from the repository root, after scripts/install-peers DIR):
    DIR/venv/bin/python tests/peers/py_sdk_resources.py              # stdio
    DIR/venv/bin/python tests/peers/py_sdk_resources.py http PORT    # 127.0.0.1:PORT/mcp
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("warden-py-sdk-resources", version="0.1.0")


@server.resource("note://a")
def note_a() -> str:
    """A note whose updates `touch` announces."""
    return "note a"


@server.resource("note://b")
def note_b() -> str:
    """Another note."""
    return "note b"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Announce that the resource `uri` was updated."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


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
