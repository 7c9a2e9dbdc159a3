"""GRPO's settings (:class:`GRPOConfig`), beside the trainer (:mod:`agentgym.trainers.llm.grpo`), as TRL keeps them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentgym.trainers.llm.online_trainer import OnlineConfig

__all__ = ["GRPOConfig"]


class GRPOConfig(OnlineConfig):
    """Every GRPO knob, with defaults that suit 1–8 B models (see the module docstring for tiny ones).

    The shared fields (env, rollout, optimizer, ``beta``, reward sources, checkpoints) are documented
    on :class:`~agentgym.trainers.llm.online_trainer.OnlineConfig`.
    """

    num_generations: int = Field(8, ge=2, description="G: episodes per task instance (group size).")
    tasks_per_step: int = Field(8, ge=1, description="B: task instances per step; a step plays B × G episodes.")
    epsilon_low: float = Field(0.2, gt=0, description="Clip range below 1 for the probability ratio.")
    epsilon_high: float = Field(0.2, gt=0, description="Clip range above 1 (DAPO's clip-higher: 0.28).")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group",
        description="Divide advantages by the group's reward std, the batch's, or not at all (trajectory scheme; the "
        "turn scheme always divides by the batch std).",
    )
    loss_type: Literal["grpo", "dr_grpo", "dapo"] = Field("dapo", description="How token losses are averaged.")
    num_iterations: int = Field(1, ge=1, description="Gradient steps per rollout batch (μ in the paper).")
    skip_zero_std: bool = Field(False, description="Drop groups whose rewards all tie from the loss (and the KL).")
    credit_assignment: Literal["trajectory", "turn"] = Field(
        "trajectory",
        description="trajectory: one group-relative advantage per episode, shared by all its turns (GRPO); turn: "
        "per-turn returns-to-go, minus a group baseline (group_baseline), scaled over the batch (REINFORCE++).",
    )
    gamma: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Discount per turn: an episode's score is sum_t gamma^t r_t (trajectory) or each turn's "
        "return-to-go is r_t + gamma G_{t+1} (turn).",
    )
    lam: float = Field(
        1.0,
        ge=0,
        le=1,
        description="turn scheme: GAE lambda over turns with the group baseline as the value (1: returns-to-go "
        "minus the baseline; without a baseline, the returns-to-go discounted by gamma * lam).",
    )
    decision_coef: float = Field(
        0.0,
        ge=0,
        description="Weight of a cross-entropy on each answered episode's decision value (a boolean or enum tool "
        "argument, e.g. answer(suitable)) toward the value its outcome proves right: a success's own value, a failed "
        "boolean decision's other one (hindsight labels, agentgym.trainers.llm.probe.hindsight_decisions). A dense "
        "signal for the decision token, beside the surrogate; 0: plain GRPO.",
    )
    decision_replay: int = Field(
        0,
        ge=0,
        le=8192,
        description="With decision_coef > 0 (ignored at 0): keep the latest this many distinct hindsight-labelled "
        "decisions and take each step's decision loss over as many as the step answered, drawn from them "
        "(agentgym.trainers.llm.probe.DecisionReplay); 0: over the step's own decisions only.",
    )
    group_baseline: bool = Field(
        True,
        description="turn scheme: subtract the group's mean return-to-go at the same turn (then divide by the "
        "batch std); False: z-score the returns-to-go over the batch (the batch mean is the baseline).",
    )
