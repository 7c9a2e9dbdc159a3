"""Episodes per second of ``agentgym eval --agent openai:...`` at concurrency 8 vs 1, against a slow endpoint.

The endpoint is ``agentgym serve model --scripted oracle --env agentgym/WeatherRun-v0 --latency-ms 50``
in its own process: WeatherRun's oracle answers every chat-completions request after 50 ms, as a
remote model would (a WeatherRun episode is 3 requests). The same 200 test-split episodes are
evaluated with 1 and with 8 episodes in flight, in the same run; the summaries must agree apart from
their timing. Ideal speed-up is 8× (the requests wait in parallel); the target is ≥ 4×.

    python benchmarks/endpoint_concurrency.py [--episodes 200] [--latency-ms 50] [--concurrency 8]

Writes ``benchmarks/results/endpoint_concurrency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

import agentgym
from agentgym.app.evaluation.runner import evaluate_agent

ENV_ID = "agentgym/WeatherRun-v0"
TARGET = 4.0  # concurrency-8 / concurrency-1 speed-up we aim for
RESULTS = Path(__file__).parent / "results" / "endpoint_concurrency.json"


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    """``agentgym serve model --scripted oracle`` on a free port; returns the process and its base URL."""
    cmd = [sys.executable, "-m", "agentgym.app.cli", "serve", "model", "--scripted", "oracle", "--env", ENV_ID]
    cmd += ["--split", "test", "--port", "0", "--latency-ms", str(latency_ms)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if " at " not in line:
        proc.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    url = line.split(" at ")[1].split()[0]
    httpx.get(f"{url}/models", timeout=10).raise_for_status()
    return proc, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=8, help="compared with concurrency 1")
    args = parser.parse_args()

    proc, url = start_server(args.latency_ms)
    runs = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for concurrency in (args.concurrency, 1):
                out = Path(tmp) / f"c{concurrency}"
                start = time.perf_counter()
                summary = evaluate_agent(
                    ENV_ID,
                    f"openai:oracle@{url}",
                    split="test",
                    episodes=args.episodes,
                    concurrency=concurrency,
                    out_dir=out,
                )
                seconds = time.perf_counter() - start
                text = (out / "summary.json").read_text()
                requests = summary.mean_turns * summary.episodes
                runs[concurrency] = {
                    "seconds": round(seconds, 3),
                    "episodes_per_s": round(args.episodes / seconds, 2),
                    "requests_per_s": round(requests / seconds, 1),
                    "success_rate": summary.success_rate,
                    "failures": summary.failures,
                    "requests": requests,
                    "_summary": text.partition('"timing"')[0],
                }
                print(
                    f"concurrency {concurrency}: {args.episodes} episodes ({requests:.0f} requests) in {seconds:.2f} s "
                    f"= {args.episodes / seconds:.1f} episodes/s; success {summary.success_rate:.0%}, "
                    f"failures {summary.failures}",
                    flush=True,
                )
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    fast, slow = runs[args.concurrency], runs[1]
    same = fast.pop("_summary") == slow.pop("_summary")
    ratio = slow["seconds"] / fast["seconds"]
    ideal = slow["requests"] * args.latency_ms / 1000
    print(
        f"speed-up concurrency {args.concurrency} vs 1: {ratio:.2f}× (target ≥ {TARGET:g}×, ideal {args.concurrency}×)"
    )
    print(f"concurrency 1 vs the endpoint's latency alone ({ideal:.1f} s): {slow['seconds'] / ideal:.2f}×")
    print(f"summaries identical apart from timing: {same}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "config": {
            "env": ENV_ID,
            "split": "test",
            "agent": "openai:oracle (agentgym serve model --scripted oracle, own process)",
            "episodes": args.episodes,
            "latency_ms": args.latency_ms,
            "concurrency": [args.concurrency, 1],
        },
        "versions": {"python": platform.python_version(), "agentgym": agentgym.__version__, "httpx": httpx.__version__},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "results": {f"concurrency_{args.concurrency}": fast, "concurrency_1": slow},
        "speedup": round(ratio, 2),
        "target": TARGET,
        "summaries_identical_apart_from_timing": same,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
