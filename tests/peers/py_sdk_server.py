"""A minimal MCP server on the official Python SDK (`mcp` 2.3.0), used as a test peer.

Warden's integration tests run it to check interoperability with a server built the way
most third-party Python servers are built. It speaks both protocol eras: the 2025-11-25
`initialize` handshake and the 2026-07-28 `server/discover` + per-request `_meta` style.

Usage (from the repository root, after scripts/install-peers DIR):
    DIR/venv/bin/python tests/peers/py_sdk_server.py              # stdio
    DIR/venv/bin/python tests/peers/py_sdk_server.py http PORT    # Streamable HTTP on 127.0.0.1:PORT/mcp
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("warden-py-sdk-peer", version="0.1.0")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Return the text in upper case."""
    return text.upper()


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
