"""What the online RL trainers for language models (GRPO, PPO) share: the loop around a policy
playing agentgym text envs.

An :class:`OnlineTrainer` owns the policy (and, with ``beta > 0``, a frozen reference copy), a pool
of training envs, the random number generators, the reward sources and ``episodes.jsonl``; the loop
(``train_step`` → metrics row → every ``checkpoint_every`` steps and after the last a checkpoint and a
greedy evaluation on the frozen split → ``metrics.jsonl``/``.csv``, ``learning_curve.png``, ``final/``),
AdamW with warm-up and the process group are :class:`~agentgym.trainers.llm.trainer.LLMTrainer`'s, which
every LLM trainer shares. A subclass writes ``train_step``.

**Reward sources.** An episode's reward is the env's rule-based reward, a learned reward model's
score of the transcript, or a mix::

    r_turn = env_reward_coef · r_env,turn          (every turn)
    r_last += reward_model_coef · RM(transcript)   (the last turn; only with ``reward_model``)
    r_last −= truncation_penalty                    (an episode cut off before it ended)

so SFT → reward model → PPO, the classic RLHF pipeline, is ``reward_model=PATH, env_reward_coef=0``.
Every episode is logged to ``episodes.jsonl`` with both rewards and the env's verdict (``success``)
for ``agentgym audit RUN_DIR``, which lists high-reward episodes the rules reject.

**Reading order.** :meth:`LLMTrainer.learn <agentgym.trainers.llm.trainer.LLMTrainer.learn>` is the loop; a
subclass's ``train_step`` is one step (play,
reward, log the episodes, update). What a step needs around the math lives in small pieces:
:class:`~agentgym.trainers.llm.trainer.ProcessGroup` (ranks and their collectives),
:class:`~agentgym.trainers.run.run_dir.RunDir` (files) and :class:`~agentgym.trainers.run.run_dir.EpisodeLog`
(``episodes.jsonl``). The module trained is :attr:`scorer`.

**More than one process.** Started by ``torchrun`` or ``accelerate launch`` (``WORLD_SIZE > 1``),
the trainer uses ``accelerate``: the training pass is wrapped in DistributedDataParallel (gloo on
CPU, NCCL on GPUs), each rank plays its share of the step's tasks, gradients are averaged with the
loss normalised by the global token and sample counts (so N ranks compute the same update as one
process with the whole batch), metrics are averaged across ranks, and rank 0 alone writes files
and evaluates. Single-process runs resume exactly; a multi-process run resumes with fresh sampling
seeds on ranks other than 0.
"""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from pydantic import Field, field_validator
from torch import Tensor

from agentgym.core import task_info
from agentgym.core.registration import make_env
from agentgym.trainers.llm.config import AdamWConfig, CheckpointConfig, EvalConfig, ModelConfig
from agentgym.trainers.llm.rollout import Episode, Sample, collate
from agentgym.trainers.llm.trainer import LLMTrainer, ProcessGroup
from agentgym.trainers.models.policy import DTYPES, LLMPolicy, TokenScores, has_adapters, prepare_policy, score_tokens
from agentgym.trainers.run.metrics import MetricsWriter
from agentgym.trainers.run.run_dir import EpisodeLog

__all__ = ["OnlineConfig", "OnlineTrainer", "ProcessGroup", "TokenScorer"]


class OnlineConfig(CheckpointConfig, AdamWConfig, ModelConfig, EvalConfig):
    """The settings every online LLM trainer has (GRPO and PPO add their own); the env, evaluation, model
    (dtype, device, gradient checkpointing, LoRA), optimizer and checkpoint fields come from
    :mod:`agentgym.trainers.llm.config`."""

    steps: int = Field(200, ge=1, description="Training steps (one rollout batch each).")
    adam_betas: tuple[float, float] = (0.9, 0.99)
    beta: float = Field(0.04, ge=0, description="KL coefficient to the frozen reference (0: no reference loaded).")
    micro_batch_size: int = Field(64, ge=1, description="Samples per forward/backward (gradients accumulate).")
    reward_model: str | None = Field(
        None, description="Directory of a trained reward model (trainers.reward_model) scoring each transcript."
    )
    reward_model_coef: float = Field(1.0, description="Weight of the reward model's score (added at the last turn).")
    env_reward_coef: float = Field(1.0, description="Weight of the env's rule-based reward (0: reward model only).")
    truncation_penalty: float = Field(
        0.0,
        ge=0,
        description="Subtracted from an episode cut off by max_turns/max_tokens/the time limit (TRL's "
        "missing_eos_penalty): a reward model never shown such episodes may score them high.",
    )
    log_episodes: bool = Field(True, description="Write every training episode to episodes.jsonl (for audits).")
    checkpoint_every: int = Field(50, ge=0, description="Save + evaluate every N steps (0: only at the end).")
    seed: int = 0

    @field_validator("reward_model")
    @classmethod
    def _reward_model_exists(cls, path: str | None) -> str | None:
        if path is not None and not Path(path).is_dir():
            raise ValueError(f"reward model directory {path!r} does not exist (train one with trainers.reward_model)")
        return path


