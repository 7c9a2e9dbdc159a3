"""GRPO (Shao et al. 2024) for a language model that plays agentgym text envs through ``reset/step``.

Each step:

1. draw ``tasks_per_step`` task instances and play each ``num_generations`` times with the same env
   seed (a *group*), sampling from the current policy (:func:`agentgym.trainers.llm.rollout.rollout`);
2. turn the per-turn rewards into advantages, by one of two schemes (``credit_assignment``):

   - ``"trajectory"`` (GRPO, the default): score each episode by its return ``R = Σ_t γ^t r_t`` (``gamma``
     = 1: the per-turn rewards add up) and give every turn of it the group-relative advantage
     ``A_i = (R_i − mean_g R) / std_g R`` (``scale_rewards``);
   - ``"turn"`` (return-batch-normalised REINFORCE, REINFORCE++ of Hu et al. 2025): each turn gets its
     own return-to-go ``G_t = r_t + γ G_{t+1}``, minus the group's mean return-to-go at the same turn
     (``group_baseline``; GAE over turns with it as the value when ``lam`` < 1,
     :func:`~agentgym.trainers.advantages.turn_advantages`), divided by the std over all turns of the
     batch; without the baseline the returns-to-go are z-scored over the batch. A turn's advantage
     applies to the tokens of that turn only, in both context modes. Per-turn normalisation is biased
     where episodes differ in length (a long episode's turns weigh more); ``benchmarks/credit_assignment.py``
     measures the two schemes side by side.

   Groups whose returns all tie carry no signal under GRPO and are counted in ``frac_zero_std``;
3. take ``num_iterations`` gradient steps on the clipped surrogate over the policy's tokens only
   (env tokens are masked out), plus ``beta`` · KL(π ‖ π_ref) with the k3 estimator::

       loss_t = −min(ρ_t A, clip(ρ_t, 1 − ε_low, 1 + ε_high) A) + β · (e^{q_t − p_t} − (q_t − p_t) − 1)

   normalised per ``loss_type``: ``"grpo"`` (mean per sequence, then over sequences),
   ``"dapo"`` (mean over all tokens of the batch) or ``"dr_grpo"`` (sum / (sequences × max_new_tokens)).

The loop, checkpoints (``GRPO.resume`` continues a stopped run exactly), greedy evaluation on the
frozen split and multi-process training come from :class:`agentgym.trainers.llm.trainer.LLMTrainer`,
the envs and reward-model rewards from :class:`agentgym.trainers.llm.online_trainer.OnlineTrainer`.

Defaults for small models (what the tiny-model benchmark found; see ``benchmarks/grpo_weatherrun.py``):
the KL anchor matters more than anything after tokenisation. With ``beta=0`` the tiny model locked
into a partial rule as groups collapsed to zero reward variance; ``beta≈0.3`` to the SFT model kept
it exploring. Real 1–8 B models want ``learning_rate`` 1e-6–5e-6 and ``beta`` 0.01–0.1 (the
defaults); the ~1 M-parameter tiny model wants ~3e-4 with a warm-up.

A real model on one GPU (:class:`~agentgym.trainers.llm.config.ModelConfig`): ``dtype="bfloat16"``,
``gradient_checkpointing=True`` and LoRA adapters (``lora_r=16``; with ``beta > 0`` the reference is the
frozen base itself, adapters disabled, so no second copy is held); the device is CUDA when present. With
adapters, checkpoints and ``final/`` hold the adapters only, and ``LLMPolicy.from_pretrained`` of them
loads the base they name. LoRA wants a learning rate ~3–10× full fine-tuning's.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any

import torch

from agentgym.trainers.advantages import (
    GroupAdvantages,
    clipped_surrogate,
    group_relative_advantages,
    kl_k3,
    turn_advantages,
)
from agentgym.trainers.llm.grpo_config import GRPOConfig
from agentgym.trainers.llm.online_trainer import OnlineTrainer
from agentgym.trainers.llm.probe import DecisionReplay
from agentgym.trainers.llm.rollout import Episode, episode_metrics, random_resets, rollout, turn_spans
from agentgym.trainers.llm.unique_samples import UniqueSample, token_advantages, unique_samples

__all__ = ["GRPO", "GRPOConfig"]


class GRPO(OnlineTrainer):
    """Group Relative Policy Optimization on any agentgym text env.

    ``GRPO(policy, config, out_dir=...).learn()`` trains and returns the trainer (its metric rows are
    ``.metrics``), writing ``metrics.jsonl``/``.csv``, TensorBoard events (when installed), ``episodes.jsonl``,
    ``learning_curve.png``, ``checkpoints/step-N/`` and ``final/`` under ``out_dir``. ``policy`` is an
    :class:`LLMPolicy` or a path/hub id.
    """

    algorithm = "grpo"
    label = "GRPO"
    config_class = GRPOConfig
    curve_keys = ("tool_use", "success", "tool_call_validity", "reward", "kl", "frac_zero_std")
    config: GRPOConfig

    def envs_needed(self) -> int:
        return -(-self.config.tasks_per_step // self.world_size) * self.config.num_generations

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
        advantages, groups = self.advantages(turn_rewards)
        stats = self._update(episodes, advantages, groups.tied)
        self.end_step()
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

    def advantages(self, turn_rewards: list[list[float]]) -> tuple[list[list[float]], GroupAdvantages]:
        """Each episode's per-turn advantages under ``credit_assignment``, and the group statistics of the
        episodes' returns (``frac_zero_std``, ``skip_zero_std``). Episodes come in groups of ``num_generations``."""
        cfg = self.config
        if cfg.gamma == 1.0:
            returns = torch.tensor([sum(r) for r in turn_rewards])
        else:
            returns = torch.tensor([sum(cfg.gamma**t * x for t, x in enumerate(r)) for r in turn_rewards])
        groups = group_relative_advantages(returns, cfg.num_generations, scale=cfg.scale_rewards == "group")
        if cfg.credit_assignment == "trajectory":
            advantages = groups.advantages
            if cfg.scale_rewards == "batch":
                advantages = advantages / (returns.std() + 1e-4)
            return [[a] * len(r) for a, r in zip(advantages.tolist(), turn_rewards, strict=True)], groups
        group_ids = [i // cfg.num_generations for i in range(len(turn_rewards))] if cfg.group_baseline else None
        per_turn = turn_advantages([torch.tensor(r) for r in turn_rewards], group_ids, cfg.gamma, cfg.lam)
        flat = torch.cat(per_turn) if per_turn else torch.zeros(0)
        n, total, total_sq = self.group.sum(flat.numel(), float(flat.sum()), float((flat**2).sum()))  # the batch
        mean = 0.0 if cfg.group_baseline or not n else total / n
        std = math.sqrt(max(total_sq / n - mean**2, 0.0) * n / (n - 1)) if n > 1 else 0.0
        return [((a - mean) / (std + 1e-4)).tolist() for a in per_turn], groups

    @functools.cached_property
    def replay(self) -> DecisionReplay:
        """The hindsight-labelled decisions of ``decision_coef`` (and their buffer, ``decision_replay``)."""
        return DecisionReplay.of_env(self.envs[0], self.config.decision_replay)

    def save_extra(self, path: Path) -> None:
        if self.config.decision_coef and self.config.decision_replay:
            self.replay.save(Path(path))

    def load_extra(self, path: Path) -> None:
        if self.config.decision_coef and self.config.decision_replay:
            self.replay.load(Path(path))

    def _update(
        self, episodes: list[Episode], advantages: list[list[float]] | torch.Tensor, tied: torch.Tensor
    ) -> dict[str, float]:
        """``num_iterations`` optimizer steps on ``episodes``; ``advantages[i]`` holds episode ``i``'s per-turn
        advantages (or one number for all its turns). Identical samples are computed once (:mod:`.unique_samples`)."""
        cfg = self.config
        if isinstance(advantages, torch.Tensor):
            advantages = [[a] * max(ep.turns, 1) for a, ep in zip(advantages.tolist(), episodes, strict=True)]
        unique = unique_samples(episodes, advantages, tied.tolist() if cfg.skip_zero_std else None)
        merged = len(unique)
        local = [sum(u.count for u in unique), sum(u.count * sum(u.sample.loss_mask) for u in unique)]
        n_samples, n_tokens = self.group.sum(*local)  # the loss is normalised over all ranks' batch
        if not n_tokens:
            return {"loss": 0.0, "kl": 0.0, "clipfrac": 0.0, "entropy": 0.0, "grad_norm": 0.0, "unique_samples": 1.0}
        if not unique:  # this rank has nothing to learn from, but must still join the gradient all-reduce
            first = next(s for ep in episodes for s in ep.samples if any(s.loss_mask))
            unique = [UniqueSample(first, [0.0] * len(turn_spans(first.loss_mask)))]
        batches = [
            self._batch(unique[k : k + cfg.micro_batch_size]) for k in range(0, len(unique), cfg.micro_batch_size)
        ]
        decisions = self.replay.draw(self.policy, episodes, self.generator) if cfg.decision_coef > 0 else None
        if decisions:  # each context followed by the right value, the loss on the value's tokens
            batches[-1]["decisions"] = self.batch(decisions.labelled_samples())
        sums = dict.fromkeys(("loss", "kl", "clipped", "entropy", "decision_loss"), 0.0)
        self.scorer.train()
        for iteration in range(cfg.num_iterations):
            loss = functools.partial(self.loss, n_samples=n_samples, n_tokens=n_tokens, iteration=iteration)
            grad_norm, stats = self.optimizer_step(batches, loss)
            for row in stats:
                for key, value in row.items():
                    sums[key] += value if iteration == 0 or key in ("loss", "clipped") else 0.0
        loss, kl, clipped, ent = self.group.sum(sums["loss"], sums["kl"], sums["clipped"], sums["entropy"])
        extra = {"decision_loss": sums["decision_loss"], "decision_labels": len(decisions)} if decisions else {}
        return {
            **extra,
            "loss": loss / cfg.num_iterations / self.world_size,
            "kl": kl / n_tokens,
            "clipfrac": clipped / (n_tokens * cfg.num_iterations),
            "entropy": ent / n_tokens,
            "grad_norm": grad_norm if math.isfinite(grad_norm) else float("nan"),
            "unique_samples": merged / max(1, local[0]),
        }

    def loss(
        self, batch: dict[str, torch.Tensor], n_samples: float, n_tokens: float, iteration: int = 0
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """A micro-batch's share of the step's loss (normalised by ``loss_type`` over the whole step's ``n_samples``
        and ``n_tokens``), and its sums of the loss, KL, clipped tokens, entropy and decision loss."""
        cfg = self.config
        scores = self.train_pass(batch, with_entropy=iteration == 0)
        logp, ent = scores.logp, scores.entropy
        mask = batch["loss_mask"].to(logp.dtype)
        weighted = mask * batch["weights"]  # each unique sample counts as many times as it occurred
        old = batch["old_logp"] if cfg.num_iterations > 1 else logp.detach()
        adv = batch["advantages"]
        surrogate, ratio = clipped_surrogate(logp, old, adv, cfg.epsilon_low, cfg.epsilon_high)
        per_token, stats = -surrogate, {"kl": 0.0, "decision_loss": 0.0}
        if self.reference is not None:
            kl = kl_k3(logp, batch["ref_logp"])
            per_token = per_token + cfg.beta * kl
            stats["kl"] = float((kl.detach() * weighted).sum())
        if cfg.loss_type == "grpo":
            loss = ((per_token * weighted).sum(1) / mask.sum(1).clamp(min=1)).sum() / n_samples
        elif cfg.loss_type == "dapo":
            loss = (per_token * weighted).sum() / n_tokens
        else:
            loss = (per_token * weighted).sum() / (n_samples * cfg.rollout.max_new_tokens)
        if "decisions" in batch:
            decision_mask = batch["decisions"]["loss_mask"].to(logp.dtype)
            decision_logp = self.train_pass(batch["decisions"]).logp
            decision_loss = -(decision_logp * decision_mask).sum() / decision_mask.sum()
            loss = loss + cfg.decision_coef * decision_loss
            stats["decision_loss"] = decision_loss.item()
        with torch.no_grad():
            clipped = ((ratio < 1 - cfg.epsilon_low) & (adv < 0)) | ((ratio > 1 + cfg.epsilon_high) & (adv > 0))
            stats["clipped"] = float((clipped * weighted).sum())
            stats["entropy"] = float((ent * weighted).sum()) if ent is not None else 0.0
        return loss, {"loss": loss.item(), **stats}

    def _batch(self, chunk: list[UniqueSample]) -> dict[str, torch.Tensor]:
        """A micro-batch of unique samples with their token advantages, weights and, as needed, the old and the
        reference log-probabilities."""
        cfg = self.config
        batch = self.batch([u.sample for u in chunk])
        device = batch["input_ids"].device
        batch["advantages"] = token_advantages(chunk, batch["input_ids"].shape[1]).to(device)
        batch["weights"] = torch.tensor([float(u.count) for u in chunk], device=device)[:, None]
        with torch.no_grad():
            if cfg.num_iterations > 1:
                batch["old_logp"] = self.scorer(batch, cfg.rollout.temperature).logp
            if self.reference is not None:
                batch["ref_logp"] = self.reference_logp(batch)
        return batch
