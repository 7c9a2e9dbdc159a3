"""Hostile actions: parse time linear in the action, nothing raises, observations are clean UTF-8,
and one action cannot run an unbounded number of tool calls."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym import ToolEnv, tool
from agentgym.parser import parse_tool_calls
from agentgym.registration import ENV_IDS

WEATHER_TOOLS = list(gym.make("agentgym/WeatherRun-v0").unwrapped.tools.values())

# Degenerate text of the kinds language models emit during RL, one family per format's opener.
FAMILIES = {
    "react-newlines": lambda n: "Action: get_weather\nAction Input: {" + "\n" * n,
    "react-repeated": lambda n: "Action: get_weather\n" * (n // 20),
    "react-blank-input": lambda n: "Action: x\nAction Input:" + " \n" * (n // 2),
    "brackets-then-text": lambda n: "[" * 64 + "a" * n,
    "quoted-keys": lambda n: "{'" * 64 + "a" * n,
    "open-braces": lambda n: "{" * n,
    "open-calls": lambda n: "get_weather(" * (n // 12),
    "unclosed-call": lambda n: "get_weather(" + "a" * n,
    "open-tags": lambda n: "<tool_call>{" * (n // 12),
    "fences": lambda n: "```\n" * (n // 4),
    "open-fence": lambda n: "```json\n{" + "\n" * n,
    "triple-quotes": lambda n: "get_weather('''" + "'" * n,
    "escaped-quotes": lambda n: 'get_weather("' + '\\"' * (n // 2),
    "newlines": lambda n: "\n" * n,
    "digits": lambda n: '{"name": "get_weather", "arguments": {"city": ' + "9" * n + "}}",
    # tag openers followed by whitespace (the fuzzer's find: 15 s for "<" + 16,000 spaces)
    "angle-spaces": lambda n: "<" + " " * n,
    "call-spaces": lambda n: "<call" + " " * n,
    "pipe-spaces": lambda n: "<|" + " \n\t" * (n // 3),
    "close-spaces": lambda n: "<tool_call>{}< /" + " " * n,
    "many-angles": lambda n: ("<" + " " * 63) * (n // 64),
    # 64 JSON starts, each of whose reads runs to the end (the fuzzer's find: 0.5 s for 29 KB of '["""…')
    "bracket-strings": lambda n: ('["' + '"' * 448) * (n // 450),
    "brace-keys": lambda n: ('{"k": "' + "v" * 200) * (n // 207),
}


def _parse_seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        parse_tool_calls(text, WEATHER_TOOLS)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_parse_time_is_linear_and_small(family):
    make = FAMILIES[family]
    small, large = _parse_seconds(make(4_000)[:32_000]), _parse_seconds(make(32_000)[:32_000])
    # 8× the text: linear is ~8×, quadratic ~64× (the ReAct family took 25 s at 32 KB before).
    assert large < 0.25, f"{family}: {large:.3f} s for 32 KB"
    assert large <= 20 * small + 0.01, f"{family}: {small * 1e3:.2f} ms → {large * 1e3:.2f} ms for 8× the text"


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_no_action_makes_any_env_raise_or_write_invalid_utf8(env_id):
    env = gym.make(env_id)
    name = next(iter(env.unwrapped.tools))
    actions = [
        f'<tool_call>{{"name": "{name}", "arguments": {{"x": {"9" * 5000}}}}}</tool_call>',
        f'{{"name": "{name}", "arguments": {{"x": {"9" * 5000}}}}}',
        f"{name}(x={'9' * 5000})",
        f'{name}("mo\ud800ve")',
        f'{name}("\x1b[2J\x07\r\x08")',
        "Action: " + name + "\nAction Input: {" + "\n" * 30_000,
        "\ud800" * 100,
        "x" * 100_000,
    ]
    for action in actions:
        env.reset(seed=0)
        t0 = time.perf_counter()
        obs, _, _, _, info = env.step(action)
        assert time.perf_counter() - t0 < 2.0
        obs.encode("utf-8")  # raises if a lone surrogate got through
        assert not any(c in obs for c in "\x1b\x07\r\x08\x00")
        if info["parse_error"] is not None:
            info["parse_error"].encode("utf-8")


class EchoEnv(ToolEnv):
    """A toy task whose tool echoes its input and counts its calls."""

    task = "Echo things."

    def _reset_task(self, options):
        self.calls = 0

    def summary(self) -> str:
        return f"calls {self.calls}"

    @property
    def success(self) -> bool:
        return False

    @tool
    def echo(self, text: str) -> str:
        """Echo the text back.

        Args:
            text: What to echo.
        """
        self.calls += 1
        return text


def test_tool_output_control_characters_and_surrogates_are_escaped():
    env = EchoEnv()
    env.reset(seed=0)
    text = r"\u001b[31mred\u001b[0m\u0007 bell\r\u0000 mo\ud800ve"  # JSON escapes: the tool gets the raw characters
    obs, *_ = env.step(f'<tool_call>{{"name": "echo", "arguments": {{"text": "{text}"}}}}</tool_call>')
    assert "\\x1b[31mred" in obs and "\\x07" in obs and "\\x0d" in obs and "\\x00" in obs
    assert "\x1b" not in obs and "mo\ufffdve" in obs
    obs.encode("utf-8")


def test_calls_beyond_the_per_step_bound_are_not_run():
    env = EchoEnv()
    env.reset(seed=0)
    n = env.max_calls_per_step
    obs, *_ = env.step(" ".join(f'echo(text="{i}")' for i in range(n + 6)))
    assert env.calls == n
    assert f"6 more call(s) not run: at most {n} calls per action" in obs
    env.reset(seed=0)
    env.step(" ".join(f'echo(text="{i}")' for i in range(n)))
    assert env.calls == n  # up to the bound, every call runs
