"""CodeSandbox: wall time of the oracle over all 65 tasks (``split="all"``), cold and warm sandboxes, one episode
at a time and on every core.

Each configuration plays every task once with the scripted oracle (``run_tests`` on the reference, then
``submit``: two sandboxed runs per episode) and must score 1.0 on all of them. Timed interleaved, round by round
(the machine is shared; compare ratios from one run):

- ``eval cold``: :func:`agentgym.app.evaluation.runner.evaluate_agent` (what ``agentgym eval --env
  agentgym/CodeSandbox-v0 --split all --agent oracle`` runs), one episode at a time;
- ``eval warm``: the same with ``env_kwargs={"warm": True}`` (``--env-kwargs '{"warm": true}'``; root only);
- ``N workers cold|warm``: the tasks shared among N threads, each with an env (and sandbox) of its own, as
  ``agentgym eval --concurrency N`` would play them with the patch proposed in issue 20's report.

    python benchmarks/code_eval_wall.py                  # 2 rounds, ~1 min on 2 cores
    python benchmarks/code_eval_wall.py --rounds 3 --workers 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Callable

import gymnasium as gym

from agentgym.app.evaluation.runner import evaluate_agent

ENV_ID = "agentgym/CodeSandbox-v0"


def sequential(warm: bool) -> Callable[[], int]:
    def run() -> int:
        summary = evaluate_agent(ENV_ID, "oracle", split="all", env_kwargs={"warm": warm}, progress_bar=False)
        return round(summary.success_rate * summary.episodes)

    return run


def parallel(workers: int, warm: bool) -> Callable[[], int]:
    def run() -> int:
        probe = gym.make(ENV_ID, split="all")
        todo = list(range(probe.unwrapped.num_tasks))
        probe.close()
        lock = threading.Lock()
        solved: list[int] = []

        def work() -> None:
            env = gym.make(ENV_ID, split="all", warm=warm)
            oracle = env.unwrapped.oracle()
            try:
                while True:
                    with lock:
                        if not todo:
                            return
                        index = todo.pop()
                    obs, _ = env.reset(options={"task_index": index})
                    while True:
                        obs, reward, terminated, truncated, info = env.step(oracle.predict(obs)[0])
                        if terminated or truncated:
                            break
                    if info["success"]:
                        with lock:
                            solved.append(index)
            finally:
                env.close()

        threads = [threading.Thread(target=work) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return len(solved)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    modes = [False, True] if os.geteuid() == 0 else [False]
    configs: dict[str, Callable[[], int]] = {}
    for warm in modes:
        configs[f"eval {'warm' if warm else 'cold'} (1 episode at a time)"] = sequential(warm)
    for warm in modes:
        configs[f"{args.workers} workers {'warm' if warm else 'cold'}"] = parallel(args.workers, warm)
    walls: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, run in configs.items():
            started = time.perf_counter()
            solved = run()
            walls[name].append(time.perf_counter() - started)
            assert solved == 65, f"{name}: the oracle solved {solved}/65"
    base = statistics.median(walls[next(iter(walls))])
    print(f"{ENV_ID}, oracle, 65 tasks, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {args.rounds} rounds")
    print(f"{'':40s} {'wall s':>7s} {'speed-up':>9s}")
    for name, values in walls.items():
        print(f"{name:40s} {statistics.median(values):7.2f} {base / statistics.median(values):8.2f}×")


if __name__ == "__main__":
    main()
