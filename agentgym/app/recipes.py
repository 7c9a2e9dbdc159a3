"""Settings that work for the tiny local model (``--model tiny``), as config overrides per stage.

Real 1–8 B models start from the trainers' defaults (GRPO: learning rate 1e-6, β 0.04). The tiny ~1 M-parameter
model (``--model tiny``, the shipped base) needs different ones, found on WeatherRun
(``benchmarks/grpo_weatherrun.py``); :data:`TINY_DEFAULTS` holds them per algorithm:

- short prompts: each turn shows the compact tool list and the env's one-line state summary (``context="summary"``,
  ``turn_template="{signatures}\n{summary}"``), ~80 tokens per turn with the shipped base's tokenizer instead of
  several hundred for the full observation;
- learning rates ~300× larger than for real models (SFT 1e-3, GRPO 3e-4 with a 20-step warm-up);
- a strong KL anchor to the SFT model (β = 0.3): without it, groups collapse to identical rewards
  (``frac_zero_std`` → 1) and the policy locks into a partial rule.

Each task folder states what its stages change in a ``RECIPES`` mapping (env id → stage → overrides, e.g.
:mod:`agentgym.envs.weather.recipes`), collected by :func:`~agentgym.core.registration.declared_recipes`. :data:`TINY`
names the merged recipes: a stage of the default task (WeatherRun) by its stage (``"grpo"``), any other by stage
and task (``"sft-sqllookup"``).
"""

from __future__ import annotations

from typing import Any

from agentgym.core.registration import declared_recipes

__all__ = ["DEFAULT_ENV", "TINY", "TINY_DEFAULTS", "merged_recipe", "recipe_name", "tiny_overrides"]

DEFAULT_ENV = "agentgym/WeatherRun-v0"
"""The task whose recipes go by their stage alone (the one ``agentgym train`` plays by default)."""

_ROLLOUT = {"context": "summary", "turn_template": "{signatures}\n{summary}", "max_new_tokens": 48, "max_turns": 4}
_SAMPLED = {**_ROLLOUT, "temperature": 1.0}

TINY_DEFAULTS: dict[str, dict[str, Any]] = {
    "sft": {
        "rollout": _ROLLOUT,
        "episodes": 512,
        "epochs": 1,
        "randomize_decisions": True,  # a format-only warm-up: the decisions are left to RL
        "learning_rate": 1e-3,
        "warmup_steps": 5,
        "batch_size": 32,
    },
    "grpo": {
        "rollout": _SAMPLED,
        "num_generations": 4,
        "tasks_per_step": 16,
        "learning_rate": 3e-4,
        "warmup_steps": 20,
        "beta": 0.3,
        "loss_type": "dapo",
    },
    "ppo": {  # as many episodes per step as GRPO's 16 × 4
        "rollout": _SAMPLED,
        "episodes_per_step": 64,
        "learning_rate": 3e-4,
        "warmup_steps": 20,
        "beta": 0.05,
        "vf_coef": 0.1,
        "ppo_epochs": 2,
        "num_minibatches": 2,
    },
    "reward-model": {
        "rollout": _SAMPLED,
        "tasks": 2048,
        "generations": 4,
        "epochs": 6,
        "batch_size": 32,
        "learning_rate": 1e-4,
        "max_length": 64,
    },
    "dpo": {
        "rollout": _SAMPLED,
        "tasks": 256,
        "generations": 4,
        "rounds": 8,
        "beta": 0.1,
        "rpo_alpha": 1.0,
        "learning_rate": 3e-4,
        "batch_size": 16,
    },
}
"""The tiny model's settings per algorithm, before a task's own."""


def recipe_name(stage: str, env_id: str) -> str:
    """The :data:`TINY` key of ``stage`` on ``env_id``: ``"sft"`` on WeatherRun, ``"sft-sqllookup"`` on SQLLookup."""
    return stage if env_id == DEFAULT_ENV else f"{stage}-{env_id.rpartition('/')[2].rpartition('-v')[0].lower()}"


def merged_recipe(stage: str, env_id: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` over the defaults of ``stage``'s algorithm (``grpo-from-base`` is GRPO's), one level deep:
    a group of settings (``rollout``) keeps the defaults it does not name."""
    algorithm = max((a for a in TINY_DEFAULTS if stage == a or stage.startswith(f"{a}-")), key=len, default=None)
    if algorithm is None:
        raise ValueError(f"{env_id} declares a recipe for {stage!r}, which names no algorithm of {list(TINY_DEFAULTS)}")
    merged = {"env_id": env_id, **TINY_DEFAULTS[algorithm]}
    for key, value in overrides.items():
        base = merged.get(key)
        merged[key] = {**base, **value} if isinstance(base, dict) and isinstance(value, dict) else value
    return merged


TINY: dict[str, dict[str, Any]] = {
    recipe_name(stage, env_id): merged_recipe(stage, env_id, overrides)
    for env_id, stages in declared_recipes().items()
    for stage, overrides in stages.items()
}
"""Every task's tiny recipes, merged: name (:func:`recipe_name`) → config overrides, ``env_id`` included."""


def tiny_overrides(stage: str, env_id: str) -> dict[str, Any]:
    """The tiny-model settings for ``stage`` on ``env_id``: the env's own recipe for the stage where it declares
    one, else ``stage``'s :data:`TINY` recipe (a name such as ``"grpo"`` or ``"grpo-cliffwalk"``) without its env
    settings (those hold only on the recipe's own env)."""
    own = recipe_name(stage, env_id)
    if own in TINY:
        return dict(TINY[own])
    env_keys = ("env_id", "env_kwargs", "eval_env_kwargs")
    settings = {k: v for k, v in TINY[stage].items() if k not in env_keys}
    if env_id == TINY[stage]["env_id"]:
        settings |= {k: v for k, v in TINY[stage].items() if k in env_keys[1:]}
    return {"env_id": env_id, **settings}
