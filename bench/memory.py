#!/usr/bin/env python3
"""Host memory of `warden serve` (issues 11 and 15, decision 0055): what each connected
server and each idle client session costs Warden itself.

Usage: bench/memory.py WARDEN TESTSERVER [--servers 1,10,100] [--sessions 100,1000]
                       [--rounds 3] [--settle 11] [--unconfined]

WARDEN is the `warden` binary (release), TESTSERVER `warden-testserver` from the same build.
For every server count N, each round starts a fresh `warden serve --http` (its own state
folder, so nothing comes from a catalogue cache) with N configured servers (the Rust test
server in `good` mode, confined as usual, `start = "eager"` so every one starts with the
host, decision 0036), then:

1. opens one 2025-11-25 session, lists the whole catalogue and calls every server's `echo`
   once (so every connection has carried a call, not only a handshake), ends the session;
2. waits `--settle` seconds (11 by default: tokio's blocking threads that launched the
   servers exit after 10 s idle, so what is read is the steady state, not the start's) and
   reads Warden's own memory from /proc/PID/smaps_rollup (only Warden's process: the
   servers and the sandbox's helper processes are separate processes and not counted):
   Rss, Pss, Pss_Anon, Anonymous, Private_Dirty, its page tables and thread count; and
   beside it, Warden's helper processes (forks of Warden: each confined server's waiter
   and init) with their private memory and page tables, and `host_Pss`, the Pss of Warden
   and its helpers together (they share pages copy-on-write, which Pss splits between
   them: Warden's Pss alone understates it, the sum does not; servers excluded), and
   `host_total`, that plus the helpers' page tables (kernel memory no Pss counts);
3. in the runs of the smallest and the largest N: opens idle sessions over HTTP (2025-11-25
   `initialize` + `notifications/initialized`, each on its own connection, closed after;
   no GET stream, no call) up to each count of `--sessions`, reading the memory again
   after each step. With many servers this also shows the helpers' share growing while
   Warden works: each helper keeps the pages Warden had when it forked, and every page
   Warden writes afterwards becomes a copy of its own (copy-on-write).

Prints one JSON object: the machine, the date, the load average before and after, every
sample, and the fitted costs: bytes per connected server (least squares over the servers'
counts, per round, then the median) with the fixed base (the fit at zero servers), and
bytes per idle session (between the smallest and the largest session count). The numbers go
to docs/benchmarks.md with the machine, date and load.
"""

import argparse
import http.client
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

FIELDS = ("Rss", "Pss", "Pss_Anon", "Anonymous", "Private_Dirty")
# What the fits are made of: Warden's own process, and the host with its helpers
# (`host_total`: their Pss and the helpers' page tables, what decision 0055 judges).
FITTED = FIELDS + ("helpers_Private", "helpers_PageTables", "host_Pss", "host_total")


def smaps(pid):
    """Warden's own memory in bytes, from smaps_rollup."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in FIELDS:
                out[name] = int(rest.split()[0]) * 1024
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
    return out


def descendants(pid):
    """Every live process below `pid` (from each process's parent in /proc/*/stat)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, [])
    return found


def kib_fields(path, names):
    out = {}
    with open(path) as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in names:
                out[name] = out.get(name, 0) + int(rest.split()[0]) * 1024
    return out


def helpers(pid):
    """Warden's own helper processes below it (forks of Warden: the sandbox's waiter and
    init of each confined server), told from the servers by their executable. Each shares
    most of its pages with Warden copy-on-write, which lowers Warden's Pss; what they cost
    beyond that is their private memory and their page tables."""
    exe = os.readlink(f"/proc/{pid}/exe")
    out = {"helpers": 0, "helpers_Pss": 0, "helpers_Private": 0, "helpers_PageTables": 0}
    for child in descendants(pid):
        try:
            if os.readlink(f"/proc/{child}/exe") != exe:
                continue
            rollup = kib_fields(f"/proc/{child}/smaps_rollup", ("Pss", "Private_Clean", "Private_Dirty"))
            status = kib_fields(f"/proc/{child}/status", ("VmPTE",))
        except OSError:
            continue
        out["helpers"] += 1
        out["helpers_Pss"] += rollup.get("Pss", 0)
        out["helpers_Private"] += rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0)
        out["helpers_PageTables"] += status.get("VmPTE", 0)
    return out


