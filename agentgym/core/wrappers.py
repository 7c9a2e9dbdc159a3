"""Wrappers over tool envs: the discrete view classic RL libraries expect (:class:`DiscreteView`, the hooks a task
defines, and :class:`DiscreteToolActions`, the wrapper that serves them), and retry with reflection (:class:`Retry`)."""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from agentgym.core.tool_env import TaskInfo, ToolEnv, parts_of, safe_text

__all__ = [
    "RETRY_HEADER",
    "DiscreteToolActions",
    "DiscreteView",
    "Retry",
    "as_discrete",
    "candidate_state_key",
    "candidate_state_keys",
]


class DiscreteView:
    """The hooks of a tool task's discrete view, mixed in before :class:`~agentgym.core.ToolEnv`
    (``class CliffWalkEnv(DiscreteView, ToolEnv)``): a finite menu of canonical actions and a finite set of state
    keys, which :class:`DiscreteToolActions` serves as ``Discrete`` spaces. The task declares
    ``TaskInfo.discrete_view``."""

    def state_key(self) -> Hashable:
        """The discrete state for tabular learners; by default the one-line summary."""
        return self.summary()  # type: ignore[attr-defined]  # mixed into a ToolEnv

    def state_keys(self) -> Sequence[Hashable]:
        """Every value :meth:`state_key` can take, in a fixed order (the discrete observation space)."""
        raise NotImplementedError(f"{type(self).__name__} declares no finite set of state keys")

    def action_menu(self) -> list[str]:
        """A finite menu of canonical action strings (the discrete action space); read at every step, so it can
        name the episode's city or table."""
        raise NotImplementedError(f"{type(self).__name__} declares no finite action menu")

    @property
    def task_info(self) -> TaskInfo:
        return replace(super().task_info, discrete_view=True)  # type: ignore[misc]  # the ToolEnv's facts


