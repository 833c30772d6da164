#!/usr/bin/env python3
"""Writes a tool pool and requests from MCPToolBench++ for `tool_eval`.

    python3 bench/search-eval/prepare_mcptoolbench.py GIT_DIR OUT_DIR [DISTRACTOR_POOL.jsonl]

GIT_DIR is a git directory (a clone or a mirror) of `mcp-tool-bench/MCPToolBenchPP`; the
files are read with `git show COMMIT:PATH` at the commit pinned below. Nothing is written
into this repository (the repository states no licence: its data is read, not copied).

- Requests: each item's `query` (single-step items of the categories whose data files
  are in the repository at that commit: browser, file system, finance, search).
- Expected tools: the names in its `function_call_label`.
- Pool: every tool offered to any item (`tools`, grouped by `mcp_tools_dict`'s server),
  once per server and name. With DISTRACTOR_POOL (a `pool.jsonl` of another set, such as
  LiveMCPBench's), its tools are added, so the requests are searched among several
  hundred real tools instead of the benchmark's few dozen.
"""

import json
import os
import subprocess
import sys

COMMIT = "323725c417b43a02bea5a1421662e299dbadeb77"
FILES = [
    "data/browser/browser_0724_single_v3.json",
    "data/file_system/filesystem_0723_single.json",
    "data/finance/finance_0724_single_v3.json",
    "data/search/search_0725_single_v2.json",
]


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    git_dir, out = sys.argv[1], sys.argv[2]
    pool = {}
    queries = []
    for path in FILES:
        text = subprocess.run(
            ["git", "--git-dir", git_dir, "show", f"{COMMIT}:{path}"],
            check=True,
            capture_output=True,
        ).stdout
        for item in json.loads(text):
            server_of = {
                name: server
                for server, names in item.get("mcp_tools_dict", {}).items()
                for name in names
            }
            for tool in item.get("tools", []):
                server = server_of.get(tool["name"], item.get("category", "unknown"))
                pool.setdefault(
                    (server, tool["name"]),
                    {
                        "server": server,
                        "name": tool["name"],
                        "description": (tool.get("description") or "").strip(),
                        "parameters": tool.get("input_schema") or {},
                    },
                )
            expected = []
            for label in item.get("function_call_label", []):
                if label["name"] not in expected:
                    expected.append(label["name"])
            if expected and item.get("query"):
                queries.append(
                    {
                        "id": item["uuid"],
                        "category": item.get("category", ""),
                        "query": item["query"],
                        "expected": expected,
                    }
                )
    tools = list(pool.values())
    own = len(tools)
    if len(sys.argv) == 4:
        with open(sys.argv[3]) as f:
            for line in f:
                if line.strip():
                    tools.append(json.loads(line))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "pool.jsonl"), "w") as f:
        for tool in tools:
            f.write(json.dumps(tool) + "\n")
    with open(os.path.join(out, "queries.jsonl"), "w") as f:
        for q in queries:
            f.write(json.dumps(q) + "\n")
    print(f"pool: {len(tools)} tools ({own} of the benchmark); queries: {len(queries)}")


if __name__ == "__main__":
    main()
