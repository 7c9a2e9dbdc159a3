"""CodeSandbox: latency and throughput of sandboxed runs against the bwrap floor, cold and warm, in one run.

Timed interleaved, round by round after a warm-up (the machine is shared, so only ratios measured in the same
run mean anything):

- ``bare``: ``python -I -S -c "print(1)"`` with the sandbox's own interpreter (no isolation);
- ``floor`` (1.0×): ``bwrap --unshare-all --die-with-parent`` with the sandbox's binds (its interpreter, standard
  library and ``/usr/lib``), ``/proc``, ``/dev`` and the work tmpfs, running the same ``python -I -S -c
  "print(1)"``: what any fresh isolated interpreter costs;
- ``<layer> cold``: ``Sandbox(layer).run("print(1)")``: namespaces, file system, uid, rlimits, seccomp, output
  capture;
- ``<layer> warm``: ``Sandbox(layer, warm=True).run("print(1)")``: forked from a zygote into fresh PID, mount
  and IPC namespaces with its own tmpfs, uid, rlimits and filter (root only);
- ``<layer> submit cold|warm``: ``env.step(submit(reference))`` on CodeSandbox's ``rle_encode`` task (6 hidden
  tests judged outside; each round resets the env first, untimed).

Then throughput: ``print(1)`` runs per second with 1 and 2 worker threads, and warm ÷ cold at 2 workers.
``--profile`` adds the per-phase profile of one cold bwrap run: from the floor, one piece of ``Sandbox.run`` at a
time (its bwrap options and namespaces, the system-call filter, the runner inside, the harness's own work).

    python benchmarks/sandbox_latency.py                        # 60 rounds, ~40 s
    python benchmarks/sandbox_latency.py --rounds 200 --layers bwrap --profile
    git show REV:envs/sandbox/harness.py > /tmp/old/harness.py
    git show REV:envs/sandbox/inside.py > /tmp/old/inside.py
    python benchmarks/sandbox_latency.py --baseline /tmp/old/harness.py     # also time an older Sandbox.run
"""

from __future__ import annotations

import argparse
import importlib.util
import marshal
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from agentgym.core.tools import ToolCall
from agentgym.envs.code.env import CodeSandboxEnv
from agentgym.envs.sandbox import SANDBOX_ENV, Sandbox, layer_status
from agentgym.envs.sandbox import harness as sandbox_module


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def p95_ms(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))] * 1e3


def throughput(fn: Callable[[], object], workers: int, calls: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(fn) for _ in range(calls)]:
            future.result()
    return calls / (time.perf_counter() - started)


def process(command: list[str], fds: tuple[int, ...] = ()) -> None:
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=SANDBOX_ENV, pass_fds=fds)
    if done.stdout != b"1\n":
        raise RuntimeError(f"{command[:3]}… printed {done.stdout!r}: {done.stderr[-300:]!r}")


