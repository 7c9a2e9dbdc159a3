"""ToolEnv's loop on a small custom task: execution order, errors, termination, observations."""

import re
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from agentgym import ToolCall, ToolEnv, ToolError, ToolResult, tool
from agentgym.core import task_info, tools_of


class Counter(ToolEnv):
    """A counter the agent increments; ``finish`` ends the episode."""

    task = "Add numbers, then finish."
    invalid_action_reward = -0.5

    def _reset_task(self, options: dict[str, Any]) -> None:
        self.total = int(options.get("start", 0))

    @tool
    def add(self, amount: int) -> ToolResult:
        """Add to the counter.

        Args:
            amount: How much to add (0 to 10).
        """
        if not 0 <= amount <= 10:
            raise ToolError(f"amount must be between 0 and 10, got {amount}")
        self.total += amount
        return ToolResult(f"total is {self.total}", {"progress": 0.1})

    @tool
    def finish(self) -> ToolResult:
        """End the episode."""
        return ToolResult("done", {"success": 1.0 if self.total == 5 else 0.0}, terminated=True)

    @tool
    def buggy(self) -> str:
        """A tool with a bug."""
        return 1 / 0

    def summary(self) -> str:
        return f"total {self.total} · steps {self.steps}"

    @property
    def success(self) -> bool:
        return self.total == 5


def test_tools_are_collected_from_methods():
    assert list(Counter.tools) == ["add", "finish", "buggy"]
    assert Counter.tools["add"].schema["function"]["parameters"]["properties"]["amount"] == {
        "description": "How much to add (0 to 10).",
        "type": "integer",
    }


@pytest.mark.filterwarnings("ignore:.*alternative render modes")
def test_tools_of_reads_a_tool_env_through_wrappers_and_no_tools_elsewhere():
    wrapped = gym.wrappers.TimeLimit(Counter(), max_episode_steps=5)
    assert list(tools_of(wrapped)) == ["add", "finish", "buggy"]
    tools_of(wrapped).clear()  # a copy: the class's tools stay
    assert list(Counter.tools) == ["add", "finish", "buggy"]
    assert tools_of(gym.make("CartPole-v1")) == {}


def test_default_feedback_is_the_latest_result_and_the_state():
    env = Counter()
    env.reset(seed=0)
    env.step('<tool_call>{"name": "add", "arguments": {"amount": 3}}</tool_call>')
    assert env.feedback() == "total is 3 (state: total 3 · steps 1)"
    assert task_info(env).num_tasks is None and task_info(env).split is None  # no task list declared


def test_check_env_on_custom_task():
    check_env(Counter())


def test_several_calls_execute_in_order_and_rewards_sum_by_component():
    env = Counter()
    env.reset(seed=0, options={"start": 1})
    obs, reward, terminated, _, info = env.step("add(1) add(amount=3) <ignored prose>")
    assert [c["arguments"] for c in info["tool_calls"]] == [{"amount": 1}, {"amount": 3}]
    assert info["reward_components"] == pytest.approx({"progress": 0.2})
    assert reward == pytest.approx(0.2) and not terminated
    assert "total is 2\ntotal is 5" in obs and info["summary"] == "total 5 · steps 1"
    assert info["success"] is True


def test_termination_skips_remaining_calls():
    env = Counter()
    env.reset(seed=0)
    obs, _, terminated, _, info = env.step("finish() add(2)")
    assert terminated and "1 more call(s) skipped" in obs and info["summary"] == "total 0 · steps 1"


def test_tool_error_is_an_observation():
    env = Counter()
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("add(50)")
    assert "Error: amount must be between 0 and 10, got 50" in obs
    assert reward == 0.0 and not terminated and info["parse_error"] is None


def test_invalid_action_reward_and_message():
    env = Counter()
    env.reset(seed=0)
    obs, reward, _, _, info = env.step('add(amount="lots")')
    assert reward == -0.5 and info["reward_components"] == {"invalid_action": -0.5}
    assert "argument 'amount' must be integer" in info["parse_error"]
    assert "Available tools: add(amount: integer), finish(), buggy()" in obs


def test_tool_bug_warns_but_does_not_crash():
    env = Counter()
    env.reset(seed=0)
    with pytest.warns(RuntimeWarning, match="buggy"):
        obs, *_ = env.step("buggy()")
    assert "buggy failed: ZeroDivisionError" in obs