def measure(pid):
    """Warden's own memory, its helpers', and the host's whole: Warden's Pss plus its
    helpers' (shared pages counted once over the family, servers excluded)."""
    out = smaps(pid)
    out.update(kib_fields(f"/proc/{pid}/status", ("VmPTE",)))
    out.update(helpers(pid))
    out["host_Pss"] = out["Pss"] + out["helpers_Pss"]
    out["host_total"] = out["host_Pss"] + out["helpers_PageTables"]
    return out


def config(dir, testserver, count, sessions, confine=True):
    records = os.path.join(dir, "records")
    os.makedirs(records, exist_ok=True)
    os.chmod(records, 0o1777)
    lines = [
        "[serve]",
        # Room for every idle session of the run, and no rate limit in the way of opening
        # them back to back (the default, 50 a second, is per session; the limiter for
        # requests outside a session is per principal).
        f"max_sessions = {max(sessions, default=0) + 16}",
        "requests_per_second = 1000000",
        "request_burst = 1000000",
        "",
    ]
    for i in range(count):
        lines.append(
            f'[servers.s{i:03}]\ncommand = "{testserver}"\nargs = ["good"]\n'
            f'env = {{ WARDEN_TEST_START_LOG = "{records}/starts" }}\n'
            + (f'sandbox = {{ write = ["{records}"] }}\n' if confine else "confine = false\n")
            + 'start = "eager"\n'
        )
    # Every echo allowed, also in a context the earlier servers' results made untrusted.
    lines.append(
        '[[policy.rules]]\ntools = "*"\neffect = "allow"\n'
        "even_if_tainted = true\neven_if_private = true\n"
    )
    path = os.path.join(dir, "warden.toml")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


