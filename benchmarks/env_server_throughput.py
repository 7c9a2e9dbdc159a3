"""Scale-out of served envs: CodeSandbox oracle-eval throughput with 1 vs 2 ``agentgym serve env`` processes.

    python benchmarks/env_server_throughput.py [--episodes 48] [--concurrency 4]

Starts the servers as subprocesses (``agentgym serve env --env agentgym/CodeSandbox-v0 --port P --operator``: the
oracle is an operator feature; 127.0.0.1),
plays ``agentgym eval --env-url URL[,URL] --agent oracle`` on them (``--concurrency`` sessions at once, spread
round-robin over the URLs, as :func:`agentgym.app.evaluation.runner.evaluate_agent` does) and prints episodes/s and
steps/s for each, and the ratio 2 servers / 1 server. Every episode must succeed (the oracle), or it says so.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.evaluation.runner import evaluate_agent

ENV_ID = "agentgym/CodeSandbox-v0"


def start_server() -> tuple[subprocess.Popen, str]:
    """One ``agentgym serve env`` process on a free port, and its URL once ``/health`` answers."""
    executable = str(Path(sys.executable).with_name("agentgym"))
    command = [executable, "serve", "env", "--env", ENV_ID, "--port", "0", "--operator"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    match = re.search(r"at (http://[\d.]+:\d+) ", process.stdout.readline())
    if match is None:
        process.kill()
        raise RuntimeError("agentgym serve env did not print its URL")
    url = match.group(1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the server at {url} never answered /health")


def throughput(servers: int, episodes: int, concurrency: int) -> tuple[float, float]:
    """Episodes/s and steps/s of an oracle eval over ``servers`` server processes."""
    started = [start_server() for _ in range(servers)]
    try:
        env_kwargs = {"base_url": [url for _, url in started], "env_id": ENV_ID}
        evaluate_agent("agentgym/Remote-v0", "oracle", episodes=2, env_kwargs=env_kwargs, concurrency=2)  # warm-up
        begin = time.perf_counter()
        summary = evaluate_agent(
            "agentgym/Remote-v0", "oracle", episodes=episodes, env_kwargs=env_kwargs, concurrency=concurrency
        )
        wall = time.perf_counter() - begin
    finally:
        for process, _ in started:
            process.terminate()
            process.wait(timeout=15)
    if summary.failures or summary.success_rate < 1.0:
        print(f"  warning: {summary.failures} failed, success {summary.success_rate:.0%}", file=sys.stderr)
    return episodes / wall, episodes * summary.mean_turns / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=4, help="sessions playing at once (spread over servers)")
    args = parser.parse_args()
    results = {}
    for servers in (1, 2):
        results[servers] = throughput(servers, args.episodes, args.concurrency)
        eps, steps = results[servers]
        print(f"{servers} server process(es): {eps:.2f} episodes/s, {steps:.1f} steps/s "
              f"({args.episodes} oracle episodes, {args.concurrency} sessions)", flush=True)  # fmt: skip
    print(f"2 servers / 1 server: {results[2][0] / results[1][0]:.2f}x episodes/s")


if __name__ == "__main__":
    main()
