"""Evaluate a policy on an env: returns, success rate, episode lengths, reproducibility metadata."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import BaseModel

import agentgym
from agentgym.wrappers import as_discrete

__all__ = ["EvalReport", "RandomAgent", "evaluate", "make_agent"]


class EvalReport(BaseModel):
    """What :func:`evaluate` measured, with what is needed to reproduce it."""

    env_id: str | None
    agent: str
    episodes: int
    seed: int
    mean_return: float
    std_return: float
    success_rate: float
    mean_length: float
    returns: list[float]
    package_version: str = agentgym.__version__


class RandomAgent:
    """Uniformly random actions from ``action_space`` (seeded)."""

    def __init__(self, action_space: gym.Space, seed: int | None = None) -> None:
        self.action_space = action_space
        self.action_space.seed(seed)

    def predict(self, observation: Any, state: Any = None, deterministic: bool = True) -> tuple[Any, None]:
        return self.action_space.sample(), None


def evaluate(
    policy: Any,
    env: gym.Env,
    *,
    episodes: int | None = None,
    seed: int = 0,
    agent: str = "",
    max_steps: int = 10_000,
) -> EvalReport:
    """Run episodes and report. Episode ``i`` is reset with ``seed + i``.

    ``policy`` is an object with SB3's ``predict(obs) -> (action, state)`` or a plain callable
    ``obs -> action``. ``episodes=None`` plays every task of an env with a fixed task list once
    (``options={"task_index": i}``; e.g. WeatherRun's frozen test split), else 10 episodes.
    ``max_steps`` caps an episode on an env without a time limit.
    """
    num_tasks = getattr(env.unwrapped, "num_tasks", None)
    all_tasks = episodes is None and num_tasks is not None
    episodes = num_tasks if all_tasks else (episodes or 10)
    act: Callable[[Any], Any]
    if hasattr(policy, "predict"):
        act = lambda obs: policy.predict(obs, deterministic=True)[0]  # noqa: E731
    else:
        act = policy
    returns, lengths, successes = [], [], []
    for i in range(episodes):
        obs, info = env.reset(seed=seed + i, options={"task_index": i} if all_tasks else None)
        total, length = 0.0, 0
        for length in range(1, max_steps + 1):  # noqa: B007
            obs, reward, terminated, truncated, info = env.step(act(obs))
            total += float(reward)
            if terminated or truncated:
                break
        returns.append(total)
        lengths.append(length)
        successes.append(bool(info.get("success", False)))
    return EvalReport(
        env_id=env.spec.id if env.spec else None,
        agent=agent or type(policy).__name__,
        episodes=episodes,
        seed=seed,
        mean_return=float(np.mean(returns)),
        std_return=float(np.std(returns)),
        success_rate=float(np.mean(successes)),
        mean_length=float(np.mean(lengths)),
        returns=returns,
    )


def make_agent(spec: str, env: gym.Env, seed: int | None = None) -> tuple[Any, gym.Env]:
    """Build an agent from a spec string and return it with the env view it acts on.

    Specs: ``random`` (uniform over the discrete menu), ``oracle`` (the task's scripted expert, on
    the text env), ``qtable:PATH`` (a saved Q-learning or SARSA agent, acting greedily),
    ``torch:PATH`` (a saved REINFORCE or PPO agent, taking its most likely action).
    """
    kind, _, arg = spec.partition(":")
    if kind == "oracle":
        return env.unwrapped.oracle(), env
    if kind == "random":
        env = as_discrete(env)
        return RandomAgent(env.action_space, seed), env
    if kind == "qtable":
        from agentgym.trainers.tabular import TabularAgent

        agent = TabularAgent.load(arg, env)
        return agent, agent.env
    if kind == "torch":
        import torch

        from agentgym.trainers import PPO, REINFORCE

        algorithm = torch.load(arg, weights_only=True).get("algorithm")
        agent_cls = {"reinforce": REINFORCE, "ppo": PPO}.get(algorithm)
        if agent_cls is None:
            raise ValueError(f"{arg} holds no REINFORCE or PPO checkpoint (algorithm {algorithm!r})")
        agent = agent_cls.load(arg, env)
        return agent, agent.env
    raise ValueError(f"unknown agent spec {spec!r}; use 'random', 'oracle', 'qtable:PATH' or 'torch:PATH'")
