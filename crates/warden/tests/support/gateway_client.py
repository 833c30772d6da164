"""A real MCP client (the official Python SDK) driving `warden serve` for the gateway tests.

Usage: gateway_client.py PLAN_JSON

The plan is a JSON object:
  mode        "legacy" (2025-11-25 initialize), "2026-07-28" (stateless), or "auto" (probe)
  stdio       {"command": ..., "args": [...], "env": {...}, "cwd": ...}   or
  url         "http://127.0.0.1:PORT/mcp" (Streamable HTTP)
  headers     extra HTTP headers (a bearer token)
  elicit      "approve", "decline", or "none" (no elicitation capability at all)
  steps       [{"list": true} | {"call": NAME, "args": {...}} | {"listen": true}
               | {"wait_changed": SECONDS} | {"offered": true} | {"read": URI}
               | {"call": NAME, "args": {...}, "progress": true}
               | {"prompt": NAME, "args": {...}}
               | {"complete": {"prompt": NAME} or {"template": URI},
                  "argument": {"name": ..., "value": ...}}
               | {"subscribe": URI} | {"unsubscribe": URI}
               | {"listen": true, "lists": true, "resources": [URI, ...]}
               | {"wait_notice": METHOD, "seconds": S} | {"sleep": S}
               | {"write_file": PATH}], run in order (`write_file` tells a test the
               steps before it are done).
               `listen` opens a 2026-07-28 `subscriptions/listen` stream for tool list
               changes (with `lists`, resource and prompt list changes too; with
               `resources`, updates of those resources); `wait_changed` waits for the next
               `notifications/tools/list_changed` (a notification, or an event on the
               listen stream) and records whether one came. A call the server answers
               with a JSON-RPC error records it. `subscribe` / `unsubscribe` are the
               2025-11-25 requests (their outcome is recorded in `subscriptions`).
               Every change heard (either era) is recorded in `notices` as
               [METHOD, URI or null]; `wait_notice` waits until one with METHOD has been
               heard and records whether it came in `waited`.

A call with `progress` follows its progress: each notification heard is recorded in
`progress` as [PROGRESS, TOTAL, MESSAGE]. Log messages the server sends (a 2025-11-25
session hears every level) are recorded in `logs` as [LEVEL, DATA].

`offered` lists every page of resources, resource templates and prompts (names and URIs);
`read`, `prompt` and `complete` record the texts, messages or values, or the error.

It prints one JSON object: the protocol version, the server's capabilities, the tool names
of every page, each call's isError and text, and the messages of the elicitations it
answered.
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
    out = {"tools": [], "pages": 0, "calls": [], "asked": asked, "changes": [], "lists": [],
           "reads": [], "prompts": [], "completions": []}
    changed = asyncio.Event()
    out["notices"] = []
    out["subscriptions"] = []
    out["waited"] = []
    heard = asyncio.Event()

    def note(method: str, uri) -> None:
        out["notices"].append([method, uri])
        heard.set()

    async def on_message(message) -> None:
        inner = getattr(message, "root", message)
        method = getattr(inner, "method", None)
        if method == "notifications/tools/list_changed":
            changed.set()
        if method in ("notifications/tools/list_changed", "notifications/resources/list_changed",
                      "notifications/prompts/list_changed", "notifications/resources/updated"):
            params = getattr(inner, "params", None)
            note(method, str(params.uri) if params is not None and hasattr(params, "uri") else None)

    async def listen(client, ready: asyncio.Event, step) -> None:
        from mcp.client.subscriptions import (PromptsListChanged, ResourcesListChanged, ResourceUpdated,
                                              ToolsListChanged)
        lists = bool(step.get("lists"))
        async with client.listen(tools_list_changed=True, resources_list_changed=lists,
                                 prompts_list_changed=lists,
                                 resource_subscriptions=step.get("resources", [])) as sub:
            out["honored"] = bool(getattr(sub.honored, "tools_list_changed", False))
            out["honored_filter"] = sub.honored.model_dump(exclude_none=True, by_alias=True)
            ready.set()
            async for event in sub:
                if isinstance(event, ToolsListChanged):
                    changed.set()
                    note("notifications/tools/list_changed", None)
                elif isinstance(event, ResourcesListChanged):
                    note("notifications/resources/list_changed", None)
                elif isinstance(event, PromptsListChanged):
                    note("notifications/prompts/list_changed", None)
                elif isinstance(event, ResourceUpdated):
                    note("notifications/resources/updated", str(event.uri))

    out["progress"] = []
    out["logs"] = []

    async def on_progress(progress, total, message) -> None:
        out["progress"].append([progress, total, message])

    async def on_log(params) -> None:
        out["logs"].append([params.level, params.data])

    listeners = []
    async with Client(server, mode=plan.get("mode", "auto"), elicitation_callback=callback, cache=None,
                      message_handler=on_message, logging_callback=on_log) as client:
        out["protocol"] = client.protocol_version
        if plan.get("mode") == "2026-07-28":
            # Without a probe the client assumes empty capabilities: ask the server.
            out["capabilities"] = (await client.session.send_discover("2026-07-28")).get("capabilities", {})
        else:
            out["capabilities"] = client.server_capabilities.model_dump(exclude_none=True, by_alias=True)
        for step in plan["steps"]:
            if step.get("list"):
                cursor = None
                listed = []
                while True:
                    page = await client.list_tools(cursor=cursor)
                    out["pages"] += 1
                    listed.extend(tool.name for tool in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                out["tools"].extend(listed)
                out["lists"].append(listed)
            elif step.get("listen"):
                ready = asyncio.Event()
                listeners.append(asyncio.create_task(listen(client, ready, step)))
                await asyncio.wait_for(ready.wait(), 20)
            elif "subscribe" in step or "unsubscribe" in step:
                uri = step.get("subscribe") or step.get("unsubscribe")
                try:
                    if "subscribe" in step:
                        await client.subscribe_resource(uri)
                    else:
                        await client.unsubscribe_resource(uri)
                    out["subscriptions"].append({"uri": uri, "ok": True})
                except Exception as error:
                    out["subscriptions"].append({"uri": uri, "error": str(error)})
            elif "wait_notice" in step:
                deadline = asyncio.get_running_loop().time() + step.get("seconds", 10)
                came = False
                while True:
                    if any(method == step["wait_notice"] for method, _ in out["notices"]):
                        came = True
                        break
                    left = deadline - asyncio.get_running_loop().time()
                    if left <= 0:
                        break
                    heard.clear()
                    try:
                        await asyncio.wait_for(heard.wait(), left)
                    except TimeoutError:
                        pass
                out["waited"].append(came)
            elif "sleep" in step:
                await asyncio.sleep(step["sleep"])
            elif "write_file" in step:
                with open(step["write_file"], "w") as ready:
                    ready.write("ready\n")
            elif "wait_changed" in step:
                try:
                    await asyncio.wait_for(changed.wait(), step["wait_changed"])
                    out["changes"].append(True)
                except TimeoutError:
                    out["changes"].append(False)
                changed.clear()
            elif step.get("offered"):
                for what, fetch in (("resources", client.list_resources),
                                    ("templates", client.list_resource_templates),
                                    ("prompt_list", client.list_prompts)):
                    cursor = None
                    seen = []
                    pages = 0
                    while True:
                        page = await fetch(cursor=cursor, cache_mode="bypass")
                        pages += 1
                        if what == "resources":
                            seen.extend({"uri": str(r.uri), "name": r.name} for r in page.resources)
                        elif what == "templates":
                            seen.extend({"uriTemplate": t.uri_template, "name": t.name}
                                        for t in page.resource_templates)
                        else:
                            seen.extend(p.name for p in page.prompts)
                        cursor = page.next_cursor
                        if not cursor:
                            break
                    out[what] = seen
                    out[what + "_pages"] = pages
            elif "read" in step:
                try:
                    result = await client.read_resource(step["read"], cache_mode="bypass")
                    out["reads"].append({"uri": step["read"],
                                         "texts": [getattr(c, "text", None) for c in result.contents]})
                except Exception as error:
                    out["reads"].append({"uri": step["read"], "error": str(error)})
            elif "prompt" in step:
                try:
                    result = await client.get_prompt(step["prompt"], step.get("args"))
                    texts = [getattr(m.content, "text", None) for m in result.messages]
                    out["prompts"].append({"name": step["prompt"], "texts": texts})
                except Exception as error:
                    out["prompts"].append({"name": step["prompt"], "error": str(error)})
            elif "complete" in step:
                ref_spec = step["complete"]
                if "prompt" in ref_spec:
                    ref = types.PromptReference(type="ref/prompt", name=ref_spec["prompt"])
                else:
                    ref = types.ResourceTemplateReference(type="ref/resource", uri=ref_spec["template"])
                try:
                    result = await client.complete(ref, step["argument"])
                    out["completions"].append({"values": result.completion.values})
                except Exception as error:
                    out["completions"].append({"error": str(error)})
            elif "call" in step:
                try:
                    follow = on_progress if step.get("progress") else None
                    result = await client.call_tool(step["call"], step.get("args", {}), progress_callback=follow)
                except Exception as error:  # a JSON-RPC error answer (unknown tool)
                    out["calls"].append({"name": step["call"], "error": str(error)})
                    continue
                text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
                out["calls"].append({"name": step["call"], "isError": bool(result.is_error), "text": text,
                                     "structured": result.structured_content})
        for task in listeners:
            task.cancel()
    print(json.dumps(out))


asyncio.run(main())
