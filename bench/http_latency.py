"""Per-call latency of the Python SDK's own Streamable HTTP client (bench/http-latency runs it).

Usage: python http_latency.py URL ERA CALLS
Opens `mcp.client.Client(URL)` in ERA (`legacy`: the initialize handshake; `modern`: pinned to
2026-07-28), makes 50 warm-up calls of `add {a: 2, b: 3}`, then CALLS sequential calls, each
timed from call to parsed result, and prints one JSON line like the Warden harness.
"""

import asyncio
import json
import statistics
import sys
import time

from mcp.client.client import Client


async def main() -> None:
    url, era, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mode = "legacy" if era == "legacy" else "2026-07-28"
    async with Client(url, mode=mode) as client:
        for _ in range(50):
            await client.call_tool("add", {"a": 2, "b": 3})
        samples = []
        for _ in range(calls):
            started = time.perf_counter_ns()
            result = await client.call_tool("add", {"a": 2, "b": 3})
            samples.append((time.perf_counter_ns() - started) // 1000)
            assert result.structured_content == {"result": 5}, result
    samples.sort()
    print(json.dumps({
        "client": "python-sdk", "era": era, "calls": calls,
        "median_us": samples[len(samples) // 2],
        "p99_us": samples[len(samples) * 99 // 100],
        "mean_us": int(statistics.mean(samples)),
    }))


asyncio.run(main())
