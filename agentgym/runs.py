"""Training runs on disk: a run directory holds the config, metrics, learning curve and checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym
from agentgym.metrics import MetricsWriter
from agentgym.plotting import plot_learning_curves
from agentgym.trainers.tabular import SARSA, QLearning, TabularAgent

__all__ = ["TABULAR", "train_tabular"]

TABULAR = ("q-learning", "sarsa")


def train_tabular(
    algorithm: str,
    env_id: str,
    out: str | Path,
    *,
    episodes: int = 500,
    seed: int | None = 0,
    env_kwargs: dict[str, Any] | None = None,
    progress_bar: bool = True,
    **hyperparameters: Any,
) -> tuple[TabularAgent, list[dict[str, Any]]]:
    """Train Q-learning or SARSA on ``env_id`` and write, in ``out``: ``config.json``,
    ``metrics.jsonl``/``metrics.csv`` (one row per episode), ``learning_curve.png`` and
    ``qtable.npz``. Returns the trained agent and its metric rows."""
    agent_cls = {"q-learning": QLearning, "sarsa": SARSA}.get(algorithm)
    if agent_cls is None:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(TABULAR)}")
    env = gym.make(env_id, **(env_kwargs or {}))
    agent = agent_cls(env, seed=seed, **hyperparameters)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "algorithm": algorithm,
        "env_id": env_id,
        "env_kwargs": env_kwargs or {},
        "episodes": episodes,
        "agent": agent.config.model_dump(),
        "package_version": agentgym.__version__,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    with MetricsWriter(out) as metrics:
        agent.learn(episodes, callback=lambda _agent, row: metrics.write(row), progress_bar=progress_bar)
    plot_learning_curves(
        {algorithm: metrics.rows}, out / "learning_curve.png", title=f"{algorithm} on {env_id}", floor=-120
    )
    agent.save(out / "qtable.npz")
    return agent, metrics.rows
