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

The loop, checkpoints (``GRPO.resume`` continues a stopped run exactly), greedy evaluation on the
frozen split, reward-model rewards and multi-process training come from
:class:`agentgym.trainers.online.OnlineTrainer`.

Defaults for small models (what the tiny-model benchmark found; see ``benchmarks/grpo_weatherrun.py``):
the KL anchor matters more than anything after tokenisation. With ``beta=0`` the tiny model locked
into a partial rule as groups collapsed to zero reward variance; ``beta≈0.3`` to the SFT model kept
it exploring. Real 1–8 B models want ``learning_rate`` 1e-6–5e-6 and ``beta`` 0.01–0.1 (the
defaults); the ~1 M-parameter tiny model wants ~3e-4 with a warm-up.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Literal

import torch
from pydantic import Field

from agentgym.trainers.advantages import clipped_surrogate, group_relative_advantages, kl_k3
from agentgym.trainers.online import OnlineConfig, OnlineTrainer
from agentgym.trainers.rollout import Episode, Sample, episode_metrics, random_resets, rollout

__all__ = ["GRPO", "GRPOConfig"]


class GRPOConfig(OnlineConfig):
    """Every GRPO knob, with defaults that suit 1–8 B models (see the module docstring for tiny ones).

    The shared fields (env, rollout, optimizer, ``beta``, reward sources, checkpoints) are documented
    on :class:`~agentgym.trainers.online.OnlineConfig`.
    """

    num_generations: int = Field(8, ge=2, description="G: episodes per task instance (group size).")
    tasks_per_step: int = Field(8, ge=1, description="B: task instances per step; a step plays B × G episodes.")
    epsilon_low: float = Field(0.2, gt=0, description="Clip range below 1 for the probability ratio.")
    epsilon_high: float = Field(0.2, gt=0, description="Clip range above 1 (DAPO's clip-higher: 0.28).")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="Divide advantages by the group's reward std, the batch's, or not at all."
    )
    loss_type: Literal["grpo", "dr_grpo", "dapo"] = Field("dapo", description="How token losses are averaged.")
    num_iterations: int = Field(1, ge=1, description="Gradient steps per rollout batch (μ in the paper).")
    skip_zero_std: bool = Field(False, description="Drop groups whose rewards all tie from the loss (and the KL).")


@dataclass
class UniqueSample:
    """A sample the update computes once for all its identical copies (same tokens, advantages of one sign)."""

    sample: Sample
    advantage_sum: float = 0.0
    count: int = 0

    @property
    def advantage(self) -> float:
        """The copies' mean advantage (0 for the placeholder a rank with nothing to learn sends)."""
        return self.advantage_sum / max(self.count, 1)


