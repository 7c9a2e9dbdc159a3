"""``agentgym serve mcp``, driven by the official ``mcp`` SDK's own client (stdio and streamable HTTP).

The server runs as a subprocess of the real command; the client plays the env's oracle moves through MCP, and
the run it leaves in ``--out`` must be what ``agentgym eval --agent oracle`` measures, in eval's format.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import ClientSession, MCPError, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

import agentgym  # noqa: E402, F401
from agentgym.app.evaluation.reports import load_episodes, load_summary  # noqa: E402
from agentgym.app.evaluation.runner import evaluate_agent  # noqa: E402
from agentgym.app.serving.mcp_server import MAX_BODY_BYTES, NOT_PLAYED, EpisodeHost  # noqa: E402
from agentgym.core.parser import parse_tool_calls  # noqa: E402
from agentgym.core.registration import ENV_IDS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WEATHER = "agentgym/WeatherRun-v0"
SERVE = [sys.executable, "-m", "agentgym.app.cli", "serve", "mcp"]
CHILD_ENV = {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
VOLATILE = {"agent", "agent_settings", "timing"}  # who played and how fast: everything else must match eval's


def oracle_call(oracle: Any, tools: Any, observation: str) -> tuple[str, dict[str, Any]]:
    """The oracle's next move as an MCP tool call: (name, arguments)."""
    (call,) = parse_tool_calls(oracle.predict(observation)[0], tools).calls
    return call.name, dict(call.arguments)


async def play_episode(session: ClientSession, oracle: Any, tools: Any, observation: str) -> dict[str, Any]:
    """Play one episode to its end with the oracle's moves; the last result's structured content."""
    for _ in range(50):
        result = await session.call_tool(*oracle_call(oracle, tools, observation))
        data = result.structured_content
        observation = data["observation"]
        if data["episode_over"]:
            return data
    raise AssertionError("the episode did not end in 50 calls")


def run_within(client: Any, seconds: float) -> None:
    """``anyio.run(client)``, failing if it takes longer than ``seconds``."""

    async def bounded() -> None:
        with anyio.fail_after(seconds):
            await client()

    anyio.run(bounded)


