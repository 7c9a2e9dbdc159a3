"""One step, one budget: an action's tool calls together finish within 2× the largest single-call limit, in every
env whose tools do timed work, however the slow calls are combined (before: SQL ran four 1-s queries in 4 s, a
CodeSandbox action four 5-s programs in 20 s, and a WeatherRun lookup from a server trickling its body had no end).

Each case times one slow call alone, then combinations of slow calls, in the same run: the combined step may take
at most twice the single call (it takes ~1.5×; before, ~4×). Limits are set small (0.2-0.5 s) so the file runs in
seconds.
"""

from __future__ import annotations

import socket
import threading
import time

import gymnasium as gym
import pytest

import agentgym  # noqa: F401  (registers the ids)
from agentgym.core import ToolEnv
from agentgym.core.registration import ENV_IDS
from agentgym.envs.sandbox import layer_status

call = ToolEnv.canonical
LAYER = next((layer for layer, problem in layer_status().items() if layer != "unsafe" and problem is None), None)


def slow_sql(k: int) -> str:
    """A query without end, its text unique per ``k`` (the env remembers results, and timeouts, by text)."""
    return f"WITH RECURSIVE r(x) AS (SELECT {k} UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"


def loop(k: int) -> str:
    return f"x = {k}\nwhile True:\n    x += 1"


def seconds(env: gym.Env, action: str) -> tuple[float, str]:
    env.reset(options={"task_index": 0})
    started = time.perf_counter()
    observation, *_ = env.step(action)
    return time.perf_counter() - started, observation


def check_budget(env: gym.Env, single: str, combined: dict[str, str]) -> None:
    alone, _ = seconds(env, single)
    limit = env.unwrapped.call_time_limit()
    assert limit is not None
    for name, action in combined.items():
        took, observation = seconds(env, action)
        assert took <= 2 * alone, f"{name}: {took:.2f} s for the action, {alone:.2f} s for one slow call"
        assert "time budget" in observation, (name, observation[-600:])


def test_sql_queries_share_one_budget():
    env = gym.make("agentgym/SQLLookup-v0", time_limit=0.2)
    combined = {
        "four run_sql": "".join(call("run_sql", query=slow_sql(k)) for k in range(1, 5)),
        "run_sql and answer_sql": "".join(
            call("answer_sql" if k % 2 else "run_sql", query=slow_sql(k)) for k in range(5, 9)
        ),
    }
    check_budget(env, call("run_sql", query=slow_sql(0)), combined)
    took, observation = seconds(env, combined["four run_sql"])  # cut short, then free to run in full again
    assert "0.2 s limit" in observation or "left of its time budget" in observation


@pytest.mark.skipif(LAYER is None, reason=f"no sandbox layer here: {layer_status()}")
def test_sandboxed_programs_share_one_budget():
    env = gym.make("agentgym/CodeSandbox-v0", timeout=0.5, layer=LAYER)
    combined = {
        "four run_python": "".join(call("run_python", code=loop(k)) for k in range(1, 5)),
        "run_tests and run_python": "".join(
            call("run_tests" if k % 2 else "run_python", code=loop(k)) for k in range(5, 9)
        ),
        "three runs, then submit": "".join(call("run_python", code=loop(k)) for k in range(9, 12))
        + call("submit", code=loop(12)),
    }
    check_budget(env, call("run_python", code=loop(0)), combined)


class RawServer:
    """A TCP server on 127.0.0.1 that hands each connection to :meth:`answer`, on a thread of its own."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()


class Trickle(RawServer):
    """A weather server that answers each request with headers, then one body byte every 50 ms for a second: no
    single read is slower than httpx's timeout, so only a deadline on the whole lookup ends it."""

    def answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n")
                for _ in range(20):
                    time.sleep(0.05)
                    conn.sendall(b" ")
            except OSError:
                pass


def test_weather_lookups_share_one_budget():
    server = Trickle()
    try:
        env = gym.make(
            "agentgym/WeatherRun-v0", backend="http", base_url=server.url, split="test", timeout=0.2, retries=0
        )
        env.reset(options={"task_index": 0})
        city = env.unwrapped.city
        combined = {
            "four lookups": call("get_weather", city=city) * 2 + call("get_air_quality", city=city) * 2,
            "lookups, then answer": call("get_weather", city=city) * 3 + call("answer", suitable=True),
        }
        check_budget(env, call("get_weather", city=city), combined)
    finally:
        server.close()


def test_every_env_either_bounds_its_calls_or_does_no_timed_work():
    """Each registered env declares the limit its timed tools share, or has no tool that waits on anything."""
    timed = {"agentgym/SQLLookup-v0", "agentgym/SQLLookup-v1", "agentgym/CodeSandbox-v0", "agentgym/CodeSandbox-v1"}
    for env_id in sorted(ENV_IDS):
        base = gym.make(env_id).unwrapped
        assert (base.call_time_limit() is not None) == (env_id in timed), env_id
