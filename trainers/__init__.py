"""The agentgym learners (installed as ``agentgym.trainers``), and the one registry of them.

Classic RL on the discrete view: :class:`QLearning`, :class:`SARSA`, :class:`REINFORCE`, :class:`PPO`.
Language models: :class:`SFT`, :class:`GRPO`, :class:`LLMPPO`, :class:`DPO`, :class:`RewardModelTrainer`.
Each trainer and its ``*Config`` is imported on first use (PEP 562), so ``import agentgym.trainers`` (and the
``agentgym`` command) loads neither torch nor transformers until a trainer is asked for.

:data:`TRAINERS` maps each CLI name (``agentgym train NAME``) to a :class:`TrainerSpec`; the CLI and
:func:`agentgym.trainers.classic.runs.train` look trainers up there and nowhere else.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from agentgym.trainers.classic.base import DiscreteAgent

__all__ = [
    "DPO",
    "GRPO",
    "LLMPPO",
    "PPO",
    "REINFORCE",
    "SARSA",
    "SFT",
    "TRAINERS",
    "DPOConfig",
    "DiscreteAgent",
    "GRPOConfig",
    "LLMPPOConfig",
    "PPOConfig",
    "QLearning",
    "REINFORCEConfig",
    "RewardModelConfig",
    "RewardModelTrainer",
    "SFTConfig",
    "TabularConfig",
    "TrainerSpec",
    "trainer_names",
    "trainer_spec",
]


@dataclass(frozen=True)
class TrainerSpec:
    """A trainer as the CLI and Python find it.

    ``budget`` is what the command line's budget flag of the same name sets: a field of ``config``
    (LLM trainers) or the count passed to ``learn`` (``episodes``; PPO: ``timesteps``). ``resumable``: the trainer
    checkpoints, and ``--resume`` continues its runs (its class's ``resumable``). The CLI's lists of trainers are
    read from these specs.
    """

    name: str
    module: str
    trainer: str
    config: str
    budget: str
    llm: bool
    resumable: bool = False

    def load(self) -> tuple[type, type]:
        """The trainer class and its config class (imports the module)."""
        module = importlib.import_module(f"agentgym.trainers.{self.module}")
        return getattr(module, self.trainer), getattr(module, self.config)


TRAINERS: dict[str, TrainerSpec] = {
    spec.name: spec
    for spec in (
        TrainerSpec("q-learning", "classic.tabular", "QLearning", "TabularConfig", "episodes", llm=False),
        TrainerSpec("sarsa", "classic.tabular", "SARSA", "TabularConfig", "episodes", llm=False),
        TrainerSpec("reinforce", "classic.reinforce", "REINFORCE", "REINFORCEConfig", "episodes", llm=False),
        TrainerSpec("ppo", "classic.ppo", "PPO", "PPOConfig", "timesteps", llm=False),
        TrainerSpec("sft", "llm.sft", "SFT", "SFTConfig", "episodes", llm=True, resumable=True),
        TrainerSpec("grpo", "llm.grpo", "GRPO", "GRPOConfig", "steps", llm=True, resumable=True),
        TrainerSpec("llm-ppo", "llm.ppo", "LLMPPO", "LLMPPOConfig", "steps", llm=True, resumable=True),
        TrainerSpec("dpo", "llm.dpo", "DPO", "DPOConfig", "rounds", llm=True),
        TrainerSpec("reward-model", "llm.reward_model", "RewardModelTrainer", "RewardModelConfig", "tasks", llm=True),
    )
}

_LAZY = {  # the trainers' public names -> their module (loaded by __getattr__ on first use)
    name: spec.module for spec in TRAINERS.values() for name in (spec.trainer, spec.config)
}


def trainer_names(classic: bool | None = None, *, budget: str | None = None, resumable: bool | None = None) -> str:
    """The registered trainers' names that match (``classic``: not a language-model trainer), joined by ", "."""
    return ", ".join(
        s.name
        for s in TRAINERS.values()
        if (classic is None or s.llm != classic)
        and (budget is None or s.budget == budget)
        and (resumable is None or s.resumable == resumable)
    )


def trainer_spec(name: str) -> TrainerSpec:
    """The registered trainer ``name`` (a CLI name such as ``"grpo"``); ``ValueError`` listing the names if unknown."""
    if name not in TRAINERS:
        raise ValueError(f"unknown algorithm {name!r}; choose one of {', '.join(TRAINERS)}")
    return TRAINERS[name]


def __getattr__(name: str) -> Any:  # PEP 562: a trainer loads torch/transformers only when asked for
    if name in _LAZY:
        value = getattr(importlib.import_module(f"agentgym.trainers.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
