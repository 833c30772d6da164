"""The demo's MCP client: the official Python SDK connects to `warden serve` over stdio,
lists the tools Warden serves, and calls one. Warden decides the call under the policy.

Usage: python demo-client.py WARDEN CONFIG
"""

import asyncio
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    warden, config = sys.argv[1], sys.argv[2]
    server = StdioServerParameters(command=warden, args=["--config", config, "serve"], env=dict(os.environ))
    async with Client(server) as client:
        print(f"connected to Warden over stdio, protocol {client.protocol_version}")
        tools = await client.list_tools()
        print(f"{len(tools.tools)} tools served, e.g. {', '.join(t.name for t in tools.tools[:4])}, ...")
        try:
            result = await client.call_tool("time__get_current_time", {"timezone": "Asia/Tokyo"})
        except Exception as error:  # e.g. the time server did not start: Warden says why
            print(f"time__get_current_time -> error: {error}")
            return
        text = " ".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        print(f"time__get_current_time -> {text}")


asyncio.run(main())
