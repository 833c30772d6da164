"""Side-by-side load on two Streamable HTTP gateways in front of the same stdio server
(bench/gateways runs it: `warden serve --only t` and supergateway, both fronting
`warden-testserver good`).

Usage: python gateways.py NAME=URL [NAME=URL ...] --clients 1,8,32 --seconds S

Each client is a thread with its own keep-alive HTTP connection and its own 2025-11-25
session (initialize, notifications/initialized), then calls `echo {message: "hi"}` back to
back for S seconds, each call timed from the request's first byte to its parsed result.
Standard library only, so the client's own cost is the same for every gateway. Prints one
JSON line per gateway and client count: calls per second, p50 and p99 in microseconds,
errors.
"""

import http.client
import json
import sys
import threading
import time
import urllib.parse

ACCEPT = "application/json, text/event-stream"


def message_of(body: bytes) -> dict:
    text = body.decode("utf-8", "replace")
    data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1] if data else text)


class Session:
    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.path = parts.path
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.session = None
        self.next_id = 1

    def post(self, payload: dict) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": ACCEPT,
                   "Host": f"127.0.0.1:{self.conn.port}"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = "2025-11-25"
        self.conn.request("POST", self.path, json.dumps(payload), headers)
        response = self.conn.getresponse()
        body = response.read()
        if response.getheader("mcp-session-id"):
            self.session = response.getheader("mcp-session-id")
        return response.status, body

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        status, body = self.post({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                  "params": params})
        if status != 200:
            raise RuntimeError(f"{method}: HTTP {status}: {body[:200]!r}")
        return message_of(body)

    def open(self) -> None:
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})


def load(url: str, clients: int, seconds: float) -> dict:
    samples: list[int] = []
    errors = [0]
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)

    def client() -> None:
        session = Session(url)
        session.open()
        for _ in range(20):  # warm-up
            session.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
        start.wait()
        stop_at = time.perf_counter() + seconds
        mine = []
        failed = 0
        while time.perf_counter() < stop_at:
            began = time.perf_counter_ns()
            try:
                answer = session.request("tools/call",
                                         {"name": "echo", "arguments": {"message": "hi"}})
                text = answer["result"]["content"][0]["text"]
                if text != "echo: hi":
                    failed += 1
            except Exception:
                failed += 1
                session = Session(url)
                session.open()
                continue
            mine.append((time.perf_counter_ns() - began) // 1000)
        with lock:
            samples.extend(mine)
            errors[0] += failed

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    # Every client is connected and warm: the clock starts now.
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    samples.sort()
    return {
        "clients": clients,
        "calls": len(samples),
        "calls_per_s": round(len(samples) / elapsed, 1),
        "p50_us": samples[len(samples) // 2] if samples else None,
        "p99_us": samples[len(samples) * 99 // 100] if samples else None,
        "errors": errors[0],
    }


def main() -> None:
    args = sys.argv[1:]
    targets = [a.split("=", 1) for a in args if "=" in a and not a.startswith("--")]
    clients = [int(c) for c in args[args.index("--clients") + 1].split(",")]
    seconds = float(args[args.index("--seconds") + 1])
    for count in clients:
        for name, url in targets:
            result = load(url, count, seconds)
            result["gateway"] = name
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