class DiscreteToolActions(gym.Wrapper[int, int, str, str], gym.utils.RecordConstructorArgs):
    """``Discrete`` actions over a tool env's menu of canonical calls, ``Discrete`` observations over
    its declared state keys.

    Action ``i`` sends ``env.action_menu()[i]`` (:class:`DiscreteView`) through the full tool layer (parse,
    validate, execute);
    the observation is the index of ``env.state_key()`` in ``env.state_keys()``. The text observation
    is kept in ``info["text"]``. Q-learning, REINFORCE, Stable-Baselines3's DQN/PPO and anything else
    that takes ``Discrete`` spaces train on every task through this wrapper.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        base = env.unwrapped
        if not isinstance(base, ToolEnv) or not isinstance(base, DiscreteView):
            raise TypeError(f"DiscreteToolActions wraps a ToolEnv with a DiscreteView, got {type(base).__name__}")
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
    if isinstance(env.unwrapped, DiscreteView):
        return DiscreteToolActions(env)
    raise TypeError(
        "need Discrete action and observation spaces or a ToolEnv with a DiscreteView; "
        f"got {env.action_space} / {env.observation_space}"
    )


def candidate_state_key(prefix: str, candidates: Sequence[str], outcomes: Mapping[str, str]) -> str:
    """The state of a menu of candidate answers: what trying each one showed so far (``"?"`` if not
    tried), e.g. ``"q1 rows · q2 ? · q3 error"``. ``outcomes`` maps a stripped candidate to its outcome."""
    return " · ".join(f"{prefix}{i + 1} {outcomes.get(c.strip(), '?')}" for i, c in enumerate(candidates))


def candidate_state_keys(prefix: str, n: int, outcomes: Sequence[str], final: str) -> list[str]:
    """Every :func:`candidate_state_key` of ``n`` candidates (``outcomes`` starting with ``"?"``), then ``final``."""
    combos = itertools.product(outcomes, repeat=n)
    return [" · ".join(f"{prefix}{i + 1} {o}" for i, o in enumerate(combo)) for combo in combos] + [final]


RETRY_HEADER = "Attempt {failed} of {attempts} failed."
"""How :class:`Retry` begins the observation that starts a new attempt (``failed`` is the attempt that failed)."""

MAX_FEEDBACK_CHARS = 1_000
"""The feedback shown before a new attempt is cut to this many characters."""


class Retry(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Retry with reflection: after a failed attempt, the same task again, in the same episode, up to ``attempts``.

    An attempt ends when the wrapped env's episode ends (terminated, or truncated by its time limit). If it did
    not succeed (``info["success"]`` false) and attempts are left, the wrapped env is reset to the same task (the
    episode's ``reset`` arguments again; a reset without a seed draws one from the wrapper's generator first, so
    every attempt replays one task) and the observation is::

        Attempt 1 of 3 failed. Feedback: <what was wrong>
        Reflect on what went wrong, then try again: the same task starts over.

        <the first observation of the new attempt>

    The feedback is the task's own :meth:`~agentgym.ToolEnv.feedback` (a sentence on what was wrong that never
    gives the answer, e.g. WeatherRun's; by default the result of the attempt's last action and its state summary,
    what the agent was shown anyway; the same for a served env). It is cut to :data:`MAX_FEEDBACK_CHARS` characters. The
    episode ends at the first success or after the last attempt.

    Reward: an attempt's rewards are held back and paid when the attempt ends — ``δ^(a−1) · R_a`` (``R_a`` the
    attempt's return in the wrapped env, ``a`` its number, ``δ`` = ``discount``) when the episode ends there,
    and nothing when it is retried. The episode's return is therefore the final attempt's return discounted by
    the attempts it took (a first-try success keeps its full reward). ``info["reward_components"]`` holds what is
    paid, each component discounted alike; ``info["env_reward"]`` the wrapped env's own reward for the step.

    ``info`` also carries ``attempt`` (the attempt this step belongs to; after a retry, the new one), ``attempts`` (the
    limit) and ``success`` (the current attempt's; at the episode's end, whether some attempt succeeded). Episode
    records keep the last step's ``attempt`` (:attr:`~agentgym.core.episode.EpisodeRecord.attempt`): evaluation's pass@1
    is a success in attempt 1, success-within-k a success in any of the first k.

    Summary-context prompts (``RolloutConfig(context="summary")``) are built from the wrapped env's observation
    parts, which do not show the feedback; an LLM sees it in ``context="append"`` (the full observations).
    """

    def __init__(self, env: gym.Env, attempts: int = 2, discount: float = 0.5) -> None:
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise ValueError(f"attempts must be an int >= 1, got {attempts!r}")
        if not isinstance(discount, int | float) or not 0 < discount <= 1:
            raise ValueError(f"discount must be in (0, 1], got {discount!r}")
        gym.utils.RecordConstructorArgs.__init__(self, attempts=attempts, discount=discount)
        gym.Wrapper.__init__(self, env)
        self.attempts, self.discount = attempts, float(discount)
        self.attempt = 1
        self._reset_args: dict[str, Any] = {}
        self._seeds = np.random.default_rng()
        self._held: dict[str, float] = {}
        self._success = self._over = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if seed is None:
            seed = int(self._seeds.integers(2**31))
        else:
            self._seeds = np.random.default_rng(seed)
        self._reset_args = {"seed": seed, "options": options}
        self.attempt, self._held, self._success, self._over = 1, {}, False, False
        obs, info = self.env.reset(**self._reset_args)
        return obs, {**info, "attempt": 1, "attempts": self.attempts}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        info = {**info, "env_reward": float(reward), "attempts": self.attempts}
        if self._over:  # a step after the episode's end pays nothing (the wrapped env says it is over)
            return obs, 0.0, True, False, {**info, "reward_components": {}, "attempt": self.attempt}
        for name, value in info.get("reward_components", {}).items():
            self._held[name] = self._held.get(name, 0.0) + float(value)
        self._success = bool(info.get("success", False))
        if not (terminated or truncated):
            return obs, 0.0, False, False, {**info, "reward_components": {}, "attempt": self.attempt}
        scale = self.discount ** (self.attempt - 1)
        if self._success or self.attempt >= self.attempts:  # the episode ends: pay this attempt
            self._over = True
            paid = {name: scale * value for name, value in self._held.items()}
            return (
                obs,
                float(sum(paid.values())),
                terminated,
                truncated,
                {**info, "reward_components": paid, "attempt": self.attempt},
            )
        feedback = self._feedback()
        failed, self.attempt, self._held = self.attempt, self.attempt + 1, {}
        first, reset_info = self.env.reset(**self._reset_args)
        text = (
            f"{RETRY_HEADER.format(failed=failed, attempts=self.attempts)} Feedback: {feedback}\n"
            "Reflect on what went wrong, then try again: the same task starts over.\n\n"
            f"{first}"
        )
        limit = getattr(self.observation_space, "max_length", None)
        if limit is not None and len(text) > limit:
            text = text[:limit]
        info = {**info, **reset_info, "reward_components": {}, "attempt": self.attempt, "success": False}
        return text, 0.0, False, False, info

    def _feedback(self) -> str:
        """What went wrong in the attempt that just ended: the task's ``feedback()``, else its last result."""
        base = self.env.unwrapped
        if isinstance(base, ToolEnv):
            text = str(base.feedback())
        elif (parts := parts_of(self.env)) is not None:  # a served env: the same as a ToolEnv's default
            text = parts.outcome()
        else:
            text = "the task was not solved."
        text = safe_text(" ".join(text.split()))
        return text if len(text) <= MAX_FEEDBACK_CHARS else text[: MAX_FEEDBACK_CHARS - 1] + "…"
