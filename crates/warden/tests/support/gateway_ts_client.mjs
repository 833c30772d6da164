// A real MCP client (the official TypeScript SDK, 2025-11-25) driving `warden serve` for the
// gateway tests: the same plan as gateway_client.py's, for the steps it shares.
//
// Usage: node gateway_ts_client.mjs SDK_DIR PLAN_JSON
//   SDK_DIR   the installed @modelcontextprotocol/sdk (the peers' node_modules)
//   PLAN_JSON {"stdio": {"command", "args", "env", "cwd"}} or {"url": ...}, and
//             "steps": [{"list": true} | {"call": NAME, "args": {...}}]
//
// Prints one JSON object: the server's capabilities, the tool names of every page, and
// each call's isError and text (or the JSON-RPC error's message).

import path from "node:path";

const [sdk, planText] = process.argv.slice(2);
const plan = JSON.parse(planText);
const load = (file) => import(path.join(sdk, "dist/esm", file));
const { Client } = await load("client/index.js");

let transport;
if (plan.stdio) {
  const { StdioClientTransport } = await load("client/stdio.js");
  transport = new StdioClientTransport({
    command: plan.stdio.command,
    args: plan.stdio.args,
    env: plan.stdio.env,
    cwd: plan.stdio.cwd,
    stderr: "inherit",
  });
} else {
  const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
  transport = new StreamableHTTPClientTransport(new URL(plan.url));
}

const client = new Client({ name: "warden-ts-test", version: "1.0.0" });
const out = { capabilities: null, tools: [], calls: [] };
const limit = setTimeout(() => {
  console.error("gateway_ts_client: no end within 60 s");
  process.exit(3);
}, 60_000);
await client.connect(transport);
out.capabilities = client.getServerCapabilities() ?? null;
for (const step of plan.steps) {
  if (step.list) {
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : undefined);
      out.tools.push(...page.tools.map((tool) => tool.name));
      cursor = page.nextCursor;
    } while (cursor);
  } else if (step.call) {
    try {
      const result = await client.callTool({ name: step.call, arguments: step.args ?? {} });
      const text = (result.content ?? [])
        .filter((block) => block.type === "text")
        .map((block) => block.text)
        .join("\n");
      out.calls.push({ name: step.call, isError: result.isError === true, text });
    } catch (error) {
      out.calls.push({ name: step.call, error: String(error.message ?? error) });
    }
  }
}
await client.close();
clearTimeout(limit);
console.log(JSON.stringify(out));