class GRPO(OnlineTrainer):
    """Group Relative Policy Optimization on any agentgym text env.

    ``GRPO(policy, config, out_dir=...).learn()`` trains, writing ``metrics.jsonl``/``.csv``,
    TensorBoard events (when installed), ``episodes.jsonl``, ``learning_curve.png``,
    ``checkpoints/step-N/`` and ``final/`` under ``out_dir``. ``policy`` is an :class:`LLMPolicy`
    or a path/hub id.
    """

    algorithm = "grpo"
    config_class = GRPOConfig
    curve_keys = ("reward", "success", "format_compliance", "kl", "eval_success")
    config: GRPOConfig

    def envs_needed(self) -> int:
        cfg = self.config
        return -(-cfg.tasks_per_step // self.world_size) * cfg.num_generations

    def train_step(self) -> dict[str, Any]:
        """Play one batch of groups and update the policy on it; returns the step's metrics."""
        cfg = self.config
        t0 = time.perf_counter()
        tasks = self.group.shard(random_resets(self.rng, cfg.tasks_per_step, self.num_tasks))
        resets = [reset for reset in tasks for _ in range(cfg.num_generations)]  # a group: same task, same seed
        episodes = rollout(self.policy, self.envs[: len(resets)], resets, cfg.rollout, generator=self.generator)
        t_rollout = time.perf_counter() - t0
        t_env = sum(ep.env_seconds for ep in episodes)
        scores = self.reward_model_scores(episodes)
        turn_rewards = self.turn_rewards(episodes, scores)
        self.log_episodes(episodes, turn_rewards, scores)
        rewards = torch.tensor([sum(r) for r in turn_rewards])
        groups = group_relative_advantages(rewards, cfg.num_generations, scale=cfg.scale_rewards == "group")
        advantages = groups.advantages
        if cfg.scale_rewards == "batch":
            advantages = advantages / (rewards.std() + 1e-4)
        stats = self._update(episodes, advantages, groups.tied)
        self.step += 1
        generated = sum(ep.response_tokens for ep in episodes)
        return self.group.mean(
            {
                "step": self.step,
                **episode_metrics(episodes),
                "frac_zero_std": groups.num_tied_groups / max(1, groups.num_groups),
                **stats,
                "lr": self.optimizer.param_groups[0]["lr"],
                "tokens_per_second": generated / max(t_rollout, 1e-9),
                "time_rollout": t_rollout,  # generation + env
                "time_generate": t_rollout - t_env,
                "time_env": t_env,
                "time_update": time.perf_counter() - t0 - t_rollout,
                "time_step": time.perf_counter() - t0,
            }
        )

    def _update(self, episodes: list[Episode], advantages: torch.Tensor, tied: torch.Tensor) -> dict[str, float]:
        cfg = self.config
        # Identical samples (same tokens; advantages of the same sign) are computed once with a weight:
        # exact, since their ratios are equal and the clipped surrogate is linear in A for a fixed sign.
        # After SFT most turns of a group are identical, so this removes most of the update's work.
        merged: dict[tuple, UniqueSample] = {}
        for ep, a, t in zip(episodes, advantages.tolist(), tied.tolist(), strict=True):
            if cfg.skip_zero_std and t:
                continue
            for s in ep.samples:
                if any(s.loss_mask):
                    entry = merged.setdefault((a > 0, tuple(s.input_ids), tuple(s.loss_mask)), UniqueSample(s))
                    entry.advantage_sum += a
                    entry.count += 1
        unique = list(merged.values())
        local = [sum(u.count for u in unique), sum(u.count * sum(u.sample.loss_mask) for u in unique)]
        n_samples, n_tokens = self.group.sum(*local)  # the loss is normalised over all ranks' batch
        if not n_tokens:
            return {"loss": 0.0, "kl": 0.0, "clipfrac": 0.0, "entropy": 0.0, "grad_norm": 0.0, "unique_samples": 1.0}
        if not unique:  # this rank has nothing to learn from, but must still join the gradient all-reduce
            unique = [UniqueSample(next(s for ep in episodes for s in ep.samples if any(s.loss_mask)))]
        batches = []
        for start in range(0, len(unique), cfg.micro_batch_size):
            chunk = unique[start : start + cfg.micro_batch_size]
            batch = self.batch([u.sample for u in chunk])
            device = batch["input_ids"].device
            batch["advantages"] = torch.tensor([u.advantage for u in chunk], device=device)[:, None]
            batch["weights"] = torch.tensor([float(u.count) for u in chunk], device=device)[:, None]
            with torch.no_grad():
                if cfg.num_iterations > 1:
                    batch["old_logp"] = self.scorer(batch, cfg.rollout.temperature).logp
                if self.reference is not None:
                    batch["ref_logp"] = self.reference_logp(batch)
            batches.append(batch)
        scale = self.world_size  # DDP averages gradients over ranks; the losses below are already global means
        sums = {"loss": 0.0, "kl": 0.0, "clipped": 0.0, "entropy": 0.0}
        self.scorer.train()
        for iteration in range(cfg.num_iterations):
            self.optimizer.zero_grad(set_to_none=True)
            for i, batch in enumerate(batches):
                with self.gradient_sync(i == len(batches) - 1):
                    scores = self.train_pass(batch, with_entropy=iteration == 0)
                    logp, ent = scores.logp, scores.entropy
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
                    (loss * scale).backward()
                sums["loss"] += loss.item()
                with torch.no_grad():
                    clipped = ((ratio < 1 - cfg.epsilon_low) & (adv < 0)) | ((ratio > 1 + cfg.epsilon_high) & (adv > 0))
                    sums["clipped"] += float((clipped * weighted).sum())
                    if ent is not None:
                        sums["entropy"] += float((ent * weighted).sum())
            grad_norm = self.optimizer_step()
        self.scheduler.step()
        loss, kl, clipped, ent = self.group.sum(sums["loss"], sums["kl"], sums["clipped"], sums["entropy"])
        return {
            "loss": loss / cfg.num_iterations / self.world_size,
            "kl": kl / n_tokens,
            "clipfrac": clipped / (n_tokens * cfg.num_iterations),
            "entropy": ent / n_tokens,
            "grad_norm": grad_norm if math.isfinite(grad_norm) else float("nan"),
            "unique_samples": len(merged) / max(1, local[0]),
        }
