#!/usr/bin/env python3
"""Turn LiveMCPBench's tasks and tool catalogue into Warden's search-evaluation files.

Usage: python3 prepare_livemcp.py SRC_DIR [OUT_DIR]   (default OUT_DIR /var/tmp/warden-search-eval/livemcp)

SRC_DIR holds two files of the LiveMCPBench repository (icip-cas/LiveMCPBench, Apache-2.0),
taken unchanged at the commit named in README.md:

  all_annotations.json  (annotated_data/all_annotations.json): 95 tasks written by people,
                        each with the tools a human annotator used to solve it
  tools.json            (tools/LiveMCPTool/tools.json): the tools/list answers of 70 public
                        MCP servers (527 tool definitions)

Writes:

  OUT_DIR/pool.jsonl     one line per tool definition: {"server", "server_description",
                         "name", "description", "parameters"}
  OUT_DIR/queries.jsonl  one line per task: {"id", "category", "query", "expected"}

`expected` is the annotator's tool list, names only (the annotation names tools, not
servers; a name that several servers define is found by any of them). Names the catalogue
does not define are dropped and counted; a task left with none is dropped.
"""

import json
import os
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "/var/tmp/warden-search-eval/livemcp"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(src, "tools.json"), encoding="utf-8") as f:
        servers = json.load(f)
    with open(os.path.join(src, "all_annotations.json"), encoding="utf-8") as f:
        tasks = json.load(f)

    pool = []
    for entry in servers:
        for key, listing in sorted(entry.get("tools", {}).items()):
            for tool in listing.get("tools", []):
                pool.append({
                    "server": key,
                    "server_description": entry.get("description") or "",
                    "name": tool["name"],
                    "description": tool.get("description") or "",
                    "parameters": tool.get("inputSchema") or {},
                })
    names = {t["name"] for t in pool}

    queries, dropped_names, dropped_tasks = [], [], 0
    for task in tasks:
        listed = task.get("Annotator Metadata", {}).get("Tools", "")
        expected = []
        for line in listed.splitlines():
            name = re.sub(r"^\s*\d+\.\s*", "", line).strip()
            if not name:
                continue
            if name not in names:
                dropped_names.append(name)
                continue
            if name not in expected:
                expected.append(name)
        if not expected:
            dropped_tasks += 1
            continue
        queries.append({
            "id": task["task_id"],
            "category": task.get("category", ""),
            "query": task["Question"],
            "expected": expected,
        })

    with open(os.path.join(out_dir, "pool.jsonl"), "w", encoding="utf-8") as f:
        for tool in pool:
            f.write(json.dumps(tool, ensure_ascii=False, sort_keys=True) + "\n")
    with open(os.path.join(out_dir, "queries.jsonl"), "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"pool: {len(pool)} tools from {len(servers)} servers")
    print(f"queries: {len(queries)} ({dropped_tasks} dropped with no known tool)")
    print(f"expected names: {sum(len(q['expected']) for q in queries)}; "
          f"dropped (not in the catalogue): {len(dropped_names)} {sorted(set(dropped_names))}")


if __name__ == "__main__":
    main()
