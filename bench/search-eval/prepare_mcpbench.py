#!/usr/bin/env python3
"""Writes a tool pool and requests from MCP-Bench (Accenture/mcp-bench) for `tool_eval`.

    python3 bench/search-eval/prepare_mcpbench.py GIT_DIR OUT_DIR [COMMIT]

GIT_DIR is a git directory (a clone or a mirror) of the repository `Accenture/mcp-bench`;
COMMIT defaults to the one pinned below. Everything is read with `git show COMMIT:PATH`, so
a partial snapshot (large blobs missing) is enough. Nothing is written into this repository.

- Requests: each task's `fuzzy_description` (the benchmark's rewording of the task as a
  person would ask it, without naming tools) from `tasks/*.json`.
- Expected tools: the `Server:tool` references in the same task's `task_description` (the
  precise plan the fuzzy request was written from), kept when the tool is in the pool.
- Pool: the benchmark did not record its servers' `tools/list` answers, so the tool
  definitions are read from the 28 servers' source under `mcp_servers/` (the directory each
  server runs from, `mcp_servers/commands.json`): Python tools declared with a `tool`
  decorator (name, docstring or `description=`, parameter names) or as `Tool(name=...,
  description=..., inputSchema=...)`; JavaScript and TypeScript tools declared as
  `.tool("name", "description", ...)` or as object literals `name: "...", description:
  "..."`. This is a reading of the source, not of a running server: a tool built at run
  time is missed, and a description assembled from pieces may be cut.

Output: `pool.jsonl` (`server`, `name`, `description`, `parameters`) and `queries.jsonl`
(`id`, `category`, `query`, `expected`), the formats `examples/tool_eval.rs` reads.
"""

import ast
import json
import os
import re
import subprocess
import sys

COMMIT = "09e52332b22428bf891be59047e01cb9adc063b4"
TASK_FILES = [
    "tasks/mcpbench_tasks_single_runner_format.json",
    "tasks/mcpbench_tasks_multi_2server_runner_format.json",
    "tasks/mcpbench_tasks_multi_3server_runner_format.json",
]
SOURCE_EXTS = (".py", ".ts", ".js")
SKIP_PARTS = ("test", "node_modules", "dist/", "build/", "example", "MedCalcBench", "docs/")


def git(git_dir, *args):
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True
    ).stdout


def show(git_dir, commit, path):
    try:
        return git(git_dir, "show", f"{commit}:{path}").decode("utf-8", "replace")
    except subprocess.CalledProcessError:
        return None


