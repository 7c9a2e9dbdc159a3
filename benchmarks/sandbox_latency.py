"""CodeSandbox: latency of sandboxed runs next to a bare ``python3 -I -c "print(1)"`` subprocess, and throughput.

Timed, interleaved round by round after a warm-up, for each isolation layer this machine has:

- ``bare``: ``subprocess.run([python, "-I", "-c", "print(1)"])`` with the sandbox's own interpreter (the peer,
  1.0×; no isolation, no limits);
- ``sandbox.run``: ``Sandbox(layer).run("print(1)")``: namespaces, file system, rlimits, uid drop, output
  capture, the leftover-process sweep;
- ``run_python``: ``env.step(run_python("print(1)"))`` on ``CodeSandboxEnv``: the whole tool call;
- ``submit``: ``env.step(submit(reference))`` on the ``rle_encode`` task: define the code, 6 hidden tests, judge
  the values outside (each round resets the env first, untimed).

Then throughput: ``print(1)`` runs per second with 1 and 2 worker threads, sandboxed and bare, and submits per
second with 2 workers (one env each).

    python benchmarks/sandbox_latency.py                 # 100 rounds, ~25 s
    python benchmarks/sandbox_latency.py --rounds 300 --layers bwrap
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from agentgym.envs.code_sandbox import CodeSandboxEnv
from agentgym.envs.sandbox import Sandbox, layer_status
from agentgym.tools import ToolCall


def stats(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered) * 1e3, ordered[int(0.95 * (len(ordered) - 1))] * 1e3


def throughput(fn: Callable[[], object], workers: int, calls: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(fn) for _ in range(calls)]:
            future.result()
    return calls / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--calls", type=int, default=200, help="calls per throughput measurement")
    parser.add_argument("--layers", nargs="*", default=["bwrap", "unshare"])
    args = parser.parse_args()

    status = layer_status()
    layers = [layer for layer in args.layers if status.get(layer) is None]
    for layer in args.layers:
        if status.get(layer) is not None:
            print(f"skipping {layer}: {status[layer]}")
    if not layers:
        raise SystemExit("no sandbox layer to measure")
    boxes = {layer: Sandbox(layer) for layer in layers}
    python = boxes[layers[0]].python.executable

    def bare() -> None:
        subprocess.run([python, "-I", "-c", "print(1)"], capture_output=True, stdin=subprocess.DEVNULL, check=True)

    envs = {layer: CodeSandboxEnv(split="all", sandbox=box) for layer, box in boxes.items()}
    task_index = next(i for i, t in enumerate(envs[layers[0]].tasks) if t.id == "rle_encode")
    run_action = ToolCall("run_python", {"code": "print(1)"}).to_text()
    submit_action = ToolCall("submit", {"code": envs[layers[0]].tasks[task_index].solution}).to_text()

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            started = time.perf_counter()
            fn()
            return time.perf_counter() - started

        return run

    def timed_step(env: CodeSandboxEnv, action: str) -> Callable[[], float]:
        def run() -> float:
            env.reset(options={"task_index": task_index})  # untimed: each timed call is one step
            started = time.perf_counter()
            _, reward, *_ = env.step(action)
            elapsed = time.perf_counter() - started
            assert action == run_action or reward == 1.0
            return elapsed

        return run

    runners: dict[str, Callable[[], float]] = {"bare python3 -I -c": timed(bare)}
    for layer in layers:
        runners[f"{layer}: sandbox.run"] = timed(lambda box=boxes[layer]: box.run("print(1)"))
        runners[f"{layer}: run_python step"] = timed_step(envs[layer], run_action)
        runners[f"{layer}: submit step"] = timed_step(envs[layer], submit_action)

    for run in runners.values():  # warm-up: page cache, layer probes, memoised parses
        for _ in range(3):
            run()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            times[name].append(run())

    print(
        f"Python {platform.python_version()} (harness), sandbox interpreter {python} "
        f"(Python {boxes[layers[0]].python.version}), {os.cpu_count()} CPUs, {args.rounds} rounds, "
        f"ms per call (median / p95)\n"
    )
    bare_median = stats(times["bare python3 -I -c"])[0]
    print(f"{'':32s} {'median':>8s} {'p95':>8s} {'vs bare':>8s}")
    for name, values in times.items():
        median, p95 = stats(values)
        print(f"{name:32s} {median:8.1f} {p95:8.1f} {median / bare_median:7.2f}×")

    print(f"\nthroughput, {args.calls} calls each (calls/s)")
    print(f"{'':32s} {'1 worker':>9s} {'2 workers':>10s}")
    print(f"{'bare python3 -I -c':32s} {throughput(bare, 1, args.calls):9.1f} {throughput(bare, 2, args.calls):10.1f}")
    for layer, box in boxes.items():
        one, two = (throughput(lambda box=box: box.run("print(1)"), w, args.calls) for w in (1, 2))
        print(f"{layer + ': sandbox.run':32s} {one:9.1f} {two:10.1f}")
        worker_envs = [CodeSandboxEnv(split="all", sandbox=box) for _ in range(2)]
        free = list(worker_envs)

        def submit_once(free=free) -> None:
            env = free.pop()
            try:
                env.reset(options={"task_index": task_index})
                env.step(submit_action)
            finally:
                free.append(env)

        print(f"{layer + ': submit (reset + step)':32s} {'':9s} {throughput(submit_once, 2, args.calls // 2):10.1f}")


if __name__ == "__main__":
    main()
