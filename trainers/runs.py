"""Training runs on disk: a run directory holds the config, metrics, learning curve and checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym
from agentgym.trainers.metrics import MetricsWriter
from agentgym.trainers.plotting import plot_learning_curves

__all__ = ["ALGORITHMS", "TABULAR", "train"]

TABULAR = ("q-learning", "sarsa")
ALGORITHMS = (*TABULAR, "reinforce", "ppo")


def _agent_class(algorithm: str) -> Any:
    from agentgym.trainers import PPO, REINFORCE, SARSA, QLearning

    classes = {"q-learning": QLearning, "sarsa": SARSA, "reinforce": REINFORCE, "ppo": PPO}
    if algorithm not in classes:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    return classes[algorithm]


def train(
    algorithm: str,
    env_id: str,
    out: str | Path,
    *,
    budget: int = 500,
    seed: int | None = 0,
    env_kwargs: dict[str, Any] | None = None,
    progress_bar: bool = True,
    **hyperparameters: Any,
) -> tuple[Any, list[dict[str, Any]]]:
    """Train ``algorithm`` (one of :data:`ALGORITHMS`) on ``env_id`` and write, in ``out``:
    ``config.json``, ``metrics.jsonl``/``metrics.csv`` (one row per episode), ``learning_curve.png``
    and the checkpoint (``qtable.npz`` for the tabular learners, ``model.pt`` for REINFORCE/PPO).

    ``budget`` is episodes, except for PPO, which counts env steps. Returns the trained agent and
    its metric rows.
    """
    agent_cls = _agent_class(algorithm)
    env = gym.make(env_id, **(env_kwargs or {}))
    agent = agent_cls(env, seed=seed, **hyperparameters)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    config = {
        "algorithm": algorithm,
        "env_id": env_id,
        "env_kwargs": env_kwargs or {},
        "budget": budget,
        "budget_unit": "env steps" if algorithm == "ppo" else "episodes",
        "agent": agent.config.model_dump(),
        "package_version": agentgym.__version__,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    with MetricsWriter(out) as metrics:
        agent.learn(budget, callback=lambda _agent, row: metrics.write(row), progress_bar=progress_bar)
    plot_learning_curves({algorithm: metrics.rows}, out / "learning_curve.png", title=f"{algorithm} on {env_id}")
    agent.save(out / ("qtable.npz" if algorithm in TABULAR else "model.pt"))
    return agent, metrics.rows