def test_observation_stays_within_space_with_long_history():
    env = Counter(history=1000)
    env.reset(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(300):
            obs, *_ = env.step("add(0) " + "x" * 20_000)
    assert env.observation_space.contains(obs)
    assert obs.startswith("Task: Add numbers") and obs.endswith("State: total 0 · steps 300")


def test_interpretation_is_memoised_but_state_is_not():
    env = Counter()
    env.reset(seed=0)
    env.step("add(2)")
    _, _, _, _, info = env.step("add(2)")
    assert info["summary"] == "total 4 · steps 2"


def test_interpret_returns_the_public_interpretation_and_memoises_only_short_actions():
    from agentgym.core import tool_env

    env = Counter()
    interp = env.interpret("add(2)")
    assert isinstance(interp, tool_env.Interpretation) and "Interpretation" in tool_env.__all__
    assert interp.error is None and [(tool.name, kwargs) for tool, kwargs in interp.calls] == [("add", {"amount": 2})]
    assert env.interpret("add(2)") is interp
    long = "add(2) " + " " * tool_env._MEMO_MAX_ACTION_CHARS  # past the memo's key limit: parsed afresh each time
    assert env.interpret(long) is not env.interpret(long) and env.interpret(long).error is None


# ----------------------------------------------------------------------------- fallback_call (a task's own reading)


class Lenient(Counter):
    """A Counter that reads a bare number as ``add(amount=n)``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fallback_reads = 0

    def fallback_call(self, text: str) -> tuple[ToolCall, str] | None:
        self.fallback_reads += 1
        match = re.fullmatch(r"\s*(\d{1,3})\s*", text)
        return None if match is None else (ToolCall("add", {"amount": int(match.group(1))}), "number")


def test_fallback_call_reads_text_without_a_tool_call_as_a_non_canonical_call():
    env = Lenient()
    env.reset(seed=0)
    obs, reward, _, _, info = env.step(" 3 ")
    assert info["parse_error"] is None and info["tool_call"] == {"name": "add", "arguments": {"amount": 3}}
    assert info["format"] == "number" and info["canonical"] is False
    assert "total is 3" in obs and reward == pytest.approx(0.1)
    env.step(" 3 ")  # memoised: the hook reads each distinct text once
    assert env.fallback_reads == 1
    _, _, _, _, info = env.step("999")  # validated and executed like any call: the tool refuses it
    assert info["parse_error"] is None and info["summary"] == "total 6 · steps 3"


@pytest.mark.parametrize(
    ("action", "fragment"),
    [
        ("add(amount=", "unclosed parenthesis"),  # a malformed call of a real tool keeps its error
        ("add(3) 4", None),  # a real call wins
        ("lots", "no tool call found"),  # the hook declines
    ],
)
def test_fallback_call_is_consulted_only_when_no_known_tool_was_called(action, fragment):
    env = Lenient()
    env.reset(seed=0)
    *_, info = env.step(action)
    assert info["format"] != "number"
    assert (info["parse_error"] is None) if fragment is None else (fragment in info["parse_error"])
    assert env.fallback_reads == (1 if action == "lots" else 0)


def test_default_fallback_leaves_the_parse_error():
    env = Counter()
    env.reset(seed=0)
    *_, info = env.step("3")
    assert info["parse_error"] == "no tool call found in the action" and info["format"] is None


def test_fallback_call_naming_no_tool_is_a_clear_task_bug():
    class Broken(Counter):
        def fallback_call(self, text: str) -> tuple[ToolCall, str] | None:
            return ToolCall("nope", {}), "x"

    with pytest.raises(ValueError, match="Broken.fallback_call returned an unknown tool 'nope'"):
        Broken().interpret("hello")


# ----------------------------------------------------------------------------- render modes


def test_every_task_gets_human_mode_without_touching_the_base_class(capsys):
    class Drawn(Counter):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    assert Drawn.metadata["render_modes"] == ["rgb_array", "human"]
    assert ToolEnv.metadata["render_modes"] == ["ansi", "human"] and Counter.metadata is ToolEnv.metadata
    env = Counter(render_mode="human")
    capsys.readouterr()
    env.reset(seed=0)
    env.step("add(2)")
    assert capsys.readouterr().out == "total 0 · steps 0\ntotal 2 · steps 1\n"
    with pytest.raises(ValueError, match="render_mode must be one of"):
        Counter(render_mode="rgb_array")


# ----------------------------------------------------------------------------- sample_action


def test_sample_action_draws_valid_calls_from_the_tools():
    env = Counter()
    rng = np.random.default_rng(0)
    actions = [env.sample_action(rng) for _ in range(200)]
    interps = [env.interpret(a) for a in actions]
    assert all(i.error is None and i.parse.canonical for i in interps)
    assert {i.calls[0][0].name for i in interps} == {"add", "finish", "buggy"}
    amounts = {i.calls[0][1]["amount"] for i in interps if i.calls[0][0].name == "add"}
    assert amounts == set(range(11))  # an unbounded int draws 0..10
    assert env.sample_action(5) == env.sample_action(5)  # a seed works too

    class Toolless(ToolEnv):
        pass

    with pytest.raises(ValueError, match="no tools to sample"):
        Toolless().sample_action(0)