class TokenScorer(torch.nn.Module):
    """The training pass as one module (policy + optional value head), so DDP can wrap it.

    ``forward`` is :func:`agentgym.trainers.models.policy.score_tokens` on a collated batch.
    """

    def __init__(self, model: torch.nn.Module, value_head: torch.nn.Module | None = None) -> None:
        super().__init__()
        self.model = model
        self.value_head = value_head

    def forward(
        self, batch: dict[str, Tensor], temperature: float = 1.0, with_entropy: bool = False, entropy_grad: bool = False
    ) -> TokenScores:
        return score_tokens(
            self.model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["loss_mask"],
            temperature=temperature,
            with_entropy=with_entropy,
            entropy_grad=entropy_grad,
            value_head=self.value_head,
        )


class OnlineTrainer(LLMTrainer):
    """The rollout envs, reward sources, reference model and step budget of an online LLM trainer; the run
    directory, optimizer, checkpoints, evaluation, process group and loop are :class:`LLMTrainer`'s.

    Subclasses set ``algorithm``, ``label``, ``config_class`` and ``curve_keys`` and implement :meth:`train_step`.
    ``policy`` is an :class:`LLMPolicy` or a path/hub id; ``reference`` (used when ``beta > 0``)
    defaults to a frozen copy of the starting policy.
    """

    algorithm = "online"
    config_class: type[OnlineConfig] = OnlineConfig
    curve_keys: tuple[str, ...] = ("reward", "success", "eval_success")
    curve_phases = True
    checkpoint_at_end = True
    evaluate_at_checkpoint = True
    config: Any

    def __init__(
        self,
        policy: LLMPolicy | str | Path,
        config: OnlineConfig | None = None,
        *,
        out_dir: str | Path | None = None,
        reference: LLMPolicy | str | Path | None = None,
        **overrides: Any,
    ) -> None:
        super().__init__(config, out_dir=out_dir, **overrides)
        cfg = self.config
        probe = make_env(cfg.env_id, cfg.train_split, cfg.env_kwargs)  # a bad env id fails before a model loads
        self.num_tasks = task_info(probe).num_tasks
        dtype = DTYPES[cfg.dtype] if cfg.dtype else None
        self.policy = policy if isinstance(policy, LLMPolicy) else LLMPolicy.from_pretrained(policy, dtype=dtype)
        torch.manual_seed(cfg.seed)  # new LoRA adapters are initialised from the run's seed
        self.policy = prepare_policy(self.policy, **{k: getattr(cfg, k) for k in ModelConfig.model_fields})
        self.group.place(self.policy.model)
        self.episode_log = EpisodeLog(self.run.path / "episodes.jsonl") if self.run is not None else None
        self.reference_path = str(reference) if isinstance(reference, str | Path) else self.policy.model.name_or_path
        # with LoRA, a reference that is the frozen base (none given, or the base's own path when a run resumes) is
        # the policy with its adapters disabled: no second copy of the model
        self._reference_is_base = (
            cfg.beta > 0
            and has_adapters(self.policy.model)
            and (reference is None or str(reference) == str(self.policy.model.name_or_path))
        )
        self.reference = self._reference_model(reference) if cfg.beta > 0 else None
        self.reward_model = self._reward_model() if cfg.reward_model else None
        self.envs = [probe] + [
            make_env(cfg.env_id, cfg.train_split, cfg.env_kwargs) for _ in range(self.envs_needed() - 1)
        ]
        torch.manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)  # the same on every rank: all ranks draw the same tasks
        self.generator = torch.Generator().manual_seed(cfg.seed + self.rank)  # sampling differs per rank
        self.scorer = TokenScorer(self.policy.model, self.value_head())  # the trained module
        self.make_optimizer([p for p in self.scorer.parameters() if p.requires_grad])  # LoRA: adapters (+ value head)
        self.wrapped = self.group.wrap(self.scorer)  # what the training pass calls: DDP over ``scorer``, or it

    def _reference_model(self, reference: LLMPolicy | str | Path | None) -> torch.nn.Module:
        if self._reference_is_base:
            return self.policy.model  # scored with its adapters disabled (reference_logp), never trained through
        if isinstance(reference, LLMPolicy):
            model = reference.model
        elif isinstance(reference, str | Path):
            dtype = DTYPES[self.config.dtype] if self.config.dtype else None
            model = LLMPolicy.from_pretrained(reference, dtype=dtype).model.to(self.policy.device)
        else:
            model = copy.deepcopy(self.policy.model)
        return model.eval().requires_grad_(False)

    def _reward_model(self) -> Any:
        from agentgym.trainers.llm.reward_model import RewardModel

        reward_model = RewardModel.from_pretrained(self.config.reward_model)
        reward_model.model.to(self.policy.device)
        return reward_model

    # ------------------------------------------------------------------ for subclasses

    def envs_needed(self) -> int:
        """How many training envs this rank steps at once."""
        raise NotImplementedError

    def value_head(self) -> torch.nn.Module | None:
        """A value head trained with the policy (PPO), or None."""
        return None

    def train_step(self) -> dict[str, Any]:
        """Play one batch, update the policy, return the step's metrics."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the loop's hooks

    def train_steps(self, steps: int | None) -> Iterator[dict[str, Any]]:
        """:meth:`train_step` until ``steps`` (default ``config.steps``) steps are done in total."""
        total = steps if steps is not None else self.config.steps
        self.set_total(total)
        while self.step < total:
            yield self.train_step()

    def postfix(self, row: dict[str, Any]) -> dict[str, str]:
        return {"reward": f"{row['reward']:.2f}", "success": f"{row['success']:.2f}", "kl": f"{row['kl']:.3f}"}

    def curve_title(self) -> str:
        return f"{self.label} on {self.config.env_id}"

    def run_info(self) -> dict[str, Any]:
        return {
            "config": self.config.model_dump(mode="json"),
            "reference": self.reference_path,
            "world_size": self.world_size,
        }

    def start_run(self) -> MetricsWriter:
        """Write ``config.json``, open the metrics (keeping a resumed run's rows) and trim the episode log."""
        writer = super().start_run()
        assert self.episode_log is not None
        self.episode_log.trim(self.step)
        return writer

    def on_step_end(self) -> None:
        """Append the step's logged episodes of every rank to ``episodes.jsonl`` (rank 0 writes; a collective)."""
        if self.episode_log is None or not self.config.log_episodes:
            return
        records = self.group.gather(self.episode_log.take())
        if self.is_main:
            self.episode_log.append(records)

    def checkpoint_extra(self) -> dict[str, Any]:
        return {"reference": self.reference_path}

    @classmethod
    def _resume_kwargs(cls, info: dict[str, Any], config: Any) -> dict[str, Any]:
        return {"reference": info.get("reference") if config.beta > 0 else None}

    def _resumed(self, state: dict[str, Any], info: dict[str, Any]) -> None:
        if self.rank:
            self.generator.manual_seed(self.config.seed + self.rank + state["step"])
        self.reference_path = info.get("reference")

    # ------------------------------------------------------------------ rewards (see the module docstring)

    def reward_model_scores(self, episodes: list[Episode]) -> list[float] | None:
        """The reward model's score of each episode's transcript (None without a reward model)."""
        return self.reward_model.score_episodes(episodes) if self.reward_model is not None else None

    def turn_rewards(self, episodes: list[Episode], scores: list[float] | None = None) -> list[list[float]]:
        """Each episode's per-turn training rewards from the configured reward sources (see module doc).

        ``scores`` are :meth:`reward_model_scores` of ``episodes`` (computed here when not given)."""
        cfg = self.config
        if scores is None:
            scores = self.reward_model_scores(episodes)
        rewards = [[cfg.env_reward_coef * r for r in ep.rewards] for ep in episodes]
        for i, ep in enumerate(episodes):
            if scores is not None and rewards[i]:
                rewards[i][-1] += cfg.reward_model_coef * scores[i]
            if ep.truncated and rewards[i]:
                rewards[i][-1] -= cfg.truncation_penalty
        return rewards

    def log_episodes(
        self, episodes: list[Episode], rewards: list[list[float]], scores: list[float] | None = None
    ) -> None:
        """Queue this step's episodes for ``episodes.jsonl`` (written after the step; with ``log_episodes`` and a run
        directory)."""
        if self.episode_log is not None and self.config.log_episodes:
            self.episode_log.record(self.step + 1, episodes, rewards, scores)

    # ------------------------------------------------------------------ helpers for train_step

    def reference_logp(self, batch: dict[str, Tensor]) -> Tensor:
        base = self.policy.model.disable_adapter() if self._reference_is_base else contextlib.nullcontext()
        with torch.no_grad(), base:
            return score_tokens(
                self.reference,
                batch["input_ids"],
                batch["attention_mask"],
                batch["loss_mask"],
                temperature=self.config.rollout.temperature,
            ).logp

    def batch(self, samples: list[Sample]) -> dict[str, Tensor]:
        return {k: v.to(self.policy.device) for k, v in collate(samples, self.policy.pad_id).items()}

    def train_pass(
        self, batch: dict[str, Tensor], *, with_entropy: bool = False, entropy_grad: bool = False
    ) -> TokenScores:
        """:attr:`scorer` on ``batch`` with gradients, at the rollout temperature (through DDP with several ranks)."""
        temperature = self.config.rollout.temperature
        return self.wrapped(batch, temperature, with_entropy=with_entropy, entropy_grad=entropy_grad)
