"""ToolEnv's loop on a small custom task: execution order, errors, termination, observations."""

import warnings
from typing import Any

import pytest
from gymnasium.utils.env_checker import check_env

from agentgym import ToolEnv, ToolError, ToolResult, tool


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
    from agentgym import core

    env = Counter()
    interp = env.interpret("add(2)")
    assert isinstance(interp, core.Interpretation) and "Interpretation" in core.__all__
    assert interp.error is None and [(tool.name, kwargs) for tool, kwargs in interp.calls] == [("add", {"amount": 2})]
    assert env.interpret("add(2)") is interp
    long = "add(2) " + " " * core._MEMO_MAX_ACTION_CHARS  # past the memo's key limit: parsed afresh each time
    assert env.interpret(long) is not env.interpret(long) and env.interpret(long).error is None
