"""The env server and the MCP server under load and faults: sessions held, p99 step latency, RSS and threads.

    python benchmarks/server_load.py [--rounds 3] [--steps 20] [--out benchmarks/results/server_load.json]

Each server runs as its own process (``agentgym serve env`` / ``agentgym serve mcp --transport http`` on
127.0.0.1, WeatherRun-v0's test split, a 2-s idle timeout), so its RSS and thread count are its own, read from
``/proc``. Each round, against the server as it was left by the round before:

- env server: 64 WebSocket sessions (``agentgym/Remote-v0``, one client thread each) step ``--steps`` times at
  once; then the faults: 8 clients send a step and vanish, one floods pings for 3 s without reading, and 64
  sessions are opened, reset and never closed (the idle reaper must close them);
- MCP server: 64 clients connect at once (the server holds 16, the rest are refused) and the held ones call
  tools ``--steps`` times at once (one run, shared: every call is a step of it); 8 clients vanish mid-call; the
  16 sessions are dropped without being closed (the idle timeout must close them).

Then it waits for the reaping and records RSS and threads. It prints, per server and round: sessions held,
p50/p99 step latency, refusals, RSS and threads before and after. A leak shows as RSS or threads that keep rising
from round to round; the first round's rise is the allocator's and the imports' warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx

import agentgym  # noqa: F401  (registers the ids)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' raw WebSocket client, for misbehaving
from tests.test_hostile_servers import ws_frame, ws_open  # noqa: E402

ENV_ID = "agentgym/WeatherRun-v0"
IDLE_S = 2.0
AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def start(command: list[str]) -> tuple[subprocess.Popen, str]:
    """A server process and the URL it prints once its socket is bound."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = process.stdout.readline()
    match = re.search(r"at (http://[\d.]+:\d+(?:/mcp)?) ", line)
    if match is None:
        process.kill()
        raise RuntimeError(f"{command[1:4]} printed no URL: {line!r}")
    return process, match.group(1)


