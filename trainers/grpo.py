"""GRPO (Shao et al. 2024) for a language model that plays agentgym text envs through ``reset/step``.

Each step:

1. draw ``tasks_per_step`` task instances and play each ``num_generations`` times with the same env
   seed (a *group*), sampling from the current policy (:func:`agentgym.trainers.rollout.rollout`);
2. score each episode by its total env reward (per-turn rewards add up) and turn rewards into
   group-relative advantages ``A_i = (r_i − mean_g r) / std_g r`` (``scale_rewards``); groups whose
   rewards all tie carry no signal and are counted in ``frac_zero_std``;
3. take ``num_iterations`` gradient steps on the clipped surrogate over the policy's tokens only
   (env tokens are masked out), plus ``beta`` · KL(π ‖ π_ref) with the k3 estimator::

       loss_t = −min(ρ_t A, clip(ρ_t, 1 − ε_low, 1 + ε_high) A) + β · (e^{q_t − p_t} − (q_t − p_t) − 1)

   normalised per ``loss_type``: ``"grpo"`` (mean per sequence, then over sequences),
   ``"dapo"`` (mean over all tokens of the batch) or ``"dr_grpo"`` (sum / (sequences × max_new_tokens)).

Every ``checkpoint_every`` steps the policy and the trainer state are saved and the policy is
evaluated greedily on the frozen test split; :meth:`GRPO.resume` continues a stopped run exactly.

Defaults for small models (what the tiny-model benchmark found; see ``benchmarks/grpo_weatherrun.py``):
the KL anchor matters more than anything after tokenisation. With ``beta=0`` the tiny model locked
into a partial rule as groups collapsed to zero reward variance; ``beta≈0.3`` to the SFT model kept
it exploring. Real 1–8 B models want ``learning_rate`` 1e-6–5e-6 and ``beta`` 0.01–0.1 (the
defaults); the ~1 M-parameter tiny model wants ~3e-4 with a warm-up.
"""

from __future__ import annotations

import copy
import json
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

import agentgym
from agentgym.llm import LLMPolicy, token_logprobs
from agentgym.metrics import MetricsWriter
from agentgym.plotting import plot_learning_curves
from agentgym.registration import make_env, split_kwargs
from agentgym.trainers.advantages import clipped_surrogate, group_relative_advantages, kl_k3
from agentgym.trainers.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint
from agentgym.trainers.optim import adamw_with_warmup
from agentgym.trainers.rollout import (
    Episode,
    RolloutConfig,
    collate,
    episode_metrics,
    evaluate_llm,
    random_resets,
    rollout,
)

__all__ = ["GRPO", "GRPOConfig"]

CURVE_KEYS = ("reward", "success", "format_compliance", "kl", "eval_success")


class GRPOConfig(BaseModel):
    """Every GRPO knob, with defaults that suit 1–8 B models (see the module docstring for tiny ones)."""

    model_config = ConfigDict(extra="forbid")

    env_id: str = Field("agentgym/WeatherRun-v0", description="A registered agentgym text env.")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="Passed to gym.make for training envs.")
    train_split: str | None = Field("train", description="Split for training episodes (envs that have splits).")
    eval_split: str | None = Field("test", description="Frozen split evaluated at every checkpoint.")
    eval_env_kwargs: dict[str, Any] | None = Field(
        None,
        description="gym.make kwargs for evaluation (None: env_kwargs), e.g. {} to train on a random backend "
        "but evaluate on the frozen snapshot.",
    )
    rollout: RolloutConfig = Field(default_factory=RolloutConfig, description="How episodes are played.")
    num_generations: int = Field(8, ge=2, description="G: episodes per task instance (group size).")
    tasks_per_step: int = Field(8, ge=1, description="B: task instances per step; a step plays B × G episodes.")
    steps: int = Field(200, ge=1, description="Training steps (one rollout batch each).")
    learning_rate: float = Field(1e-6, gt=0, description="Adam learning rate (1e-6–5e-6 for real models).")
    warmup_steps: int = Field(0, ge=0, description="Linear learning-rate warm-up.")
    weight_decay: float = Field(0.0, ge=0)
    adam_betas: tuple[float, float] = (0.9, 0.99)
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping by global norm.")
    beta: float = Field(0.04, ge=0, description="KL coefficient to the frozen reference (0: no reference loaded).")
    epsilon_low: float = Field(0.2, gt=0, description="Clip range below 1 for the probability ratio.")
    epsilon_high: float = Field(0.2, gt=0, description="Clip range above 1 (DAPO's clip-higher: 0.28).")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="Divide advantages by the group's reward std, the batch's, or not at all."
    )
    loss_type: Literal["grpo", "dr_grpo", "dapo"] = Field("dapo", description="How token losses are averaged.")
    num_iterations: int = Field(1, ge=1, description="Gradient steps per rollout batch (μ in the paper).")
    skip_zero_std: bool = Field(False, description="Drop groups whose rewards all tie from the loss (and the KL).")
    micro_batch_size: int = Field(64, ge=1, description="Samples per forward/backward (gradients accumulate).")
    checkpoint_every: int = Field(50, ge=0, description="Save + evaluate every N steps (0: only at the end).")
    eval_episodes: int | None = Field(None, ge=1, description="Evaluation episodes (None: every test task once).")
    seed: int = 0


