#!/usr/bin/env python3
"""Extract tool-retrieval queries and a tool pool from the bfcl-eval wheel.

Usage: python3 prepare.py [OUT_DIR]   (default /var/tmp/warden-search-eval)

Downloads the `bfcl-eval` wheel with `pip download --no-deps` (nothing is installed), reads
the question files and their possible_answer files straight out of the zip, and writes:

  OUT_DIR/queries.jsonl  one line per query: {"id", "category", "query", "expected"}
  OUT_DIR/pool.jsonl     one line per distinct function name: {"name", "description",
                         "parameters"}
  OUT_DIR/pool-all.jsonl one line per distinct definition (same fields): a name defined
                         differently by different queries appears once per definition

The query is the text of the user turns of the first turn, joined by newlines. The expected
functions are the distinct function names in the query's ground truth. A function name that
appears with different definitions in different queries is kept once, with the first
definition met (categories in the order below, queries in file order); how many names that
affected is printed.
"""

import glob
import json
import os
import subprocess
import sys
import zipfile

CATEGORIES = [
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
]
DATA = "bfcl_eval/data/"


def wheel_path(out_dir):
    wheel_dir = os.path.join(out_dir, "wheel")
    found = sorted(glob.glob(os.path.join(wheel_dir, "bfcl_eval-*.whl")))
    if not found:
        os.makedirs(wheel_dir, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-d", wheel_dir, "bfcl-eval"],
            check=True,
        )
        found = sorted(glob.glob(os.path.join(wheel_dir, "bfcl_eval-*.whl")))
    if not found:
        sys.exit(f"no bfcl_eval wheel in {wheel_dir}")
    return found[-1]


def read_jsonl(zf, name):
    return [json.loads(line) for line in zf.read(name).decode("utf-8").splitlines() if line.strip()]


def user_text(question):
    # `question` is a list of turns, each a list of messages; single-turn categories have one.
    turn = question[0] if question else []
    return "\n".join(m["content"] for m in turn if m.get("role") == "user" and m.get("content"))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/warden-search-eval"
    os.makedirs(out_dir, exist_ok=True)
    wheel = wheel_path(out_dir)
    pool = {}
    every = {}
    conflicting = set()
    queries = []
    with zipfile.ZipFile(wheel) as zf:
        for category in CATEGORIES:
            questions = read_jsonl(zf, f"{DATA}BFCL_v4_{category}.json")
            answers = {a["id"]: a for a in read_jsonl(zf, f"{DATA}possible_answer/BFCL_v4_{category}.json")}
            for q in questions:
                for fn in q["function"]:
                    definition = {
                        "name": fn["name"],
                        "description": fn.get("description", ""),
                        "parameters": fn.get("parameters", {}),
                    }
                    every.setdefault(json.dumps(definition, sort_keys=True), definition)
                    known = pool.setdefault(fn["name"], definition)
                    if known != definition:
                        conflicting.add(fn["name"])
                answer = answers.get(q["id"])
                if answer is None:
                    continue
                expected = []
                for call in answer["ground_truth"]:
                    for name in call:
                        if name not in expected:
                            expected.append(name)
                text = user_text(q["question"])
                if not expected or not text:
                    continue
                queries.append({"id": q["id"], "category": category, "query": text, "expected": expected})

    missing = {n for q in queries for n in q["expected"] if n not in pool}
    with open(os.path.join(out_dir, "pool.jsonl"), "w", encoding="utf-8") as f:
        for name in sorted(pool):
            f.write(json.dumps(pool[name], ensure_ascii=False, sort_keys=True) + "\n")
    with open(os.path.join(out_dir, "pool-all.jsonl"), "w", encoding="utf-8") as f:
        for key in sorted(every):
            f.write(key + "\n")
    with open(os.path.join(out_dir, "queries.jsonl"), "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"wheel: {os.path.basename(wheel)}")
    print(f"pool: {len(pool)} distinct function names ({len(conflicting)} with differing definitions, first kept)")
    print(f"pool-all: {len(every)} distinct definitions")
    print(f"queries: {len(queries)}; expected names missing from the pool: {len(missing)}")
    for category in CATEGORIES:
        print(f"  {category}: {sum(1 for q in queries if q['category'] == category)}")


if __name__ == "__main__":
    main()
