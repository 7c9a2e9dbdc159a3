"""The ``agentgym/*`` environment ids."""

from __future__ import annotations

import importlib

import gymnasium as gym

__all__ = ["ENV_IDS", "register_envs", "describe"]

ENV_IDS: dict[str, dict] = {
    "agentgym/CliffWalk-v0": {
        "entry_point": "agentgym.envs.cliff_walk:CliffWalkEnv",
        "max_episode_steps": 100,
    },
    "agentgym/WeatherRun-v0": {
        "entry_point": "agentgym.envs.weather_run:WeatherRunEnv",
        "max_episode_steps": 8,
    },
    "agentgym/SQLLookup-v0": {
        "entry_point": "agentgym.envs.sql_lookup:SQLLookupEnv",
        "max_episode_steps": 12,
    },
    "agentgym/CodeSandbox-v0": {
        "entry_point": "agentgym.envs.code_sandbox:CodeSandboxEnv",
        "max_episode_steps": 10,
    },
}


def register_envs() -> None:
    """Register every agentgym id with Gymnasium (idempotent)."""
    for env_id, spec in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, **spec)


def describe(env_id: str) -> str:
    """The first line of the env class's docstring."""
    module, _, name = gym.spec(env_id).entry_point.partition(":")
    doc = getattr(importlib.import_module(module), name).__doc__ or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