class GRPO:
    """Group Relative Policy Optimization on any agentgym text env.

    ``GRPO(policy, config, out_dir=...).learn()`` trains, writing ``metrics.jsonl``/``.csv``,
    TensorBoard events (when installed), ``learning_curve.png``, ``checkpoints/step-N/`` and
    ``final/`` under ``out_dir``. ``policy`` is an :class:`LLMPolicy` or a path/hub id.
    """

    def __init__(
        self,
        policy: LLMPolicy | str | Path,
        config: GRPOConfig | None = None,
        *,
        out_dir: str | Path | None = None,
        reference: LLMPolicy | str | Path | None = None,
        **overrides: Any,
    ) -> None:
        self.config = GRPOConfig.model_validate({**(config or GRPOConfig()).model_dump(), **overrides})
        cfg = self.config
        self.policy = policy if isinstance(policy, LLMPolicy) else LLMPolicy.from_pretrained(policy)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.reference_path = str(reference) if isinstance(reference, str | Path) else self.policy.model.name_or_path
        self.reference = None
        if cfg.beta > 0:
            if isinstance(reference, LLMPolicy):
                self.reference = reference.model
            elif isinstance(reference, str | Path):
                self.reference = LLMPolicy.from_pretrained(reference).model
            else:
                self.reference = copy.deepcopy(self.policy.model)
            self.reference.eval().requires_grad_(False)
        n_envs = cfg.tasks_per_step * cfg.num_generations
        self.envs = [make_env(cfg.env_id, cfg.train_split, cfg.env_kwargs) for _ in range(n_envs)]
        self.num_tasks = getattr(self.envs[0].unwrapped, "num_tasks", None)
        torch.manual_seed(cfg.seed)
        self.rng = random.Random(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.optimizer, self.scheduler = adamw_with_warmup(
            self.policy.model.parameters(),
            cfg.learning_rate,
            cfg.warmup_steps,
            betas=cfg.adam_betas,
            weight_decay=cfg.weight_decay,
        )
        self.step = 0

    # ------------------------------------------------------------------ public API

    def learn(
        self,
        steps: int | None = None,
        *,
        callback: Callable[[GRPO, dict[str, Any]], bool | None] | None = None,
        progress_bar: bool = True,
    ) -> list[dict[str, Any]]:
        """Train until ``steps`` (default ``config.steps``) steps are done in total; return the metric rows.

        ``callback(trainer, row)`` runs after every step; returning ``False`` stops training.
        """
        from tqdm.auto import tqdm

        total = steps if steps is not None else self.config.steps
        writer = None
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            (self.out_dir / "config.json").write_text(json.dumps(self._run_info(), indent=2) + "\n")
            writer = MetricsWriter(self.out_dir, step_key="step", resume_after=self.step if self.step else None)
        rows = list(writer.rows) if writer else []
        bar = tqdm(total=total, initial=self.step, desc="GRPO", disable=not progress_bar, unit="step")
        try:
            while self.step < total:
                row = self.train_step()
                every = self.config.checkpoint_every
                if self.out_dir is not None and ((every and self.step % every == 0) or self.step == total):
                    row.update(self.checkpoint())
                rows.append(row)
                if writer:
                    writer.write(row)
                bar.update(1)
                bar.set_postfix(reward=f"{row['reward']:.2f}", success=f"{row['success']:.2f}", kl=f"{row['kl']:.3f}")
                if callback is not None and callback(self, row) is False:
                    break
        finally:
            bar.close()
            if writer:
                writer.close()
        if self.out_dir is not None:
            self.policy.save_pretrained(self.out_dir / "final")
            plot_learning_curves(
                {"GRPO": rows},
                self.out_dir / "learning_curve.png",
                keys=CURVE_KEYS,
                x="step",
                window=10,
                title=f"GRPO on {self.config.env_id}",
                floor=None,
            )
        return rows

    def evaluate(self, *, split: str | None = None, episodes: int | None = None) -> dict[str, float]:
        """Greedy evaluation on the frozen ``eval_split`` (every task once unless ``episodes``)."""
        cfg = self.config
        split = split if split is not None else cfg.eval_split
        eval_kwargs = cfg.env_kwargs if cfg.eval_env_kwargs is None else cfg.eval_env_kwargs
        env_kwargs = split_kwargs(cfg.env_id, split, eval_kwargs)
        return evaluate_llm(
            self.policy, cfg.env_id, cfg.rollout, env_kwargs=env_kwargs, episodes=episodes or cfg.eval_episodes
        )

    def checkpoint(self) -> dict[str, float]:
        """Save ``checkpoints/step-N`` and evaluate it; returns the evaluation as ``eval_*`` metrics."""
        assert self.out_dir is not None
        save_checkpoint(
            self.out_dir / "checkpoints" / f"step-{self.step:06d}",
            self.policy,
            step=self.step,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            generator=self.generator,
            rng=self.rng,
            extra={"reference": self.reference_path},
        )
        return {f"eval_{k}": v for k, v in self.evaluate().items()}

    @classmethod
    def resume(cls, run_dir: str | Path, checkpoint: str | Path | None = None, **overrides: Any) -> GRPO:
        """Continue a run from its latest checkpoint (or ``checkpoint``): weights, optimizer, RNGs, step."""
        run_dir = Path(run_dir)
        ckpt = Path(checkpoint) if checkpoint else latest_checkpoint(run_dir)
        if ckpt is None:
            raise FileNotFoundError(f"no checkpoint under {run_dir}/checkpoints; nothing to resume")
        info = json.loads((run_dir / "config.json").read_text())
        config = GRPOConfig.model_validate({**info["config"], **overrides})
        trainer = cls(ckpt, config, out_dir=run_dir, reference=info.get("reference") if config.beta > 0 else None)
        state = load_trainer_state(
            ckpt, optimizer=trainer.optimizer, scheduler=trainer.scheduler, generator=trainer.generator, rng=trainer.rng
        )
        trainer.step = state["step"]
        trainer.reference_path = info.get("reference")
        return trainer

    # ------------------------------------------------------------------ one step

    def train_step(self) -> dict[str, Any]:
        """Play one batch of groups and update the policy on it; returns the step's metrics."""
        cfg = self.config
        t0 = time.perf_counter()
        tasks = random_resets(self.rng, cfg.tasks_per_step, self.num_tasks)
        resets = [reset for reset in tasks for _ in range(cfg.num_generations)]  # a group: same task, same seed
        episodes = rollout(self.policy, self.envs, resets, cfg.rollout, generator=self.generator)
        t_rollout = time.perf_counter() - t0
        rewards = torch.tensor([ep.total_reward for ep in episodes])
        groups = group_relative_advantages(rewards, cfg.num_generations, scale=cfg.scale_rewards == "group")
        advantages = groups.advantages
        if cfg.scale_rewards == "batch":
            advantages = advantages / (rewards.std() + 1e-4)
        stats = self._update(episodes, advantages, groups.tied)
        self.step += 1
        generated = sum(ep.response_tokens for ep in episodes)
        return {
            "step": self.step,
            **episode_metrics(episodes),
            "frac_zero_std": groups.num_tied_groups / max(1, groups.num_groups),
            **stats,
            "lr": self.optimizer.param_groups[0]["lr"],
            "tokens_per_second": generated / max(t_rollout, 1e-9),
            "time_rollout": t_rollout,
            "time_step": time.perf_counter() - t0,
        }

    def _update(self, episodes: list[Episode], advantages: torch.Tensor, tied: torch.Tensor) -> dict[str, float]:
        cfg, model, device = self.config, self.policy.model, self.policy.device
        # Identical samples (same tokens; advantages of the same sign) are computed once with a weight:
        # exact, since their ratios are equal and the clipped surrogate is linear in A for a fixed sign.
        # After SFT most turns of a group are identical, so this removes most of the update's work.
        merged: dict[tuple, list] = {}
        for ep, a, t in zip(episodes, advantages.tolist(), tied.tolist(), strict=True):
            if cfg.skip_zero_std and t:
                continue
            for s in ep.samples:
                if any(s.loss_mask):
                    entry = merged.setdefault((a > 0, tuple(s.input_ids), tuple(s.loss_mask)), [s, 0.0, 0])
                    entry[1] += a
                    entry[2] += 1
        if not merged:
            return {"loss": 0.0, "kl": 0.0, "clipfrac": 0.0, "entropy": 0.0, "grad_norm": 0.0}
        unique = list(merged.values())
        n_samples = sum(count for _, _, count in unique)
        n_tokens = sum(count * sum(s.loss_mask) for s, _, count in unique)
        batches = []
        for start in range(0, len(unique), cfg.micro_batch_size):
            chunk = unique[start : start + cfg.micro_batch_size]
            batch = {k: v.to(device) for k, v in collate([s for s, _, _ in chunk], self.policy.pad_id).items()}
            batch["advantages"] = torch.tensor([total / count for _, total, count in chunk], device=device)[:, None]
            batch["weights"] = torch.tensor([float(count) for _, _, count in chunk], device=device)[:, None]
            with torch.no_grad():
                if cfg.num_iterations > 1:
                    batch["old_logp"] = self._logp(model, batch)[0]
                if self.reference is not None:
                    batch["ref_logp"] = self._logp(self.reference, batch)[0]
            batches.append(batch)
        sums = {"loss": 0.0, "kl": 0.0, "clipped": 0.0, "entropy": 0.0}
        model.train()
        for iteration in range(cfg.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            for batch in batches:
                logp, ent = self._logp(model, batch, with_entropy=iteration == 0)
                mask = batch["loss_mask"].to(logp.dtype)
                weighted = mask * batch["weights"]  # each unique sample counts as many times as it occurred
                old = batch["old_logp"] if cfg.num_iterations > 1 else logp.detach()
                adv = batch["advantages"]
                surrogate, ratio = clipped_surrogate(logp, old, adv, cfg.epsilon_low, cfg.epsilon_high)
                per_token = -surrogate
                if self.reference is not None:
                    kl = kl_k3(logp, batch["ref_logp"])
                    per_token = per_token + cfg.beta * kl
                    sums["kl"] += float((kl.detach() * weighted).sum()) if iteration == 0 else 0.0
                if cfg.loss_type == "grpo":
                    loss = ((per_token * weighted).sum(1) / mask.sum(1).clamp(min=1)).sum() / n_samples
                elif cfg.loss_type == "dapo":
                    loss = (per_token * weighted).sum() / n_tokens
                else:
                    loss = (per_token * weighted).sum() / (n_samples * cfg.rollout.max_new_tokens)
                loss.backward()
                sums["loss"] += loss.item()
                with torch.no_grad():
                    clipped = ((ratio < 1 - cfg.epsilon_low) & (adv < 0)) | ((ratio > 1 + cfg.epsilon_high) & (adv > 0))
                    sums["clipped"] += float((clipped * weighted).sum())
                    if ent is not None:
                        sums["entropy"] += float((ent * weighted).sum())
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
        self.scheduler.step()
        return {
            "loss": sums["loss"] / cfg.num_iterations,
            "kl": sums["kl"] / n_tokens,
            "clipfrac": sums["clipped"] / (n_tokens * cfg.num_iterations),
            "entropy": sums["entropy"] / n_tokens,
            "grad_norm": float(grad_norm) if math.isfinite(float(grad_norm)) else float("nan"),
            "unique_samples": len(unique) / n_samples,
        }

    def _logp(self, model: Any, batch: dict[str, torch.Tensor], with_entropy: bool = False):
        return token_logprobs(
            model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["loss_mask"],
            temperature=self.config.rollout.temperature,
            with_entropy=with_entropy,
        )

    def _run_info(self) -> dict[str, Any]:
        return {
            "algorithm": "grpo",
            "config": self.config.model_dump(mode="json"),
            "reference": self.reference_path,
            "package_version": agentgym.__version__,
        }