def const_str(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return None


def python_tools(text):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = []
    # String constants assigned in the file (`GET_TIME = "get_time"` in an Enum), so that
    # `name=Tools.GET_TIME.value` resolves.
    constants = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            if isinstance(node.targets[0], ast.Name) and const_str(node.value):
                constants[node.targets[0].id] = const_str(node.value)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for dec in node.decorator_list:
                call = dec if isinstance(dec, ast.Call) else None
                target = call.func if call else dec
                label = ast.unparse(target)
                if not re.search(r"(^|\.)tool$", label):
                    continue
                kwargs = {k.arg: const_str(k.value) for k in (call.keywords if call else [])}
                name = kwargs.get("name") or (
                    const_str(call.args[0]) if call and call.args else None
                ) or node.name
                desc = kwargs.get("description") or ast.get_docstring(node) or ""
                params = [
                    a.arg
                    for a in node.args.args + node.args.kwonlyargs
                    if a.arg not in ("self", "ctx", "context", "cls")
                ]
                schema = {"type": "object", "properties": {p: {} for p in params}}
                found.append((name, desc, schema))
        elif isinstance(node, ast.Call):
            label = ast.unparse(node.func)
            if not re.search(r"(^|\.)Tool$", label):
                continue
            kwargs = {k.arg: k.value for k in node.keywords}
            name = None
            if "name" in kwargs:
                name = const_str(kwargs["name"])
                if name is None:
                    parts = re.findall(r"\w+", ast.unparse(kwargs["name"]))
                    name = next((constants[p] for p in parts if p in constants), None)
            if not name:
                continue
            desc = const_str(kwargs.get("description")) or ""
            schema = {"type": "object"}
            if "inputSchema" in kwargs:
                try:
                    schema = ast.literal_eval(kwargs["inputSchema"])
                except (ValueError, SyntaxError):
                    props = re.findall(r"['\"](\w+)['\"]\s*:\s*\{", ast.unparse(kwargs["inputSchema"]))
                    schema = {"type": "object", "properties": {p: {} for p in props if p != "properties"}}
            found.append((name, desc, schema))
    return found


STRING = r"""(?:"((?:\\.|[^"\\])*)"|'((?:\\.|[^'\\])*)'|`((?:\\.|[^`\\])*)`)"""


def js_string(groups):
    s = next((g for g in groups if g is not None), "")
    return re.sub(r"\\(.)", r"\1", s)


def js_description(text, start):
    """A description that may be several string literals joined with `+`."""
    parts = []
    pos = start
    while True:
        m = re.compile(r"\s*" + STRING).match(text, pos)
        if not m:
            break
        parts.append(js_string(m.groups()))
        pos = m.end()
        plus = re.compile(r"\s*\+").match(text, pos)
        if not plus:
            break
        pos = plus.end()
    return "".join(parts), pos


def js_params(text, start):
    """Parameter names of the first `properties: {` (or zod object) after `start`."""
    window = text[start : start + 3000]
    zod = re.findall(r"^\s*(\w+)\s*:\s*z\.", window, re.M)
    if zod:
        return {"type": "object", "properties": {n: {} for n in dict.fromkeys(zod)}}
    m = re.search(r"properties\s*:\s*\{", window)
    body = window[m.end() :] if m else window
    names = []
    depth = 0
    for tok in re.finditer(r"[{}]|^\s*([A-Za-z_]\w*)\s*:", body, re.M):
        if tok.group(0) == "{":
            depth += 1
        elif tok.group(0) == "}":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and tok.group(1) not in ("type", "description", "required"):
            names.append(tok.group(1))
    return {"type": "object", "properties": {n: {} for n in names}}


def js_tools(text):
    found = []
    for m in re.finditer(r"\.(?:tool|registerTool)\(\s*" + STRING + r"\s*,", text):
        name = js_string(m.groups())
        desc, end = js_description(text, m.end())
        if not desc:
            d = re.compile(r"\s*\{\s*(?:title\s*:\s*" + STRING + r"\s*,\s*)?description\s*:").match(text, m.end())
            if d:
                desc, end = js_description(text, d.end())
        found.append((name, desc, js_params(text, end)))
    for m in re.finditer(r"\bname\s*:\s*" + STRING + r"\s*,\s*(?:title\s*:\s*" + STRING + r"\s*,\s*)?description\s*:", text):
        name = js_string(m.groups()[:3])
        desc, end = js_description(text, m.end())
        found.append((name, desc, js_params(text, end)))
    m = re.search(r"\bconst\s+NAME\s*=\s*" + STRING + r"\s*;?\s*const\s+DESCRIPTION\s*=", text)
    if m:
        desc, end = js_description(text, m.end())
        found.append((js_string(m.groups()), desc, js_params(text, end)))
    for m in re.finditer(r"\bname(?:\s*:\s*string)?\s*=\s*" + STRING + r"\s*;?\s*(?:public\s+)?(?:readonly\s+)?description(?:\s*:\s*string)?\s*=", text):
        desc, end = js_description(text, m.end())
        found.append((js_string(m.groups()), desc, js_params(text, end)))
    return found


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    git_dir, out = sys.argv[1], sys.argv[2]
    commit = sys.argv[3] if len(sys.argv) == 4 else COMMIT
    commands = json.loads(show(git_dir, commit, "mcp_servers/commands.json"))
    files = git(git_dir, "ls-tree", "-r", "--name-only", commit, "mcp_servers").decode().split("\n")
    pool = {}
    for server, spec in commands.items():
        root = "mcp_servers/" + spec["cwd"].replace("../", "", 1).rstrip("/")
        tools = {}
        for path in files:
            if not path.startswith(root + "/") or not path.endswith(SOURCE_EXTS):
                continue
            if any(p in path[len(root) :] for p in SKIP_PARTS) or path.endswith(".d.ts"):
                continue
            text = show(git_dir, commit, path)
            if text is None:
                continue
            extract = python_tools if path.endswith(".py") else js_tools
            for name, desc, schema in extract(text):
                if not re.fullmatch(r"[A-Za-z][\w-]{1,80}", name):
                    continue
                old = tools.get(name)
                if old is None or (len(desc) > len(old[0]) and len(desc) < 8000):
                    tools[name] = (desc.strip(), schema)
        pool[server] = tools
    queries = []
    missing = {}
    unlabelled = 0
    for task_file in TASK_FILES:
        data = json.loads(show(git_dir, commit, task_file))
        for group in data["server_tasks"]:
            servers = group["server_name"].split("+")
            for task in group["tasks"]:
                expected = []
                plan = task["task_description"]
                for server in servers:
                    for tool in pool.get(server, {}):
                        # A tool named by a plain word ("think", "search") counts only
                        # when the plan names it with its server ("BioMCP:think"); a
                        # compound name (`get_article`, `getApiOverview`) anywhere.
                        plain = re.fullmatch(r"[a-z]+", tool) is not None
                        word = r"(?<![\w-])" + re.escape(tool) + r"(?![\w-])"
                        pattern = re.escape(server) + r"\s*:\s*" + re.escape(tool) + r"(?![\w-])" if plain else word
                        if re.search(pattern, plan) and tool not in expected:
                            expected.append(tool)
                for server, tool in re.findall(
                    r"(" + "|".join(re.escape(s) for s in servers) + r")\s*:\s*([A-Za-z_][\w-]*)", plan
                ):
                    if tool not in pool.get(server, {}):
                        missing[f"{server}:{tool}"] = missing.get(f"{server}:{tool}", 0) + 1
                unlabelled += not expected
                if expected and task.get("fuzzy_description"):
                    queries.append(
                        {
                            "id": task["task_id"],
                            "category": f"{len(servers)}-server",
                            "query": task["fuzzy_description"],
                            "expected": expected,
                        }
                    )
    os.makedirs(out, exist_ok=True)
    count = 0
    with open(os.path.join(out, "pool.jsonl"), "w") as f:
        for server, tools in pool.items():
            slug = re.sub(r"[^a-z0-9]+", "-", server.lower()).strip("-")
            for name, (desc, schema) in sorted(tools.items()):
                f.write(json.dumps({"server": slug, "name": name, "description": desc, "parameters": schema}) + "\n")
                count += 1
    with open(os.path.join(out, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    per_server = {s: len(t) for s, t in pool.items()}
    print(f"pool: {count} tools of {len(pool)} servers {per_server}")
    print(f"queries: {len(queries)}; labels: {sum(len(q['expected']) for q in queries)}")
    print(f"tasks whose plan names no pooled tool (left out): {unlabelled}")
    print(f"references not in the pool (dropped): {len(missing)} {sorted(missing.items(), key=lambda x: -x[1])[:40]}")


if __name__ == "__main__":
    main()
