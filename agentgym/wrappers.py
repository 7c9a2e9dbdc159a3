"""Wrappers that give tool envs the spaces classic RL libraries expect."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from agentgym.core import ToolEnv

__all__ = ["DiscreteToolActions", "as_discrete", "candidate_state_key", "candidate_state_keys"]


class DiscreteToolActions(gym.Wrapper[int, int, str, str], gym.utils.RecordConstructorArgs):
    """``Discrete`` actions over a tool env's menu of canonical calls, ``Discrete`` observations over
    its declared state keys.

    Action ``i`` sends ``env.action_menu()[i]`` (read at every step, so a menu can name the episode's
    city or table) through the full tool layer (parse, validate, execute);
    the observation is the index of ``env.state_key()`` in ``env.state_keys()``. The text observation
    is kept in ``info["text"]``. Q-learning, REINFORCE, Stable-Baselines3's DQN/PPO and anything else
    that takes ``Discrete`` spaces train on every task through this wrapper.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        base = env.unwrapped
        if not isinstance(base, ToolEnv):
            raise TypeError(f"DiscreteToolActions wraps a ToolEnv, got {type(base).__name__}")
        self._base = base
        self.state_keys: list[Any] = list(base.state_keys())
        self._index = {key: i for i, key in enumerate(self.state_keys)}
        if len(self._index) != len(self.state_keys):
            raise ValueError(f"{type(base).__name__}.state_keys() has duplicates")
        self.action_space = spaces.Discrete(len(base.action_menu()))
        self.observation_space = spaces.Discrete(len(self.state_keys))

    @property
    def menu(self) -> list[str]:
        """The action strings that actions 0..n-1 send now (a task may fill in episode details, e.g. the city)."""
        return self._base.action_menu()

    def _observe(self) -> int:
        key = self._base.state_key()
        try:
            return self._index[key]
        except KeyError:
            raise KeyError(f"state key {key!r} is not among {type(self._base).__name__}.state_keys()") from None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        text, info = self.env.reset(seed=seed, options=options)
        info["text"] = text
        return self._observe(), info

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        menu = self._base.action_menu()
        if not 0 <= action < len(menu):
            raise ValueError(f"action must be an int in [0, {len(menu)}), got {action!r}")
        text, reward, terminated, truncated, info = self.env.step(menu[action])
        info["text"] = text
        return self._observe(), reward, terminated, truncated, info


def as_discrete(env: gym.Env) -> gym.Env:
    """``env`` itself if its spaces are already ``Discrete``, else wrapped in :class:`DiscreteToolActions`."""
    if isinstance(env.action_space, spaces.Discrete) and isinstance(env.observation_space, spaces.Discrete):
        return env
    if isinstance(env.unwrapped, ToolEnv):
        return DiscreteToolActions(env)
    raise TypeError(
        f"need Discrete action and observation spaces or a ToolEnv; got {env.action_space} / {env.observation_space}"
    )


def candidate_state_key(prefix: str, candidates: Sequence[str], outcomes: Mapping[str, str]) -> str:
    """The state of a menu of candidate answers: what trying each one showed so far (``"?"`` if not
    tried), e.g. ``"q1 rows · q2 ? · q3 error"``. ``outcomes`` maps a stripped candidate to its outcome."""
    return " · ".join(f"{prefix}{i + 1} {outcomes.get(c.strip(), '?')}" for i, c in enumerate(candidates))


def candidate_state_keys(prefix: str, n: int, outcomes: Sequence[str], final: str) -> list[str]:
    """Every :func:`candidate_state_key` of ``n`` candidates (``outcomes`` starting with ``"?"``), then ``final``."""
    combos = itertools.product(outcomes, repeat=n)
    return [" · ".join(f"{prefix}{i + 1} {o}" for i, o in enumerate(combo)) for combo in combos] + [final]
