"""Issue 17, item 15: the text envs behave as a Gymnasium user expects — ``render_mode="human"`` prints the
text, ``sample_action`` draws valid random tool calls (while ``action_space.sample()`` keeps Gymnasium's
contract), a ReAct plain-string input reaches a one-parameter tool, and the task-level fallback hook is bounded."""

from __future__ import annotations

import time
from collections import Counter
from typing import Annotated, Literal

import gymnasium as gym
import numpy as np
import pytest
from pydantic import BaseModel, Field

import agentgym  # noqa: F401
from agentgym.core.registration import ENV_IDS
from agentgym.core.tools import tool

SAMPLES = 200
pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date")  # the -v0 ids, beside their -v1


def _make(env_id: str, **kwargs) -> gym.Env:
    return gym.make(env_id, **kwargs)


# ----------------------------------------------------------------------------- render_mode="human"


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_human_render_prints_the_text_at_reset_step_and_render(env_id, capsys):
    env = _make(env_id, render_mode="human")
    base = env.unwrapped
    assert "human" in base.metadata["render_modes"] and "ansi" in base.metadata["render_modes"]
    capsys.readouterr()

    env.reset(seed=0)
    assert capsys.readouterr().out == base.render_text()  # printed once, as Gymnasium's toy-text envs do

    env.step(base.sample_action(np.random.default_rng(0)))
    assert capsys.readouterr().out == base.render_text()

    assert env.render() is None  # human mode draws and returns nothing
    assert capsys.readouterr().out == base.render_text()
    env.close()


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_other_render_modes_print_nothing(env_id, capsys):
    for mode in (None, "ansi"):
        env = _make(env_id, render_mode=mode)
        capsys.readouterr()
        env.reset(seed=0)
        env.step(env.unwrapped.sample_action(np.random.default_rng(1)))
        assert capsys.readouterr().out == ""
        assert env.render() == (None if mode is None else env.unwrapped.render_text())
        env.close()


@pytest.mark.filterwarnings("ignore:.*not in the possible render_modes")
def test_an_unknown_render_mode_is_still_refused():
    with pytest.raises(ValueError, match="render_mode must be one of"):
        gym.make("agentgym/WeatherRun-v0", render_mode="rgb")


# ----------------------------------------------------------------------------- valid random tool calls


def _samples(env: gym.Env, seed: int, n: int = SAMPLES) -> list[str]:
    rng = np.random.default_rng(seed)
    return [env.unwrapped.sample_action(rng) for _ in range(n)]


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_sampled_actions_are_canonical_valid_calls_of_every_tool(env_id):
    env = _make(env_id)
    env.reset(seed=0)
    base = env.unwrapped
    actions = _samples(env, seed=0)
    names = Counter()
    for action in actions:
        assert env.action_space.contains(action)
        interp = base.interpret(action)
        assert interp.error is None, (action, interp.error)
        assert interp.parse.format == "tool_call" and interp.parse.canonical is True
        names[interp.parse.calls[0].name] += 1
    # every tool is drawn, each roughly uniformly (200 draws: no tool under a third of its share)
    assert set(names) == set(base.tools)
    assert min(names.values()) >= SAMPLES / len(base.tools) / 3
    # through step (CodeSandbox runs each in the sandbox, ~50 ms: 10 of them)
    for action in actions[: 10 if "CodeSandbox" in env_id else SAMPLES]:
        *_, terminated, truncated, info = env.step(action)
        assert info["parse_error"] is None and info["canonical"] is True
        if terminated or truncated:
            env.reset()
    env.close()


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_sampled_actions_are_deterministic_under_a_seed(env_id):
    env = _make(env_id)
    env.reset(seed=0)
    assert _samples(env, seed=3) == _samples(env, seed=3)
    assert _samples(env, seed=3) != _samples(env, seed=4)
    # without a generator: the action space's own, seeded by action_space.seed() as for sample()
    env.action_space.seed(7)
    first = [env.unwrapped.sample_action() for _ in range(20)]
    env.action_space.seed(7)
    assert [env.unwrapped.sample_action() for _ in range(20)] == first
    env.close()


def test_sampled_arguments_cover_the_schema():
    env = _make("agentgym/CliffWalk-v0")
    directions = Counter(env.unwrapped.interpret(a).calls[0][1]["direction"] for a in _samples(env, 0))
    assert set(directions) == {"up", "right", "down", "left"} and min(directions.values()) >= 25
    weather = _make("agentgym/WeatherRun-v0")
    answers = [c for a in _samples(weather, 0) for c in weather.unwrapped.interpret(a).parse.calls]
    suitable = {c.arguments["suitable"] for c in answers if c.name == "answer"}
    assert suitable == {True, False}
    assert any("reason" in c.arguments for c in answers if c.name == "answer")  # optional ones are drawn too
    assert any("reason" not in c.arguments for c in answers if c.name == "answer")
    sql = _make("agentgym/SQLLookup-v0")
    values = [
        c.arguments["value"]
        for a in _samples(sql, 0)
        for c in sql.unwrapped.interpret(a).parse.calls
        if c.name == "answer"
    ]
    assert {type(v) for v in values} >= {str, int, float, bool, list, type(None)}  # each branch of its anyOf


