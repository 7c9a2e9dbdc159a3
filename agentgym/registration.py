"""The ``agentgym/*`` environment ids."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import gymnasium as gym

__all__ = ["ENV_IDS", "describe", "make_env", "register_envs", "split_kwargs"]

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


def split_kwargs(env_id: str, split: str | None, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``env_kwargs`` plus ``split=split`` if the env takes a split and the kwargs do not name one."""
    kwargs = dict(env_kwargs or {})
    if split is None or "split" in kwargs:
        return kwargs
    entry = gym.spec(env_id).entry_point
    creator = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    if "split" in inspect.signature(creator).parameters:
        kwargs["split"] = split
    return kwargs


def make_env(env_id: str, split: str | None = None, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    """``gym.make(env_id)`` on ``split`` (for envs with splits) with ``env_kwargs``."""
    return gym.make(env_id, **split_kwargs(env_id, split, env_kwargs))