def phases(box: Sandbox) -> dict[str, Callable[[], None]]:
    """Cold bwrap, one piece at a time, from the exact command ``Sandbox.run`` starts: its bwrap options (with
    ``setpriv`` as non-root) around ``python -I -S -c "print(1)"``, then + the system-call filter, then + the
    runner (its start, the job, the uid drop as root, rlimits, ``print(1)`` run as the solution), then + the
    harness's own work (memory files, pipes, reading the results, the result record)."""
    python = box.python
    uid = box._run_uid()
    job = {"mode": "run", "code": "print(1)", "calls": [], "rlimits": box.limits.rlimits()}
    job |= {"call_timeout": box.limits.call_timeout, "unsafe": False}
    if uid is not None:
        job["drop_to"] = uid

    def variant(seccomp: bool, runner: bool) -> Callable[[], None]:
        def run() -> None:
            result_r, result_w = os.pipe()
            job_fd = sandbox_module._memfd("job", marshal.dumps(job, 4))
            filter_fd = sandbox_module._memfd("filter", sandbox_module.seccomp_filter(user_namespaces=uid is None))
            try:
                command, _, runner_fd = box._command(uid, job_fd, result_w, filter_fd, 5.0, [])
                if not seccomp:
                    at = command.index("--seccomp")
                    del command[at : at + 2]
                if not runner:
                    interpreter = len(command) - 1 - command[::-1].index(python.executable)
                    command = [*command[: interpreter + 1], "-I", "-S", "-c", "print(1)"]
                process(command, (job_fd, result_w, filter_fd, runner_fd))
            finally:
                for fd in (result_r, result_w, job_fd, filter_fd):
                    os.close(fd)

        return run

    return {
        "bwrap options of Sandbox.run": variant(False, False),
        "+ seccomp filter": variant(True, False),
        "+ runner, job, uid drop, rlimits": variant(True, True),
        "+ harness (= Sandbox.run)": lambda: box.run("print(1)"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--calls", type=int, default=200, help="calls per throughput measurement")
    parser.add_argument("--layers", nargs="*", default=["bwrap", "unshare"])
    parser.add_argument("--profile", action="store_true", help="also the per-phase profile of a cold bwrap run")
    parser.add_argument("--baseline", help="another harness.py (with its inside.py beside it) to time too")
    args = parser.parse_args()

    status = layer_status()
    layers = [layer for layer in args.layers if status.get(layer) is None]
    for layer in args.layers:
        if status.get(layer) is not None:
            print(f"skipping {layer}: {status[layer]}")
    if not layers:
        raise SystemExit("no sandbox layer to measure")
    warm_ok = os.geteuid() == 0
    if not warm_ok:
        print("warm mode needs root: measuring cold only")
    boxes = {(layer, False): Sandbox(layer) for layer in layers}
    if warm_ok:
        boxes |= {(layer, True): Sandbox(layer, warm=True) for layer in layers}
    first = boxes[layers[0], False]
    python = first.python.executable
    root = sandbox_module._bwrap_root(first.python, first.limits.disk_mb << 20)
    floor_cmd = ["bwrap", "--unshare-all", "--die-with-parent", *root, python, "-I", "-S", "-c", "print(1)"]

    envs = {key: CodeSandboxEnv(split="all", sandbox=box) for key, box in boxes.items()}
    tasks = envs[layers[0], False].tasks
    task_index = next(i for i, t in enumerate(tasks) if t.id == "rle_encode")
    submit_action = ToolCall("submit", {"code": tasks[task_index].solution}).to_text()

    def timed(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            started = time.perf_counter()
            fn()
            return time.perf_counter() - started

        return run

    def timed_submit(env: CodeSandboxEnv) -> Callable[[], float]:
        def run() -> float:
            env.reset(options={"task_index": task_index})  # untimed: each timed call is one step
            started = time.perf_counter()
            _, reward, *_ = env.step(submit_action)
            elapsed = time.perf_counter() - started
            assert reward == 1.0
            return elapsed

        return run

    def mode(warm: bool) -> str:
        return "warm" if warm else "cold"

    runners: dict[str, Callable[[], float]] = {
        "bare python -I -S": timed(lambda: process([python, "-I", "-S", "-c", "print(1)"])),
        "floor: bwrap + python -I -S": timed(lambda: process(floor_cmd)),
    }
    for (layer, warm), box in boxes.items():
        runners[f"{layer} {mode(warm)}: Sandbox.run"] = timed(lambda box=box: box.run("print(1)"))
    for (layer, warm), env in envs.items():
        runners[f"{layer} {mode(warm)}: submit step"] = timed_submit(env)
    if args.baseline:
        spec = importlib.util.spec_from_file_location("baseline_sandbox", args.baseline)
        baseline = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["baseline_sandbox"] = baseline  # (dataclasses look their module up)
        spec.loader.exec_module(baseline)  # type: ignore[union-attr]
        for layer in layers:
            old = baseline.Sandbox(layer)
            runners[f"{layer} baseline: Sandbox.run"] = timed(lambda old=old: old.run("print(1)"))
    if args.profile and "bwrap" in layers:
        for name, fn in phases(boxes["bwrap", False]).items():
            runners[f"profile {name}"] = timed(fn)

    for run in runners.values():  # warm-up: page cache, layer probes, zygotes
        for _ in range(3):
            run()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(args.rounds):
        for name, run in runners.items():
            times[name].append(run())

    print(
        f"Python {platform.python_version()} (harness), sandbox interpreter {python} "
        f"(Python {first.python.version}), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, "
        f"{args.rounds} rounds, ms per call\n"
    )
    floor = median_ms(times["floor: bwrap + python -I -S"])
    print(f"{'':40s} {'median':>8s} {'p95':>8s} {'vs floor':>9s}")
    for name, values in times.items():
        print(f"{name:40s} {median_ms(values):8.2f} {p95_ms(values):8.2f} {median_ms(values) / floor:8.2f}×")

    print(f"\nthroughput, print(1), {args.calls} calls each (runs/s)")
    print(f"{'':40s} {'1 worker':>9s} {'2 workers':>10s}")
    rates: dict[str, float] = {}
    rows: dict[str, Callable[[], object]] = {
        "bare python -I -S": lambda: process([python, "-I", "-S", "-c", "print(1)"]),
        "floor: bwrap + python -I -S": lambda: process(floor_cmd),
    }
    for (layer, warm), box in boxes.items():
        rows[f"{layer} {mode(warm)}: Sandbox.run"] = lambda box=box: box.run("print(1)")
    for name, fn in rows.items():
        one, two = throughput(fn, 1, args.calls), throughput(fn, 2, args.calls)
        rates[name] = two
        print(f"{name:40s} {one:9.1f} {two:10.1f}")
    if warm_ok:
        for layer in layers:
            cold, warm = rates[f"{layer} cold: Sandbox.run"], rates[f"{layer} warm: Sandbox.run"]
            print(f"{layer}: warm ÷ cold at 2 workers: {warm / cold:.2f}×")
    for box in boxes.values():
        box.close()


if __name__ == "__main__":
    main()
