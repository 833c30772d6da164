#!/usr/bin/env python3
"""Many servers on a small machine (issue 15, decision 0036): what the catalogue cache, lazy
start and bounded starts give with 100 configured servers.

Usage: bench/many_servers.py WARDEN TESTSERVER [--servers N] [--rounds N]

WARDEN is the `warden` binary, TESTSERVER `warden-testserver` (both from one build).
Everything runs in a fresh temporary folder (its own state store, so the cache starts
empty); the servers are the Rust test server in `good` mode, confined as usual. Prints one
JSON object with:

- empty_cache: the first `warden tools --json` (every server started, at most
  `max_parallel_starts` at once, the default: the machine's parallelism): wall time, how
  many connected and failed;
- all_at_once: the same with `--refresh` and `max_parallel_starts` = N (every server at
  once), for comparison;
- from_cache: `warden tools --json` answered from the cache, `rounds` times: wall times
  (median, p90, min) and how many servers each started (the goal: none);
- search_from_cache: the same for `warden tools --search`;
- first_call: `warden call` of one server's tool with the cache filled: wall time and how
  many servers it started (the goal: one);
- memory: the resident memory of `warden serve` holding every server connected
  (`start = "eager"`) against the same gateway answering from the cache (none connected),
  and the difference per server.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def config(dir, testserver, count, host, eager=False):
    records = os.path.join(dir, "records")
    os.makedirs(records, exist_ok=True)
    os.chmod(records, 0o1777)
    lines = [f"[host]\n{host}\n"]
    for i in range(count):
        lines.append(
            f'[servers.s{i:03}]\ncommand = "{testserver}"\nargs = ["good"]\n'
            f'env = {{ WARDEN_TEST_START_LOG = "{records}/starts" }}\n'
            f'sandbox = {{ write = ["{records}"] }}\n'
            + ('start = "eager"\n' if eager else "")
        )
    lines.append('[policy]\nrules = [{ tools = "*", effect = "allow" }]\n')
    path = os.path.join(dir, "warden.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def starts(dir):
    try:
        with open(os.path.join(dir, "records", "starts")) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def env(dir):
    e = dict(os.environ)
    e["XDG_STATE_HOME"] = os.path.join(dir, "state")
    e["XDG_CONFIG_HOME"] = os.path.join(dir, "config-home")
    e.pop("WARDEN_LOG", None)
    return e


def run(warden, dir, cfg, args):
    began = time.perf_counter()
    out = subprocess.run(
        [warden, "--config", cfg, *args],
        cwd=dir,
        env=env(dir),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=900,
    )
    return time.perf_counter() - began, out


def states(out):
    servers = json.loads(out.stdout)["servers"]
    counts = {}
    for s in servers:
        counts[s["state"]] = counts.get(s["state"], 0) + 1
    return counts


def timed(warden, dir, cfg, args, rounds):
    times, started = [], []
    for _ in range(rounds):
        before = starts(dir)
        wall, out = run(warden, dir, cfg, args)
        assert out.returncode == 0, out.stderr.decode()
        times.append(wall * 1000)
        started.append(starts(dir) - before)
    times.sort()
    return {
        "median_ms": round(statistics.median(times), 1),
        "p90_ms": round(times[int(len(times) * 0.9) - 1], 1),
        "min_ms": round(times[0], 1),
        "servers_started": sorted(set(started)),
    }


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def serve_rss(warden, dir, cfg):
    """Starts `warden serve` (stdio), lists its tools, and returns its VmRSS (KiB) and
    how many tools it lists."""
    proc = subprocess.Popen(
        [warden, "serve", "--config", cfg],
        cwd=dir,
        env=env(dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    def ask(id, method, params):
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": id, "method": method, "params": params}) + "\n").encode())
        proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == id:
                return msg
    ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    tools, cursor, id = 0, None, 2
    while True:
        page = ask(id, "tools/list", {"cursor": cursor} if cursor else {})
        id += 1
        tools += len(page["result"]["tools"])
        cursor = page["result"].get("nextCursor")
        if not cursor:
            break
    time.sleep(1)
    rss = rss_kib(proc.pid)
    proc.stdin.close()
    proc.wait(timeout=120)
    return rss, tools


def main():
    warden, testserver = sys.argv[1], sys.argv[2]
    count = int(sys.argv[sys.argv.index("--servers") + 1]) if "--servers" in sys.argv else 100
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 20
    result = {"servers": count, "nproc": os.cpu_count()}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as dir:
        os.chmod(dir, 0o1777)
        cfg = config(dir, testserver, count, "")
        load = os.getloadavg()[0]
        wall, out = run(warden, dir, cfg, ["tools", "--json"])
        result["empty_cache"] = {"wall_s": round(wall, 2), "states": states(out), "servers_started": starts(dir), "load_before": load}
        result["from_cache"] = timed(warden, dir, cfg, ["tools", "--json"], rounds)
        result["search_from_cache"] = timed(warden, dir, cfg, ["tools", "--search", "add two integers", "--json"], rounds)
        before = starts(dir)
        wall, out = run(warden, dir, cfg, ["call", "--yes", f"s{count // 2:03}/echo", "--args", '{"message":"hi"}'])
        assert out.returncode == 0, out.stderr.decode()
        result["first_call"] = {"wall_ms": round(wall * 1000, 1), "servers_started": starts(dir) - before}
        cached_rss, tools = serve_rss(warden, dir, cfg)
        eager = config(dir, testserver, count, "", eager=True)
        before = starts(dir)
        eager_rss, eager_tools = serve_rss(warden, dir, eager)
        result["memory"] = {
            "serve_from_cache_kib": cached_rss,
            "serve_all_connected_kib": eager_rss,
            "servers_connected": starts(dir) - before,
            "tools_listed": [tools, eager_tools],
            "per_server_kib": round((eager_rss - cached_rss) / count, 1),
        }
        cfg = config(dir, testserver, count, f"max_parallel_starts = {count}")
        load = os.getloadavg()[0]
        wall, out = run(warden, dir, cfg, ["tools", "--refresh", "--json"])
        result["all_at_once"] = {"wall_s": round(wall, 2), "states": states(out), "load_before": load}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