class Window(BaseModel):
    start: Annotated[int, Field(ge=0, le=23)]
    days: list[Literal["mon", "tue"]] = []


@tool
def book(
    room: Literal["A", "B", "C"],
    people: Annotated[int, Field(ge=3, le=5)],
    budget: Annotated[float, Field(gt=0, lt=2)],
    tags: Annotated[list[str], Field(max_length=2)],
    window: Window,
    note: str | None = None,
    urgent: bool = False,
) -> str:
    """Book a room.

    Args:
        room: Which room.
        people: How many.
        budget: Up to 2.
        tags: At most two.
        window: When.
        note: Anything else.
        urgent: Soon?
    """
    return "ok"


def test_sampled_arguments_meet_the_schemas_constraints():
    rng = np.random.default_rng(0)
    drawn = [book.sample_arguments(rng) for _ in range(300)]
    for arguments in drawn:
        book.validate(arguments)  # raises ToolError if a draw broke the schema
    assert {a["room"] for a in drawn} == {"A", "B", "C"} and {a["people"] for a in drawn} == {3, 4, 5}
    assert all(0 < a["budget"] < 2 for a in drawn) and all(len(a["tags"]) <= 2 for a in drawn)
    assert {a["window"]["start"] for a in drawn} <= set(range(24)) and len({a["window"]["start"] for a in drawn}) > 12
    assert {type(a.get("note", 0)) for a in drawn} == {int, str, type(None)}  # absent, a string, or null


def test_a_schema_random_values_cannot_meet_is_a_clear_error():
    @tool
    def lookup(code: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d{4}$")]) -> str:
        """Look a code up.

        Args:
            code: Like ABC-1234.
        """
        return code

    with pytest.raises(ValueError, match="lookup: no valid random arguments in 20 draws"):
        lookup.sample_arguments(np.random.default_rng(0))


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_plain_sample_keeps_gymnasiums_contract(env_id):
    env = _make(env_id)
    env.action_space.seed(0)
    drawn = [env.action_space.sample() for _ in range(10)]  # up to 32K characters each: 10 is plenty
    assert all(env.action_space.contains(x) for x in drawn)
    env.action_space.seed(0)
    assert [env.action_space.sample() for _ in range(10)] == drawn


# ----------------------------------------------------------------------------- ReAct plain-string input


def test_react_plain_string_input_reaches_a_one_parameter_tool():
    env = _make("agentgym/WeatherRun-v0")
    env.reset(seed=0, options={"task_index": 0})
    city = env.unwrapped.city
    plain = f"Thought: weather first.\nAction: get_weather\nAction Input: {city}"
    canonical = env.unwrapped.canonical("get_weather", city=city)
    obs_plain, _, _, _, info = env.step(plain)
    assert info["parse_error"] is None and info["tool_call"] == {"name": "get_weather", "arguments": {"city": city}}
    assert info["format"] == "react" and info["canonical"] is False
    env.reset(seed=0, options={"task_index": 0})
    obs_canonical, *_ = env.step(canonical)
    assert obs_plain.split("Result: ", 1)[1] == obs_canonical.split("Result: ", 1)[1]


# ----------------------------------------------------------------------------- hostile text stays linear


def _seconds(fn, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t0)
    return best


HOSTILE = {
    "react-plain-long": lambda n: "Action: get_weather\nAction Input: " + "a" * n,
    "react-plain-quotes": lambda n: 'Action: get_weather\nAction Input: "' + '\\"' * (n // 2),
    "react-plain-many": lambda n: "Action: get_weather\nAction Input: x\n" * (n // 35),
    "python-fences": lambda n: "```python\n" * (n // 10),
    "python-fence-spaces": lambda n: "```python" + " " * n,
    "fence-words": lambda n: "```" + "p" * n + "!",
}


@pytest.mark.parametrize("family", sorted(HOSTILE))
def test_interpreting_hostile_text_is_linear_and_small(family):
    """ReAct plain inputs and CodeSandbox's fence fallback add no super-linear work (8× the text ≤ 20× the time)."""
    env = _make("agentgym/CodeSandbox-v0").unwrapped
    make = HOSTILE[family]

    def interpret(text: str) -> None:
        env._interpretations.clear()  # measure the work, not the memo
        env.interpret(text)

    small, large = _seconds(interpret, make(4_000)[:32_000]), _seconds(interpret, make(32_000)[:32_000])
    assert large < 0.25, f"{family}: {large:.3f} s for 32 KB"
    assert large <= 20 * small + 0.01, f"{family}: {small * 1e3:.2f} ms → {large * 1e3:.2f} ms for 8× the text"