def proc_status(pid: int) -> dict[str, int]:
    """The process's RSS (MiB) and threads, from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {"rss_mib": int(fields["VmRSS"].split()[0]) // 1024, "threads": int(fields["Threads"])}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def wait_until(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


# ---------------------------------------------------------------------------------------------- env server


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    return host, int(port)


def metric(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))


def env_round(url: str, steps: int) -> dict[str, Any]:
    sampler = gym.make(ENV_ID, split="test").unwrapped
    held, latencies = [], []
    ready = threading.Barrier(64)

    def play(i: int) -> list[float]:
        env = gym.make("agentgym/Remote-v0", base_url=url, transport="ws", timeout_s=120)
        env.reset(seed=i, options={"task_index": i})
        ready.wait(timeout=300)
        if i == 0:
            held.append(metric(url, "agentgym_env_sessions_open"))
        city = env.unwrapped.task_prompt().split(" a good day to go running in ")[1].split("?")[0]
        took = []
        for k in range(steps):
            action = sampler.canonical("get_weather" if k % 2 else "get_air_quality", city=city)
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            took.append(time.perf_counter() - t0)
            if terminated or truncated:
                env.reset(seed=i, options={"task_index": i})
        env.close()
        return took

    with ThreadPoolExecutor(64) as pool:
        for took in pool.map(play, range(64)):
            latencies += took
    with httpx.Client(base_url=url, timeout=30) as http:  # faults
        for i in range(8):  # a step, then gone
            sid = http.post("/v1/sessions", json={}).json()["session"]
            http.post(f"/v1/sessions/{sid}/reset", json={"seed": i})
            sock = ws_open(address(url), f"/v1/sessions/{sid}/ws")
            sock.sendall(ws_frame(0x1, json.dumps({"op": "step", "action": "answer(true)"}).encode()))
            sock.close()
        sid = http.post("/v1/sessions", json={}).json()["session"]
        flood = ws_open(address(url), f"/v1/sessions/{sid}/ws")
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        flood.settimeout(0.5)
        burst, sent, end = ws_frame(0x9, b"p" * 125) * 512, 0, time.monotonic() + 3
        while time.monotonic() < end:
            try:
                sent += flood.send(burst[sent % len(burst) :])
            except TimeoutError:
                pass
        flood.close()
        for i in range(64):  # never closed
            sid = http.post("/v1/sessions", json={}).json()["session"]
            http.post(f"/v1/sessions/{sid}/reset", json={"seed": i})
    wait_until(lambda: metric(url, "agentgym_env_sessions_open") == 0, 30)
    return {
        "sessions_held": int(held[0]),
        "steps": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5) * 1e3, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1e3, 1),
        "ping_flood_accepted_mib": round(sent / (1 << 20), 1),
        "sessions_open_after": int(metric(url, "agentgym_env_sessions_open")),
        "reaped_total": int(metric(url, "agentgym_env_sessions_reaped_total")),
    }


# ---------------------------------------------------------------------------------------------- MCP server


async def mcp_round(url: str, steps: int) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    latencies: list[float] = []
    refused = 0

    async def connect(stack: AsyncExitStack) -> ClientSession | None:
        nonlocal refused
        try:
            read, write = await stack.enter_async_context(streamable_http_client(url, terminate_on_close=False))
            session = await stack.enter_async_context(ClientSession(read, write))
            await asyncio.wait_for(session.initialize(), 30)
            return session
        except BaseException:  # noqa: BLE001 (a refusal surfaces as an exception group from the SDK's task group)
            refused += 1
            return None

    async def play(session: ClientSession) -> None:
        for _ in range(steps):
            t0 = time.perf_counter()
            result = await session.call_tool("get_weather", {"city": "Lima"})
            latencies.append(time.perf_counter() - t0)
            if (result.structured_content or {}).get("episode_over"):
                await session.call_tool("next_task", {})

    held = []
    for _ in range(64):
        stack = AsyncExitStack()
        session = await connect(stack)
        if session is not None:
            held.append((stack, session))
        else:
            try:
                await stack.aclose()
            except BaseException:  # noqa: BLE001
                pass
    await held[0][1].call_tool("next_task", {})
    await asyncio.gather(*(play(session) for _, session in held))
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "get_weather", "arguments": {"city": "Lima"}}}).encode()  # fmt: skip
    for _ in range(8):  # a call, then gone (no session: refused or answered, the connection is dropped)
        sock = socket.create_connection(address(url))
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Accept: application/json, text/event-stream\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # fmt: skip
        sock.close()
    for stack, _ in held:  # dropped, never closed: the server's idle timeout must close them
        try:
            await stack.aclose()
        except BaseException:  # noqa: BLE001
            pass
    return {
        "sessions_held": len(held),
        "refused": refused,
        "calls": len(latencies),
        "p50_ms": round(percentile(latencies, 0.5) * 1e3, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1e3, 1),
    }


async def mcp_accepts(url: str) -> bool:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    try:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), 30)
        return True
    except BaseException:  # noqa: BLE001
        return False


# ---------------------------------------------------------------------------------------------- main


def run(name: str, command: list[str], one_round: Any, rounds: int) -> list[dict[str, Any]]:
    process, url = start(command)
    rows = []
    try:
        time.sleep(1.0)
        for r in range(rounds):
            before = proc_status(process.pid)
            row = {"server": name, "round": r + 1, **one_round(url)}
            time.sleep(IDLE_S + 2)  # past the idle timeout and the reaper's next look
            after = proc_status(process.pid)
            row |= {"rss_before_mib": before["rss_mib"], "rss_after_mib": after["rss_mib"],
                    "threads_before": before["threads"], "threads_after": after["threads"]}  # fmt: skip
            if name == "mcp":
                row["new_session_after"] = asyncio.run(mcp_accepts(url))  # the 16 were closed by the server
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="steps (tool calls) per session per round")
    parser.add_argument("--out", default="benchmarks/results/server_load.json")
    args = parser.parse_args()
    common = ["--env", ENV_ID, "--port", "0", "--idle-timeout", str(IDLE_S)]
    env = [AGENTGYM, "serve", "env", *common, "--env-kwargs", '{"split": "test"}', "--max-sessions", "80"]
    rows = run("env", env, lambda url: env_round(url, args.steps), args.rounds)
    mcp = [AGENTGYM, "serve", "mcp", "--transport", "http", *common, "--split", "test", "--episodes", "1000"]
    rows += run("mcp", mcp, lambda url: asyncio.run(mcp_round(url, args.steps)), args.rounds)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"env_id": ENV_ID, "steps_per_session": args.steps, "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
