"""What every registered tool env must do, checked on one id: the contract a new task is held to.

:func:`check_tool_env` runs Gymnasium's own checker (in text mode, and through :class:`DiscreteToolActions` when the
task has a discrete view), then plays seeded episodes of random valid calls and of hostile actions and checks, at
every step, what the README promises: a valid call parses, a bad action is an invalid action and never an
exception, the observation is its parts' text, and every reward lies within the task's declared bounds.
"""

from __future__ import annotations

import math

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

from agentgym.core.registration import describe
from agentgym.core.tool_env import ToolEnv
from agentgym.core.wrappers import DiscreteToolActions, DiscreteView

__all__ = ["ConformanceError", "check_tool_env"]

HOSTILE_ACTIONS = (
    "",
    "no call at all",
    '<tool_call>{"name": "no_such_tool", "arguments": {}}</tool_call>',
    '<tool_call>{"name": ',
    "\x00\x1b[2J\ud800" * 50,
    "(" * 10_000,
)
"""Actions no task accepts: each must come back as an invalid action (``info["parse_error"]``), not an exception."""


class ConformanceError(AssertionError):
    """An env breaks the tool-env contract; the message names the id, the step and what was wrong."""


def check_tool_env(env_id: str, *, episodes: int = 3, steps: int = 12, seed: int = 0, **kwargs) -> None:
    """Check that ``gym.make(env_id, **kwargs)`` keeps the tool-env contract (see the module docstring), playing
    ``episodes`` seeded episodes of at most ``steps`` random valid calls, then the hostile actions.
    ``ConformanceError`` names what broke."""

    def fail(what: str) -> None:
        raise ConformanceError(f"{env_id}: {what}")

    first = describe(env_id)
    name = env_id.split("/")[-1].split("-")[0]
    if not first.startswith(f"{name}:"):
        fail(f"the class docstring's first line must start with {name + ':'!r}, got {first!r}")
    env = gym.make(env_id, **kwargs)
    base = env.unwrapped
    if not isinstance(base, ToolEnv):
        fail(f"{type(base).__name__} is not a ToolEnv")
    check_env(gym.make(env_id, **kwargs).unwrapped, skip_render_check=False)
    if isinstance(base, DiscreteView):
        check_env(DiscreteToolActions(gym.make(env_id, **kwargs).unwrapped))
    bounds = base.task_info.reward_bounds

    def checked_step(action: str, where: str) -> tuple[bool, dict]:
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except Exception as exc:  # noqa: BLE001 (the contract: an action never raises)
            fail(f"{where}: step({action[:40]!r}) raised {type(exc).__name__}: {exc}")
        if obs != base.observation_parts().render(base.max_observation_length):
            fail(f"{where}: the observation is not observation_parts().render()")
        if not math.isfinite(reward) or (bounds is not None and not bounds[0] <= reward <= bounds[1]):
            fail(f"{where}: reward {reward!r} outside the declared bounds {bounds}")
        return terminated or truncated, info

    for episode in range(episodes):
        env.reset(seed=seed + episode)
        for step in range(steps):
            action = base.sample_action(seed + 1000 * episode + step)
            done, info = checked_step(action, f"episode {episode}, step {step}")
            if info["parse_error"] is not None:
                fail(f"episode {episode}, step {step}: a sampled valid call did not parse: {info['parse_error']}")
            if done:
                break
    for k, action in enumerate(HOSTILE_ACTIONS):
        env.reset(seed=seed)
        _, info = checked_step(action, f"hostile action {k}")
        if info["parse_error"] is None or info["reward_components"] != {"invalid_action": base.invalid_action_reward}:
            fail(f"hostile action {k} ({action[:40]!r}) was not refused as an invalid action: {info}")
