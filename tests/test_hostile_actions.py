"""Hostile actions: parse time linear in the action, nothing raises, observations are clean UTF-8,
and one action cannot run an unbounded number of tool calls."""

from __future__ import annotations

import time

import gymnasium as gym
import pytest

import agentgym  # noqa: F401
from agentgym import ToolEnv, tool
from agentgym.core.parser import MAX_ACTION_CHARS, parse_tool_calls
from agentgym.core.registration import ENV_IDS

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
    # 64 '[' then one unterminated string: each start read the string to the end, one character at a time, and the
    # scan budget did not count it (212 ms at 32 KB on a loaded 2-core AMD EPYC; the issue measured 135 ms there)
    "brackets-then-string": lambda n: "[" * 64 + '"' + "a" * n,
    "brackets-then-escapes": lambda n: '["' * 64 + '\\"' * (n // 2),
    # floods of the smallest JSON tokens: the most Python-level work per character
    "token-numbers": lambda n: "[" + "1," * (n // 2),
    "token-arrays": lambda n: "[" + "[]" * (n // 2),
    "token-words": lambda n: "[" + "a " * (n // 2),
    "token-strings-then-a-key": lambda n: ('["' + '"' * 448) * (n // 450) + '"name"',
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


def _linear_scan(text: str) -> int:
    """The peer: one pass over the characters in Python, looking at each once (what any reader must at least do)."""
    n = 0
    for c in text:
        if c == '"':
            n += 1
    return n


def test_the_worst_actions_parse_within_a_ratio_of_a_linear_scan():
    """Each family at the largest action (32,768 characters) parses in at most 100× one Python pass over the same
    text: ~50 ms on a loaded 2-core AMD EPYC, whose pass takes ~0.5 ms (measured worst: 36×, the number tokens)."""
    ratios = {}
    for family, make in FAMILIES.items():
        text = make(MAX_ACTION_CHARS)[:MAX_ACTION_CHARS]
        scan = parse = float("inf")
        for _ in range(5):  # interleaved, best of 5 each: the least disturbed by other processes
            t0 = time.perf_counter()
            _linear_scan(text)
            t1 = time.perf_counter()
            parse_tool_calls(text, WEATHER_TOOLS)
            t2 = time.perf_counter()
            scan, parse = min(scan, t1 - t0), min(parse, t2 - t1)
        ratios[family] = parse / scan
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] <= 100, f"{worst}: {ratios[worst]:.0f}× a linear scan ({sorted(ratios.items())})"


# A refusal by one of the parser's bounds: (action, words of the one-line error that name the bound)
CALL = '{"name": "answer", "arguments": {"suitable": true}}'
LONG, HUGE = "9" * 500, "9" * 5_000
BOUNDS = {
    "number-in-bare-json": (CALL.replace("true", LONG), "numbers may have at most 400"),
    "number-in-tag": (f"<tool_call>{CALL.replace('true', LONG)}</tool_call>", "numbers may have at most 400"),
    "number-in-react": (f'Action: answer\nAction Input: {{"suitable": {LONG}}}', "numbers may have at most 400"),
    "number-in-python-call": (f"answer(suitable={LONG})", "numbers may have at most 400"),
    "huge-number-in-python-call": (f"answer(suitable={HUGE})", "a number of 5,000 characters"),
    "nesting-in-bare-json": (CALL.replace("true", "[" * 60 + "]" * 60), "more than 50 levels"),
    "nesting-in-python-call": ("answer(suitable=" + "(" * 300 + "1" + ")" * 300 + ")", "nested deeper than Python"),
    "json-starts": ("{x " * 64 + CALL, "first 64 '{' or '['"),
    "json-budget": ("[[" + "1," * 15_000 + CALL, "reads at most 30,0"),
    "action-length": ("x" * (MAX_ACTION_CHARS + 1), "the limit is 32,768"),
    "calls-per-action": (CALL * 17, "17 tool calls in one action; the limit is 16"),
}


@pytest.mark.parametrize("bound", list(BOUNDS))
def test_a_refusal_by_a_bound_names_the_bound_and_is_an_invalid_action(bound):
    """Before: an over-long number or too deep a list in bare JSON read "no tool call found in the action", and a
    Python call's number of 5,000 digits "could not read ... as a call"."""
    action, words = BOUNDS[bound]
    env = gym.make("agentgym/WeatherRun-v0", rewards={"invalid_action": -0.25})
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(action)
    error = info["parse_error"]
    assert error is not None and words in error and "\n" not in error, error
    assert reward == -0.25 and not terminated and info["tool_calls"] == []
    assert obs.startswith(f"Task: {env.unwrapped.task_prompt()}\nResult: Error: {error}\n")


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