def env_tool_listing(env_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    tools = gym.make(env_id, split="test").unwrapped.tools.values()
    return [(t.name, t.description, t.parameters_schema) for t in tools]


def test_stdio_oracle_plays_the_test_split_and_scores_like_eval(tmp_path: Path) -> None:
    """All 100 WeatherRun-v0 test tasks through the SDK's stdio client: 100 % success, and the run directory
    holds what ``agentgym eval --agent oracle`` writes (same observations, rewards, summary), in ~5 s."""
    out = tmp_path / "mcp-run"
    server = StdioServerParameters(
        command=SERVE[0], args=[*SERVE[1:], "--env", "WeatherRun-v0", "--split", "test", "--out", str(out)],
        env=CHILD_ENV, cwd=str(ROOT),
    )  # fmt: skip
    env = gym.make(WEATHER, split="test")
    oracle, tools = env.unwrapped.oracle(), list(env.unwrapped.tools.values())
    seen: dict[str, Any] = {}

    async def client() -> None:
        with (tmp_path / "server.log").open("w") as log:
            async with stdio_client(server, errlog=log) as (read, write), ClientSession(read, write) as session:
                init = await session.initialize()
                seen["instructions"] = init.instructions
                listed = (await session.list_tools()).tools
                seen["tools"] = [(t.name, t.description, t.input_schema) for t in listed]
                seen["prompts"] = [p.name for p in (await session.list_prompts()).prompts]
                seen["resources"] = sorted(str(r.uri) for r in (await session.list_resources()).resources)
                early = await session.call_tool("answer", {"suitable": True})  # before any task: refused
                seen["early"] = (early.is_error, early.content[0].text)
                seen["finals"] = []
                while True:
                    started = await session.call_tool("next_task", {})
                    if started.structured_content.get("done"):
                        seen["done"] = started.content[0].text
                        break
                    observation = started.structured_content["observation"]
                    if not seen["finals"]:  # the task as prompt and resource is the episode's first observation
                        prompt = await session.get_prompt("task")
                        resource = await session.read_resource("agentgym://task")
                        seen["task"] = (prompt.messages[0].content.text, resource.contents[0].text, observation)
                    final = await play_episode(session, oracle, tools, observation)
                    seen["finals"].append(final)
                score = await session.read_resource("agentgym://score")
                seen["score"] = json.loads(score.contents[0].text)

    start = time.perf_counter()
    run_within(client, 60)
    elapsed = time.perf_counter() - start

    expected = env_tool_listing(WEATHER)
    assert seen["tools"][:-1] == expected and seen["tools"][-1][0] == "next_task"
    assert seen["prompts"] == ["task"] and seen["resources"] == ["agentgym://score", "agentgym://task"]
    assert seen["early"][0] and "next_task" in seen["early"][1]
    prompt_text, resource_text, first_observation = seen["task"]
    assert prompt_text == resource_text == first_observation and "Tools:" in first_observation
    assert len(seen["finals"]) == 100 and all(f["success"] and f["terminated"] for f in seen["finals"])
    assert "100.0%" in seen["done"] and seen["score"]["done"] and seen["score"]["played"] == 100

    mcp_summary = load_summary(out)
    assert mcp_summary.success_rate == 1.0 and mcp_summary.episodes == 100 and mcp_summary.failures == 0
    assert mcp_summary.agent == "mcp" and mcp_summary.agent_settings == {"transport": "stdio"}
    eval_dir = tmp_path / "eval-run"
    eval_summary = evaluate_agent(WEATHER, "oracle", split="test", out_dir=eval_dir)
    assert mcp_summary.model_dump(exclude=VOLATILE) == eval_summary.model_dump(exclude=VOLATILE)
    assert seen["score"]["summary"]["returns"] == eval_summary.returns
    mcp_eps, eval_eps = load_episodes(out / "episodes.jsonl"), load_episodes(eval_dir / "episodes.jsonl")
    same = ("index", "reset", "observations", "rewards", "canonical", "valid", "success", "terminated")
    assert [e.model_dump(include=set(same)) for e in mcp_eps] == [e.model_dump(include=set(same)) for e in eval_eps]
    assert elapsed < 30, f"100 tasks over stdio took {elapsed:.1f} s (measured ~5 s on 2 cores, start-up included)"


def read_url(proc: subprocess.Popen[str], timeout: float = 30.0) -> str:
    """The URL the HTTP server announces on its first stdout line, once it is listening."""
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    if not selector.select(timeout):
        proc.kill()
        raise AssertionError(f"the server announced no URL in {timeout} s: {proc.stderr.read()}")
    line = proc.stdout.readline()
    assert " at http://" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
    return line.split(" at ")[1].split()[0]


def errors_in(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception an exception group holds, flattened."""
    if isinstance(exc, BaseExceptionGroup):
        return [e for inner in exc.exceptions for e in errors_in(inner)]
    return [exc]


def test_http_needs_the_bearer_token_and_scores_an_abandoned_run(tmp_path: Path) -> None:
    """Streamable HTTP on 127.0.0.1 (an ephemeral port) behind ``--token-env``: no token, a wrong one, a prefix or
    an extension of it get 401 (and the SDK client fails); with it, the SDK client plays. A bad argument is the
    env's own invalid action; SIGTERM mid-episode ends the run, scored over both episodes, within 10 s."""
    out, token = tmp_path / "http-run", "t0ken-" + os.urandom(8).hex()
    cmd = [*SERVE, "--env", "WeatherRun-v0", "--transport", "http", "--port", "0", "--episodes", "2"]
    cmd += ["--token-env", "AGENTGYM_MCP_TEST_TOKEN", "--out", str(out)]
    env_vars = {**os.environ, **CHILD_ENV, "AGENTGYM_MCP_TEST_TOKEN": token}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_vars, cwd=ROOT)
    try:
        url = read_url(proc)
        assert url.startswith("http://127.0.0.1:")
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        for header in (None, "Bearer wrong", f"Bearer {token[:-1]}", f"Bearer {token}x", f"Basic {token}", token):
            headers = {"Authorization": header} if header else {}
            assert httpx2.post(url, json=body, headers=headers, timeout=10).status_code == 401, header
        big = {**body, "params": {"pad": "x" * (MAX_BODY_BYTES + 1)}}  # past the body limit, with the token
        auth = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        assert httpx2.post(url, json=big, headers=auth, timeout=10).status_code == 413

        env = gym.make(WEATHER, split="test")
        oracle, tools = env.unwrapped.oracle(), list(env.unwrapped.tools.values())
        invalid_reward = env.unwrapped.invalid_action_reward
        seen: dict[str, Any] = {}

        async def client() -> None:
            auth = {"Authorization": f"Bearer {token}"}
            async with httpx2.AsyncClient(headers=auth, timeout=30) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        seen["tools"] = [
                            (t.name, t.description, t.input_schema) for t in (await session.list_tools()).tools
                        ]
                        first = await session.call_tool("next_task", {})
                        seen["first"] = await play_episode(
                            session, oracle, tools, first.structured_content["observation"]
                        )
                        await session.call_tool("next_task", {})
                        bad = await session.call_tool("get_weather", {"town": "Paris"})  # no such argument
                        seen["bad"] = (bad.is_error, bad.structured_content, bad.content[0].text)
            try:
                with anyio.fail_after(20):
                    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
                        await session.initialize()
                seen["tokenless"] = None
            except BaseException as exc:  # noqa: BLE001 - the SDK raises the refusal inside exception groups
                seen["tokenless"] = errors_in(exc)

        run_within(client, 60)
        assert seen["tools"][:-1] == env_tool_listing(WEATHER)
        assert seen["first"]["success"] and seen["first"]["episode_over"]
        is_error, data, text = seen["bad"]
        assert is_error and data["reward"] == invalid_reward and not data["episode_over"] and "city" in text
        assert seen["tokenless"] and any(isinstance(e, MCPError) for e in seen["tokenless"]), seen["tokenless"]
        assert not (out / "summary.json").exists()  # the run is not over yet

        start = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
        assert proc.returncode == 0, err
        assert time.perf_counter() - start < 10
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    summary = load_summary(out)
    assert (summary.episodes, summary.success_rate, summary.failures, summary.truncation_rate) == (2, 0.5, 0, 0.5)
    episodes = load_episodes(out / "episodes.jsonl")
    assert [e.truncation for e in episodes] == [None, "abandoned"] and episodes[1].turns == 1
    assert episodes[1].valid == [False] and episodes[1].rewards == [invalid_reward]
    assert "played 2 of 2 tasks, success 50.0%" in err


def test_unplayed_tasks_count_as_failures_and_the_order_is_fixed(tmp_path: Path) -> None:
    """In process: a run stopped after one task scores the others as not played (failed), over the whole task
    set; tasks come as task_index 0, 1, 2 with eval's resets; a used --out directory is refused."""
    host = EpisodeHost(WEATHER, split="test", out_dir=tmp_path)
    started = host.call("next_task", {})
    assert started.data["task_index"] == 0 and "Task 1 of 100" in started.text
    assert host.current is not None and host.current.reset == {"seed": 0, "options": {"task_index": 0}}
    host.call("next_task", {})  # abandons task 0 unplayed (0 turns), starts task 1
    assert host.current.reset == {"seed": 1, "options": {"task_index": 1}}
    summary = host.finish()
    assert summary.episodes == 100 and summary.success_rate == 0.0
    assert summary.failure_reasons == {NOT_PLAYED: 98} and summary.truncation_rate == 0.02
    assert host.call("answer", {"suitable": True}).error and host.finish() is summary
    assert load_summary(tmp_path).model_dump() == summary.model_dump()
    with pytest.raises(ValueError, match="already holds episodes"):
        EpisodeHost(WEATHER, split="test", out_dir=tmp_path)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_env_is_servable_and_its_oracle_solves_a_task(env_id: str) -> None:
    """In process, for every registered env: its tools are listed as MCP tools with their own schemas, and the
    oracle's moves, made as tool calls, solve task 0 (~0.2 s an env; CodeSandbox runs its sandbox)."""
    host = EpisodeHost(env_id, split="test")
    listed = [(t.name, t.description, t.input_schema) for t in host.mcp_tools()]
    assert listed[:-1] == [(t.name, t.description, t.parameters_schema) for t in host.tools.values()]
    oracle, tools = host.env.unwrapped.oracle(), list(host.tools.values())
    data = host.call("next_task", {}).data
    for _ in range(50):
        data = host.call(*oracle_call(oracle, tools, data["observation"])).data
        if data["episode_over"]:
            break
    assert data["success"] and data["terminated"] and data["task_index"] == 0
    host.finish()


def test_cli_refuses_a_token_for_stdio_and_an_unset_token_variable(capsys: pytest.CaptureFixture[str]) -> None:
    from agentgym.app.cli import main

    assert main(["serve", "mcp", "--env", "CliffWalk-v0", "--token-env", "X_AGENTGYM_UNSET"]) == 2
    assert "--token-env guards --transport http" in capsys.readouterr().err
    os.environ.pop("X_AGENTGYM_UNSET", None)
    assert (
        main(["serve", "mcp", "--env", "CliffWalk-v0", "--transport", "http", "--token-env", "X_AGENTGYM_UNSET"]) == 2
    )
    assert "X_AGENTGYM_UNSET: that environment variable is not set" in capsys.readouterr().err
