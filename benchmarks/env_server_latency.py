"""Per-step overhead of a served env: CliffWalk stepped locally, over HTTP and over a WebSocket.

    python benchmarks/env_server_latency.py [--steps 2000]

Prints the median µs per step of each and the overhead against local play (issue 18's target: <= 2 ms per step
over the WebSocket, on loopback). The server runs in this process (its own threads), as tests run it.
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.serving.env_server import EnvServer

ENV_ID = "agentgym/CliffWalk-v0"
ACTIONS = [f'<tool_call>{{"name": "move", "arguments": {{"direction": "{d}"}}}}</tool_call>' for d in ("up", "down")]


def median_step_us(env: gym.Env, steps: int) -> float:
    env.reset(seed=0)
    times = []
    for i in range(steps):
        started = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(ACTIONS[i % 2])
        times.append(time.perf_counter() - started)
        if terminated or truncated:
            env.reset()
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    local = median_step_us(gym.make(ENV_ID), args.steps)
    rows = [("local", local)]
    with EnvServer(ENV_ID, port=0) as server:
        for transport in ("http", "ws"):
            env = gym.make("agentgym/Remote-v0", base_url=server.url, transport=transport)
            rows.append((transport, median_step_us(env, args.steps)))
            env.close()
    print(f"{ENV_ID}, {args.steps} steps, median µs/step")
    for name, us in rows:
        extra = "" if name == "local" else f"   overhead {us - local:8.0f} µs   ({us / local:.1f}x local)"
        print(f"{name:6} {us:9.0f}{extra}")
    ws = dict(rows)["ws"] - local
    print(f"WebSocket overhead {ws / 1000:.2f} ms/step: {'meets' if ws <= 2000 else 'misses'} the <= 2 ms target")


if __name__ == "__main__":
    main()
