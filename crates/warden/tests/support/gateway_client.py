"""A real MCP client (the official Python SDK) driving `warden serve` for the gateway tests.

Usage: gateway_client.py PLAN_JSON

The plan is a JSON object:
  mode        "legacy" (2025-11-25 initialize), "2026-07-28" (stateless), or "auto" (probe)
  stdio       {"command": ..., "args": [...], "env": {...}, "cwd": ...}   or
  url         "http://127.0.0.1:PORT/mcp" (Streamable HTTP)
  headers     extra HTTP headers (a bearer token)
  elicit      "approve", "decline", or "none" (no elicitation capability at all)
  steps       [{"list": true} | {"call": NAME, "args": {...}}], run in order

It prints one JSON object: the protocol version, the tool names of every page, each call's
isError and text, and the messages of the elicitations it answered.
"""

import asyncio
import json
import sys

import httpx2 as httpx
import mcp.types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    plan = json.loads(sys.argv[1])
    asked: list[str] = []

    async def approve(context, params):
        asked.append(params.message)
        if plan.get("elicit") == "approve":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")

    if "stdio" in plan:
        s = plan["stdio"]
        server = StdioServerParameters(command=s["command"], args=s["args"], env=s["env"], cwd=s["cwd"])
    else:
        http_client = httpx.AsyncClient(headers=plan.get("headers", {}), timeout=30)
        server = streamable_http_client(plan["url"], http_client=http_client)
    callback = None if plan.get("elicit", "none") == "none" else approve
    out = {"tools": [], "pages": 0, "calls": [], "asked": asked}
    async with Client(server, mode=plan.get("mode", "auto"), elicitation_callback=callback, cache=None) as client:
        out["protocol"] = client.protocol_version
        for step in plan["steps"]:
            if step.get("list"):
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    out["pages"] += 1
                    out["tools"].extend(tool.name for tool in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
            elif "call" in step:
                result = await client.call_tool(step["call"], step.get("args", {}))
                text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
                out["calls"].append({"name": step["call"], "isError": bool(result.is_error), "text": text,
                                     "structured": result.structured_content})
    print(json.dumps(out))


asyncio.run(main())