class Served:
    """`warden serve --http 127.0.0.1:0`, its address read from stderr."""

    def __init__(self, warden, dir, cfg):
        env = dict(os.environ)
        env["XDG_STATE_HOME"] = os.path.join(dir, "state")
        env["XDG_CONFIG_HOME"] = os.path.join(dir, "config-home")
        env.pop("WARDEN_LOG", None)
        self.proc = subprocess.Popen(
            [warden, "serve", "--config", cfg, "--http", "127.0.0.1:0"],
            cwd=dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.log = []
        found = threading.Event()

        def drain():
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                self.log.append(line)
                if line.startswith("warden: serving MCP on "):
                    self.url = line.removeprefix("warden: serving MCP on ")
                    found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(600):
            self.stop()
            sys.exit("warden serve printed no address:\n" + "\n".join(self.log[-20:]))
        hostport = self.url.removeprefix("http://").removesuffix("/mcp")
        self.host, _, port = hostport.rpartition(":")
        self.port = int(port)

    def post(self, body, session=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Connection": "close",
        }
        if session:
            headers["Mcp-Session-Id"] = session
            headers["Mcp-Protocol-Version"] = "2025-11-25"
        conn.request("POST", "/mcp", json.dumps(body), headers)
        reply = conn.getresponse()
        text = reply.read().decode()
        sid = reply.getheader("mcp-session-id")
        conn.close()
        if reply.status not in (200, 202):
            raise RuntimeError(f"{body.get('method')}: HTTP {reply.status}: {text[:300]}")
        data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        message = json.loads(data[-1]) if data else (json.loads(text) if text.strip() else None)
        if message is not None and "error" in message:
            raise RuntimeError(f"{body.get('method')}: {message['error']}")
        return sid, message

    def open_session(self):
        sid, _ = self.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench-memory", "version": "1"},
                },
            }
        )
        if not sid:
            raise RuntimeError("initialize gave no Mcp-Session-Id")
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        return sid

    def end_session(self, sid):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": sid, "Connection": "close"})
        conn.getresponse().read()
        conn.close()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def use_every_server(served):
    """Lists the catalogue and calls each server's echo once; returns (tools, calls)."""
    sid = served.open_session()
    names, cursor, id = [], None, 2
    while True:
        _, page = served.post(
            {"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"cursor": cursor} if cursor else {}},
            sid,
        )
        id += 1
        names += [tool["name"] for tool in page["result"]["tools"]]
        cursor = page["result"].get("nextCursor")
        if not cursor:
            break
    echoes = [name for name in names if name.endswith("__echo")]
    for name in echoes:
        _, answer = served.post(
            {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": {"message": "hi"}}},
            sid,
        )
        id += 1
        if answer["result"].get("isError"):
            raise RuntimeError(f"{name}: {answer['result']}")
    served.end_session(sid)
    return len(names), len(echoes)


def fit(points):
    """Least squares y = base + slope * x over (x, y) points."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def machine():
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        total = f.readline().split()[1]
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "mem_total_kib": int(total),
        "kernel": platform.release(),
    }


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("warden")
    parser.add_argument("testserver")
    parser.add_argument("--servers", default="1,10,100")
    parser.add_argument("--sessions", default="100,1000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=11.0)
    parser.add_argument(
        "--unconfined",
        action="store_true",
        help="start the servers with `confine = false` (no sandbox, so no helper processes)",
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.servers.split(",")]
    sessions = [int(k) for k in args.sessions.split(",")]

    report = {
        "machine": machine(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "load_before": load(),
        "confined": not args.unconfined,
        "servers": {},
        "sessions": [],
    }
    with tempfile.TemporaryDirectory(prefix="warden-bench-memory.") as base:
        os.chmod(base, 0o755)
        # A copy a confined server (another uid when this runs as root) can execute.
        testserver = os.path.join(base, "warden-testserver")
        shutil.copy(args.testserver, testserver)
        os.chmod(testserver, 0o755)
        for r in range(args.rounds):
            for count in counts:
                dir = tempfile.mkdtemp(dir=base)
                os.chmod(dir, 0o755)
                with_sessions = count in (min(counts), max(counts))
                cfg = config(
                    dir, testserver, count, sessions if with_sessions else [], not args.unconfined
                )
                began = time.perf_counter()
                served = Served(args.warden, dir, cfg)
                try:
                    tools, calls = use_every_server(served)
                    if calls != count:
                        raise RuntimeError(f"{calls} of {count} servers answered")
                    ready_s = time.perf_counter() - began
                    time.sleep(args.settle)
                    sample = measure(served.proc.pid)
                    sample.update(round=r, tools=tools, ready_s=round(ready_s, 3))
                    report["servers"].setdefault(str(count), []).append(sample)
                    print(f"memory: round {r} servers {count}: {sample}", file=sys.stderr)
                    if with_sessions:
                        steps = [dict(measure(served.proc.pid), sessions=0, servers=count, round=r)]
                        opened = 0
                        for target in sessions:
                            while opened < target:
                                served.open_session()
                                opened += 1
                            time.sleep(args.settle)
                            steps.append(dict(measure(served.proc.pid), sessions=opened, servers=count, round=r))
                            print(f"memory: round {r} sessions {opened}: {steps[-1]}", file=sys.stderr)
                        report["sessions"].append(steps)
                finally:
                    served.stop()
    report["load_after"] = load()

    per_server = {}
    for field in FITTED:
        fits = []
        for r in range(args.rounds):
            points = [(int(n), s[field]) for n, samples in report["servers"].items() for s in samples if s["round"] == r]
            fits.append(fit(points))
        per_server[field] = {
            "base_bytes": int(statistics.median(b for b, _ in fits)),
            "bytes_per_server": int(statistics.median(s for _, s in fits)),
            "per_round": [[int(b), int(s)] for b, s in fits],
        }
    report["per_server"] = per_server
    if len(sessions) >= 1:
        per_session = {}
        for servers in sorted({steps[0]["servers"] for steps in report["sessions"]}):
            fields = {}
            for field in FITTED:
                slopes = []
                for steps in report["sessions"]:
                    if steps[0]["servers"] != servers:
                        continue
                    first = steps[1] if len(steps) > 2 else steps[0]
                    last = steps[-1]
                    slopes.append((last[field] - first[field]) / (last["sessions"] - first["sessions"]))
                fields[field] = {
                    "bytes_per_session": int(statistics.median(slopes)),
                    "per_round": [int(s) for s in slopes],
                }
            per_session[f"{servers} servers"] = fields
        report["per_session"] = per_session
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
