"""The config pieces the LLM trainers share, each defined once and composed by inheritance.

A trainer's config subclasses the pieces it needs, so its fields stay flat (``config.json``,
``--set key=value``): :class:`EnvConfig` (the env the trainer plays), :class:`EvalConfig` (plus the
frozen split it is evaluated on), :class:`OptimizerConfig` / :class:`AdamWConfig` (AdamW with warm-up
and clipping), :class:`ModelConfig` (precision, device, gradient checkpointing, LoRA) and
:class:`CheckpointConfig`. Where a trainer's default differs from a piece's, the
trainer's class declares the field again with its own default.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentgym.trainers.llm.rollout import RolloutConfig

__all__ = ["AdamWConfig", "CheckpointConfig", "EnvConfig", "EvalConfig", "ModelConfig", "OptimizerConfig"]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EnvConfig(_Config):
    """The env a trainer plays, and how it plays it."""

    env_id: str = Field("agentgym/WeatherRun-v0", description="A registered agentgym text env.")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="Passed to gym.make for training envs.")
    train_split: str | None = Field("train", description="Split for training episodes (envs that have splits).")
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="How episodes are played.")


class EvalConfig(EnvConfig):
    """:class:`EnvConfig` plus the frozen split a trainer is evaluated on (greedily)."""

    eval_split: str | None = Field("test", description="Frozen split evaluated greedily; None: skip evaluation.")
    eval_env_kwargs: dict[str, Any] | None = Field(
        None,
        description="gym.make kwargs for evaluation (None: env_kwargs), e.g. {} to train on a random backend "
        "but evaluate on the frozen snapshot.",
    )
    eval_episodes: int | None = Field(None, ge=1, description="Evaluation episodes (None: every test task once).")
    eval_probe: bool = Field(
        False,
        description="At each evaluation also fit a linear probe per layer for the env's decision "
        "(agentgym.trainers.llm.probe): eval_probe_best, eval_probe_policy (the policy's greedy decision accuracy on "
        "the same held-out contexts) and eval_probe_gap, so a curve shows whether training closes the gap.",
    )


class OptimizerConfig(_Config):
    """AdamW with a linear learning-rate warm-up, a constant or cosine schedule, and gradient clipping
    (:mod:`agentgym.trainers.llm.optim`)."""

    learning_rate: float = Field(1e-6, gt=0, description="AdamW learning rate (1e-6–5e-6 for real models).")
    warmup_steps: int = Field(0, ge=0, description="Linear learning-rate warm-up.")
    lr_schedule: Literal["constant", "cosine"] = Field(
        "constant",
        description="After the warm-up: constant, or a half cosine down to 0 at the run's last step (steadies a "
        "decision once it is learnt; benchmarks/readout.py).",
    )
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping by global norm.")


class AdamWConfig(OptimizerConfig):
    """:class:`OptimizerConfig` with decoupled weight decay."""

    weight_decay: float = Field(0.0, ge=0, description="AdamW's decoupled weight decay.")


class CheckpointConfig(_Config):
    """How often a run saves a resumable checkpoint."""

    checkpoint_every: int = Field(50, ge=0, description="Save a checkpoint every N steps (0: only at the end).")


class ModelConfig(_Config):
    """How the trained model is held: precision, device, activation memory and LoRA adapters
    (:func:`agentgym.trainers.models.policy.prepare_policy`). The defaults train every weight in float32 on CUDA when
    present, else the CPU; a real 0.5–8 B model on one GPU wants ``dtype="bfloat16"``,
    ``gradient_checkpointing=True`` and ``lora_r`` 8–64."""

    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None,
        description="Weights' dtype (None: as loaded, float32 from a path). With LoRA only the frozen base is cast; "
        "the adapters stay float32. Prefer bfloat16 on GPUs that have it (float16 has no loss scaling here).",
    )
    device: str = Field("auto", description="auto: CUDA when present, else cpu; or any torch device, e.g. cuda:1.")
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations in the backward pass: less memory for long transcripts, ~30 % slower."
    )
    lora_r: int = Field(0, ge=0, description="LoRA rank (peft); 0: train every weight.")
    lora_alpha: float = Field(16.0, gt=0, description="LoRA scaling alpha (the update is scaled by alpha / r).")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the LoRA path.")
    lora_target_modules: list[str] | Literal["all-linear"] = Field(
        "all-linear", description="Modules given adapters: all-linear (every linear layer but the output) or names."
    )
