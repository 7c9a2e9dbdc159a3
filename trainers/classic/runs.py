"""Training runs of the classic learners on disk: config, metrics, learning curve and checkpoint in a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym.trainers import TRAINERS, trainer_spec
from agentgym.trainers.run.run_dir import RunDir

__all__ = ["ALGORITHMS", "TABULAR", "train"]

TABULAR = ("q-learning", "sarsa")
ALGORITHMS = tuple(name for name, spec in TRAINERS.items() if not spec.llm)


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
    spec = trainer_spec(algorithm)
    if spec.llm:
        raise ValueError(f"{algorithm} trains a language model; choose one of {', '.join(ALGORITHMS)}")
    agent_cls, _ = spec.load()
    env = gym.make(env_id, **(env_kwargs or {}))
    agent = agent_cls(env, seed=seed, **hyperparameters)
    run = RunDir(out)
    run.write_config(
        algorithm,
        env_id=env_id,
        env_kwargs=env_kwargs or {},
        budget=budget,
        budget_unit="env steps" if spec.budget == "timesteps" else "episodes",
        agent=agent.config.model_dump(),
    )
    with run.metrics(step_key="episode") as metrics:
        agent.learn(budget, callback=lambda _agent, row: metrics.write(row), progress_bar=progress_bar)
    run.plot(algorithm, metrics.rows, keys=("return", "greedy_return"), x="episode", title=f"{algorithm} on {env_id}")
    agent.save(run.path / ("qtable.npz" if algorithm in TABULAR else "model.pt"))
    return agent, metrics.rows
