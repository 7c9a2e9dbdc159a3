"""PPO for a language model playing agentgym text envs: actor + value head, GAE over the policy's tokens.

The RLHF recipe (Ouyang et al. 2022; Ziegler et al. 2019), with env turns in between. Each step:

1. play ``episodes_per_step`` episodes of random tasks with the current policy
   (:func:`agentgym.trainers.llm.rollout.rollout`); each turn's reward comes from the env's rules, a
   reward model, or both (:class:`~agentgym.trainers.llm.online_trainer.OnlineTrainer`);
2. score the batch once more without gradient: ``log π_old``, ``log π_ref`` and the value head's
   ``V(s_t)`` at every policy token (``V`` reads the hidden state the token was chosen in);
3. lay each episode's policy tokens end to end — the env's tokens are not actions, so they are
   skipped, in both context modes — and give token ``t`` the reward::

       r_t = −β · (log π_old(a_t) − log π_ref(a_t))  +  r_turn   if t ends a turn

   (the per-token KL penalty of RLHF PPO); then GAE (``advantages.gae``) with ``gamma``/``lam`` over
   that token sequence, the episode's last token terminal; advantages are whitened over the batch.
   ``discount_unit="turn"`` discounts per turn instead of per token (γ and λ act only between one
   turn's last token and the next turn's first), so γ means the same as GRPO's ``gamma`` however long
   the responses are;
4. ``ppo_epochs`` passes over ``num_minibatches`` minibatches of the loss::

       L = −min(ρ_t A_t, clip(ρ_t, 1 ± ε) A_t) + vf_coef · ½ max((V − R)², (V_clip − R)²) − ent_coef · H_t

   averaged over the minibatch's policy tokens; env tokens enter neither the policy nor the value loss.

The clipped surrogate, GAE, the clipped value loss and ``explained_variance`` are the functions the
classic :class:`~agentgym.trainers.PPO` uses. The value head is a linear layer on the policy's last
hidden state (one forward pass serves both), saved as ``value_head.pt`` next to the weights.

Compared with GRPO it needs no groups (one episode per task) but a critic that must learn first:
see ``benchmarks/ppo_vs_grpo.py`` for the two side by side on WeatherRun.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import Field

from agentgym.trainers.advantages import clipped_surrogate, explained_variance, gae, value_loss
from agentgym.trainers.llm.online_trainer import OnlineConfig, OnlineTrainer
from agentgym.trainers.llm.rollout import Episode, Sample, episode_metrics, random_resets, rollout

__all__ = ["LLMPPO", "LLMPPOConfig"]

VALUE_HEAD_FILE = "value_head.pt"


class LLMPPOConfig(OnlineConfig):
    """PPO's knobs on top of :class:`~agentgym.trainers.llm.online_trainer.OnlineConfig` (``beta`` is the per-token
    KL penalty in the reward here)."""

    episodes_per_step: int = Field(32, ge=1, description="Episodes (each a random task) played per step.")
    ppo_epochs: int = Field(2, ge=1, description="Passes over each batch.")
    num_minibatches: int = Field(2, ge=1, description="Optimizer steps per pass (minibatches per rank).")
    clip_eps: float = Field(0.2, gt=0, description="ε of the clipped surrogate.")
    value_clip: float | None = Field(0.2, gt=0, description="How far V may move from V_old per batch (None: off).")
    vf_coef: float = Field(0.1, ge=0, description="Weight of the value loss.")
    ent_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    gamma: float = Field(1.0, ge=0, le=1, description="Discount per policy token, or per turn (discount_unit).")
    lam: float = Field(0.95, ge=0, le=1, description="GAE λ, per policy token or per turn (discount_unit).")
    discount_unit: Literal["token", "turn"] = Field(
        "token",
        description="What gamma and lam discount: every policy token (RLHF PPO), or every turn (the step from a "
        "turn's last token to the next turn's first; inside a turn gamma = lam = 1).",
    )
    whiten_advantages: bool = Field(True, description="Normalise advantages to mean 0, std 1 over the batch.")


class LLMPPO(OnlineTrainer):
    """PPO with a value head on any agentgym text env: ``LLMPPO(policy, config, out_dir=...).learn()``.

    Writes what :class:`~agentgym.trainers.llm.grpo.GRPO` writes; checkpoints also hold ``value_head.pt``.
    """

    algorithm = "ppo"
    label = "PPO"
    config_class = LLMPPOConfig
    curve_keys = ("reward", "success", "value_loss", "explained_variance", "eval_success")
    config: LLMPPOConfig

    def envs_needed(self) -> int:
        return -(-self.config.episodes_per_step // self.world_size)

    def value_head(self) -> torch.nn.Module:
        hidden = self.policy.model.get_output_embeddings().in_features
        self._value_head = torch.nn.Linear(hidden, 1).to(self.policy.device)
        torch.nn.init.zeros_(self._value_head.weight)
        torch.nn.init.zeros_(self._value_head.bias)
        return self._value_head

    def save_extra(self, path: Path) -> None:
        torch.save(self._value_head.state_dict(), Path(path) / VALUE_HEAD_FILE)

    def load_extra(self, path: Path) -> None:
        file = Path(path) / VALUE_HEAD_FILE
        if file.exists():
            try:
                self._value_head.load_state_dict(torch.load(file, weights_only=True))
            except Exception as exc:  # truncated, crafted, or a head of another model
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                raise ValueError(f"{file}: not this model's value head ({first})") from None
            if not all(torch.isfinite(p).all() for p in self._value_head.parameters()):
                raise ValueError(f"{file}: the value head holds NaN or infinite numbers")

    # ------------------------------------------------------------------ one step

    def train_step(self) -> dict[str, Any]:
        """Play one batch of episodes and run PPO epochs on it; returns the step's metrics."""
        cfg = self.config
        t0 = time.perf_counter()
        resets = self.group.shard(random_resets(self.rng, cfg.episodes_per_step, self.num_tasks))
        episodes = rollout(self.policy, self.envs[: len(resets)], resets, cfg.rollout, generator=self.generator)
        t_rollout = time.perf_counter() - t0
        scores = self.reward_model_scores(episodes)
        turn_rewards = self.turn_rewards(episodes, scores)
        self.log_episodes(episodes, turn_rewards, scores)
        batch = self._advantages(episodes, turn_rewards)
        stats = self._update(batch)
        self.end_step()
        generated = sum(ep.response_tokens for ep in episodes)
        return self.group.mean(
            {
                "step": self.step,
                **episode_metrics(episodes),
                **stats,
                "lr": self.optimizer.param_groups[0]["lr"],
                "tokens_per_second": generated / max(t_rollout, 1e-9),
                "time_rollout": t_rollout,
                "time_step": time.perf_counter() - t0,
            }
        )

    def _advantages(self, episodes: list[Episode], rewards: list[list[float]]) -> dict[str, Any]:
        """Score the samples without gradient and compute per-token advantages and returns (GAE)."""
        cfg = self.config
        samples = [s for ep in episodes for s in ep.samples if any(s.loss_mask)]
        owner = [i for i, ep in enumerate(episodes) for s in ep.samples if any(s.loss_mask)]
        if not samples:
            return {"samples": []}
        old_logp, values, ref_logp = [], [], []
        with torch.no_grad():
            for start in range(0, len(samples), cfg.micro_batch_size):
                batch = self.batch(samples[start : start + cfg.micro_batch_size])
                lengths = [len(s.input_ids) for s in samples[start : start + cfg.micro_batch_size]]
                scores = self.scorer(batch, cfg.rollout.temperature)
                ref = self.reference_logp(batch).cpu() if self.reference is not None else None
                for row, n in enumerate(lengths):
                    old_logp.append(scores.logp[row, :n].cpu())
                    values.append(scores.values[row, :n].cpu())
                    ref_logp.append(ref[row, :n] if ref is not None else None)
        advantages = [torch.zeros(len(s.input_ids)) for s in samples]
        returns = [torch.zeros(len(s.input_ids)) for s in samples]
        kl_sum = 0.0
        for e, ep_rewards in enumerate(rewards):
            # the episode's policy tokens, end to end: (sample index, position), and where each turn ends
            mine = [j for j, o in enumerate(owner) if o == e]
            where = [(j, t) for j in mine for t, m in enumerate(samples[j].loss_mask) if m]
            if not where:
                continue
            mask_of = [samples[j].loss_mask for j, _ in where]
            ends = [k for k, (_, t) in enumerate(where) if t + 1 == len(mask_of[k]) or not mask_of[k][t + 1]]
            if len(ends) != len(ep_rewards):  # a turn without tokens cannot happen; if it did, pay at the end
                ends, ep_rewards = [len(where) - 1], [sum(ep_rewards)]
            r = torch.zeros(len(where))
            v = torch.stack([values[j][t] for j, t in where])
            if self.reference is not None:
                kl = torch.stack([old_logp[j][t] - ref_logp[j][t] for j, t in where])
                kl_sum += float(kl.sum())
                r -= cfg.beta * kl
            for k, reward in zip(ends, ep_rewards, strict=True):
                r[k] += reward
            terminal = torch.zeros(len(where))
            terminal[-1] = 1.0
            next_v = torch.cat([v[1:], v.new_zeros(1)])
            gamma, lam = cfg.gamma, cfg.lam
            if cfg.discount_unit == "turn":  # discount only where a turn ends and the next begins
                gamma, lam = torch.ones(len(where)), torch.ones(len(where))
                gamma[ends], lam[ends] = cfg.gamma, cfg.lam
            adv, ret = gae(r, v, next_v, terminal, gamma=gamma, lam=lam)
            for k, (j, t) in enumerate(where):
                advantages[j][t], returns[j][t] = adv[k], ret[k]
        masks = [torch.tensor(s.loss_mask, dtype=torch.bool) for s in samples]
        flat_adv = torch.cat([a[m] for a, m in zip(advantages, masks, strict=True)])
        flat_ret = torch.cat([r[m] for r, m in zip(returns, masks, strict=True)])
        flat_val = torch.cat([v[m] for v, m in zip(values, masks, strict=True)])
        n, total, total_sq = self.group.sum(len(flat_adv), float(flat_adv.sum()), float((flat_adv**2).sum()))
        if cfg.whiten_advantages and n > 1:
            mean = total / n
            std = math.sqrt(max(total_sq / n - mean**2, 0.0) * n / (n - 1))
            advantages = [(a - mean) / (std + 1e-8) for a in advantages]
        return {
            "samples": samples,
            "old_logp": old_logp,
            "values": values,
            "advantages": advantages,
            "returns": returns,
            "stats": {
                "kl": kl_sum / max(1, len(flat_adv)),
                "value_mean": float(flat_val.mean()),
                "return_mean": float(flat_ret.mean()),
                "explained_variance": explained_variance(flat_val, flat_ret),
            },
        }

    def _update(self, data: dict[str, Any]) -> dict[str, float]:
        cfg = self.config
        samples: list[Sample] = data["samples"]
        n_local = len(samples)
        if not self.group.sum(n_local)[0]:
            return {"policy_loss": 0.0, "value_loss": 0.0, "clipfrac": 0.0, "approx_kl": 0.0, "kl": 0.0}
        sums = {"policy_loss": 0.0, "value_loss": 0.0, "clipped": 0.0, "approx_kl": 0.0, "entropy": 0.0, "tokens": 0.0}
        grad_norms = []
        self.scorer.train()
        for _ in range(cfg.ppo_epochs):
            order = torch.randperm(n_local, generator=self.generator).tolist()
            for minibatch in range(cfg.num_minibatches):
                chosen = order[minibatch :: cfg.num_minibatches]
                weight = 1.0
                if not chosen:  # this rank has too few samples, but must still join the all-reduce
                    chosen, weight = [0] if n_local else [], 0.0
                n_tokens = self.group.sum(weight * sum(sum(samples[i].loss_mask) for i in chosen))[0]
                chunks = [chosen[k : k + cfg.micro_batch_size] for k in range(0, len(chosen), cfg.micro_batch_size)]
                loss = functools.partial(self.loss, data=data, weight=weight, n_tokens=n_tokens)
                grad_norm, stats = self.optimizer_step(chunks, loss)
                grad_norms.append(grad_norm)
                for row in stats:
                    for key, value in row.items():
                        sums[key] += value
        totals = dict(zip(sums, self.group.sum(*sums.values()), strict=True))
        tokens = max(totals.pop("tokens"), 1.0)
        grad_norm = max(grad_norms)
        return {
            **{k: v / tokens for k, v in totals.items() if k != "clipped"},
            "clipfrac": totals["clipped"] / tokens,
            **data["stats"],
            "grad_norm": grad_norm if math.isfinite(grad_norm) else float("nan"),
        }

    def loss(
        self, chunk: list[int], data: dict[str, Any], weight: float, n_tokens: float
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Samples ``chunk``'s share of a minibatch's loss (clipped surrogate, value loss, entropy bonus per token
        of the minibatch's ``n_tokens``; ``weight`` 0 for a rank's placeholder) and its sums for the step's row."""
        cfg = self.config
        batch = self.batch([data["samples"][i] for i in chunk])
        adv, ret, old_v, old_logp = (
            _padded([data[key][i] for i in chunk], batch["input_ids"])
            for key in ("advantages", "returns", "values", "old_logp")
        )
        scores = self.train_pass(batch, with_entropy=True, entropy_grad=cfg.ent_coef > 0)
        mask = batch["loss_mask"].to(scores.logp.dtype) * weight
        surrogate, ratio = clipped_surrogate(scores.logp, old_logp, adv, cfg.clip_eps)
        v_error = value_loss(scores.values, ret, old_v, cfg.value_clip, reduction="none")
        per_token = -surrogate + cfg.vf_coef * v_error
        if cfg.ent_coef > 0:
            per_token = per_token - cfg.ent_coef * scores.entropy
        with torch.no_grad():
            log_ratio = scores.logp - old_logp
            stats = {
                "policy_loss": float((-surrogate * mask).sum()),
                "value_loss": float((v_error * mask).sum()),
                "clipped": float((((ratio - 1).abs() > cfg.clip_eps) * mask).sum()),
                "approx_kl": float((((ratio - 1) - log_ratio) * mask).sum()),
                "entropy": float((scores.entropy * mask).sum()) if scores.entropy is not None else 0.0,
                "tokens": float(mask.sum()),
            }
        return (per_token * mask).sum() / max(n_tokens, 1.0), stats


def _padded(rows: list[torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """Per-sample token tensors right-padded with zeros to a batch shaped (and placed) like ``like``."""
    width = like.shape[1]
    return torch.stack([torch.nn.functional.pad(x, (0, width - len(x))) for x in rows]).to(like.device)
