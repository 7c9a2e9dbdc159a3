"""What every learner over ``Discrete`` spaces shares: its validated config, the discrete env view,
uniform draws in blocks, greedy evaluation episodes, and the two pieces of loading a saved agent that
do not depend on its file format (the env it was saved with, a one-line reason for a bad file)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
from pydantic import BaseModel, ValidationError

from agentgym.core.wrappers import as_discrete

__all__ = ["Callback", "DiscreteAgent", "GreedyRollout", "first_line", "saved_env"]

Callback = Callable[[Any, dict[str, Any]], bool | None]
"""``callback(agent, metrics)`` after every episode; returning ``False`` stops training."""


class GreedyRollout(NamedTuple):
    states: list[int]
    episode_return: float
    success: bool


class DiscreteAgent:
    """Base of the tabular and neural agents. ``Agent(env, config=None, **overrides)``: the overrides
    are fields of the agent's pydantic config (``config_cls``), validated with a clear error.

    A text ``ToolEnv`` is wrapped in :class:`~agentgym.core.wrappers.DiscreteToolActions`; any env with
    ``Discrete`` observation and action spaces is used as it is. A subclass sets ``algorithm`` and
    ``config_cls`` and defines :meth:`greedy_actions` and :meth:`_draw_block`.
    """

    algorithm: ClassVar[str] = ""
    config_cls: ClassVar[type[BaseModel]] = BaseModel

    def __init__(self, env: gym.Env, config: BaseModel | None = None, **overrides: Any) -> None:
        self.config: Any = self.config_cls.model_validate({**(config.model_dump() if config else {}), **overrides})
        self.env = as_discrete(env)
        self.n_states = int(self.env.observation_space.n)
        self.n_actions = int(self.env.action_space.n)
        self.episodes_done = 0
        self._eval_env: gym.Env | None = None
        self._draws: list[float] = []
        self._draw = 0

    def _draw_block(self) -> list[float]:
        """A block of U[0, 1) numbers from the agent's seeded generator."""
        raise NotImplementedError

    def _uniform(self) -> float:
        """Next U[0, 1) draw (drawn in blocks: one generator call per step is the slow part)."""
        if self._draw >= len(self._draws):
            self._draws, self._draw = self._draw_block(), 0
        self._draw += 1
        return self._draws[self._draw - 1]

    def greedy_actions(self) -> list[int]:
        """The greedy action of every state, indexed from 0."""
        raise NotImplementedError

    def greedy_rollout(self, max_steps: int | None = None) -> GreedyRollout:
        """States visited, return and success of one episode that follows the greedy action, on a
        copy of the env reset with the config seed, capped at ``eval_max_steps`` (so a policy that
        walks in circles still ends)."""
        if self._eval_env is None:
            self._eval_env = copy.deepcopy(self.env)
        env = self._eval_env
        s_start, a_start = int(self.env.observation_space.start), int(self.env.action_space.start)
        table = self.greedy_actions()
        s, info = env.reset(seed=self.config.seed)
        states, total = [int(s)], 0.0
        for _ in range(max_steps or self.config.eval_max_steps):
            s, r, terminated, truncated, info = env.step(table[int(s) - s_start] + a_start)
            states.append(int(s))
            total += float(r)
            if terminated or truncated:
                break
        return GreedyRollout(states, total, bool(info.get("success", False)))

    def greedy_return(self, max_steps: int | None = None) -> float:
        """Return of one greedy episode (see :meth:`greedy_rollout`)."""
        return self.greedy_rollout(max_steps).episode_return


def saved_env(path: object, env: gym.Env | None, env_id: str | None) -> gym.Env:
    """``env`` if given, else ``gym.make`` of the id a saved agent at ``path`` records (``ValueError`` if none)."""
    if env is not None:
        return env
    if not env_id:
        raise ValueError(f"{path} records no env id; pass env=")
    return gym.make(env_id)


def first_line(exc: BaseException) -> str:
    """The gist of ``exc`` in one line: a validation error's first field and message, else ``Type: first line``."""
    if isinstance(exc, ValidationError) and (errors := exc.errors(include_url=False)):
        return f"{'.'.join(map(str, errors[0]['loc']))}: {errors[0]['msg']}"[:200]
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__
