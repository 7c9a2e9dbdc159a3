"""REINFORCE with a baseline (Williams 1992): Monte-Carlo policy gradient on ``Discrete`` envs.

Sample whole episodes with the current policy π_θ, compute each step's return ``G_t``
backwards, and ascend::

    ∇J(θ) ≈ mean_t [ (G_t − b(s_t)) · ∇ log π_θ(a_t | s_t) ]  +  ent_coef · ∇ H(π_θ(·|s_t))

The baseline ``b`` does not bias the gradient but cuts its variance: a learned critic ``V(s)``
(trained on ``0.5 · (V(s_t) − G_t)²``), a running mean of returns, or nothing. An episode cut
off by a time limit bootstraps its return from ``V`` of the state it stopped in when the critic
is learned (see :func:`~agentgym.trainers.advantages.discounted_returns`).

Advantages are normalised per batch by default: Monte-Carlo advantages are large and noisy, and
without it CliffWalk took about three times as many steps (median 56k against 18k, 10 seeds).
Normalising subtracts the batch mean, so to compare the ``"mean"`` and ``"none"`` baselines set
``normalize_advantages=False``.

The entropy bonus matters more than usual here: on CliffWalk, falling off and wandering for the
whole time limit both score about −100, so with too little of it the policy settles on a loop
before it has found the goal (20 seeds, 3000 episodes: ``ent_coef=0.01`` reached the goal on 19,
at a median of 37k steps; the default 0.05 on all 20, at 26k, and all 20 still held it at the end).
REINFORCE stays noisy after it has converged: stop on success with a callback, or lower
``learning_rate``, if the last policy must be a good one.

The policy is a small MLP over the one-hot observation, so any env with ``Discrete``
observation and action spaces works, and a text ``ToolEnv`` is wrapped in
:class:`~agentgym.core.wrappers.DiscreteToolActions` automatically. The surface follows
Stable-Baselines3::

    agent = REINFORCE(gym.make("agentgym/CliffWalk-v0"), seed=0).learn(1000)
    action, _ = agent.predict(obs)
    agent.save("reinforce.pt"); agent = REINFORCE.load("reinforce.pt")

The networks, sampling and save/load are :class:`~agentgym.trainers.classic.torch_agent.TorchAgent`'s (shared with PPO).
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from tqdm.auto import tqdm

from agentgym.trainers.advantages import discounted_returns, entropy, normalize, policy_gradient_loss, value_loss
from agentgym.trainers.classic.base import Callback
from agentgym.trainers.classic.torch_agent import TorchAgent

__all__ = ["REINFORCE", "REINFORCEConfig"]


class REINFORCEConfig(BaseModel):
    """Hyperparameters of REINFORCE. With the defaults the greedy policy reaches CliffWalk's goal after
    a few hundred episodes (roughly 5–50 thousand env steps, depending on the seed)."""

    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(1e-2, gt=0, description="Adam step size for the policy and the critic.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor γ of the returns G_t.")
    hidden_size: int = Field(64, ge=1, description="Width of the hidden layer of the policy and critic MLPs.")
    baseline: Literal["learned", "mean", "none"] = Field(
        "learned",
        description="b(s_t): 'learned' critic V(s), 'mean' running mean of returns, or 'none'.",
    )
    baseline_decay: float = Field(
        0.9, ge=0, lt=1, description="'mean' baseline: b ← decay · b + (1 − decay) · mean of the batch's G_t."
    )
    vf_coef: float = Field(0.5, ge=0, description="Weight of the critic loss (learned baseline only).")
    ent_coef: float = Field(0.05, ge=0, description="Weight of the entropy bonus that keeps the policy exploring.")
    normalize_advantages: bool = Field(True, description="Normalise G_t − b(s_t) over each batch to mean 0, std 1.")
    episodes_per_update: int = Field(4, ge=1, description="Episodes sampled per gradient step (the batch).")
    max_grad_norm: float | None = Field(0.5, gt=0, description="Clip the global gradient norm (None: no clipping).")
    max_steps: int = Field(1000, ge=1, description="Cut an episode off (truncate) after this many steps.")
    eval_every: int = Field(10, ge=0, description="Run a greedy evaluation episode every N episodes (0: never).")
    eval_max_steps: int = Field(1000, ge=1, description="Step cap for a greedy evaluation episode.")
    seed: int | None = Field(None, description="Seeds the network init, action sampling and the env's first reset.")


class REINFORCE(TorchAgent):
    """REINFORCE with a baseline. ``REINFORCE(env, config=None, **overrides)``: overrides are
    :class:`REINFORCEConfig` fields (``REINFORCE(env, learning_rate=3e-3, seed=0)``)."""

    algorithm = "reinforce"
    config_cls = REINFORCEConfig

    def __init__(self, env: gym.Env, config: REINFORCEConfig | None = None, **overrides: Any) -> None:
        super().__init__(env, config, **overrides)
        cfg: REINFORCEConfig = self.config
        params = list(self.policy.parameters()) + (list(self.value.parameters()) if cfg.baseline == "learned" else [])
        self.optimizer = torch.optim.Adam(params, lr=cfg.learning_rate)
        self.running_baseline = 0.0  # the 'mean' baseline

    def _counters(self) -> dict[str, Any]:
        return {**super()._counters(), "running_baseline": self.running_baseline}

    def _run_episode(self, reset_seed: int | None) -> dict[str, Any]:
        """Sample one episode with the current policy (no gradients kept: the update recomputes them)."""
        env, offset, start = self.env, int(self.env.observation_space.start), int(self.env.action_space.start)
        cumulative = self.action_table().softmax(-1).cumsum(-1).tolist()
        s, info = env.reset(seed=reset_seed)
        states, actions, rewards = [], [], []
        terminated = truncated = False
        while not (terminated or truncated):
            action = self.sample(cumulative[int(s) - offset])
            states.append(int(s))
            actions.append(action)
            s, r, terminated, truncated, info = env.step(action + start)
            rewards.append(float(r))
            truncated = truncated or len(rewards) >= self.config.max_steps
        return {
            "states": states,
            "actions": actions,
            "rewards": rewards,
            "last_state": int(s),
            "terminated": bool(terminated),
            "success": bool(info.get("success", False)),
        }

    def _update(self, batch: list[dict[str, Any]]) -> dict[str, float]:
        """One gradient step on a batch of episodes; returns the loss terms."""
        cfg = self.config
        obs = self.obs_tensor([s for ep in batch for s in ep["states"]])
        actions = torch.tensor([a for ep in batch for a in ep["actions"]])
        learned = cfg.baseline == "learned"
        returns = []
        for ep in batch:
            bootstrap = 0.0
            if learned and not ep["terminated"]:  # cut off by a time limit: V(s_T) stands in for the rest
                with torch.no_grad():
                    bootstrap = self.value(self.obs_tensor(ep["last_state"])).item()
            returns.append(discounted_returns(torch.tensor(ep["rewards"]), gamma=cfg.gamma, bootstrap_value=bootstrap))
        returns = torch.cat(returns)

        logits = self.policy(obs)
        logp = torch.log_softmax(logits, -1).gather(1, actions[:, None]).squeeze(1)
        stats: dict[str, float] = {}
        if learned:
            values = self.value(obs).squeeze(-1)
            advantages = returns - values.detach()
            critic_loss = value_loss(values, returns)
            stats["value_loss"] = critic_loss.item()
        else:
            baseline = self.running_baseline if cfg.baseline == "mean" else 0.0
            advantages = returns - baseline
            critic_loss = torch.zeros(())
            if cfg.baseline == "mean":
                stats["baseline"] = baseline
                decay = cfg.baseline_decay if self.updates_done else 0.0  # start from the first batch's mean
                self.running_baseline = decay * baseline + (1 - decay) * returns.mean().item()
        if cfg.normalize_advantages:
            advantages = normalize(advantages)
        pg_loss = policy_gradient_loss(logp, advantages)
        ent = entropy(logits).mean()
        loss = pg_loss + cfg.vf_coef * critic_loss - cfg.ent_coef * ent

        self.optimizer.zero_grad()
        loss.backward()
        if cfg.max_grad_norm is not None:
            nn.utils.clip_grad_norm_(self.optimizer.param_groups[0]["params"], cfg.max_grad_norm)
        self.optimizer.step()
        self.updates_done += 1
        return {"loss": loss.item(), "policy_loss": pg_loss.item(), **stats, "entropy": ent.item()}

    def learn(self, episodes: int, callback: Callback | None = None, progress_bar: bool = False) -> REINFORCE:
        """Run ``episodes`` episodes, one gradient step per ``episodes_per_update`` of them (and one
        on whatever is left at the end).

        After each episode ``callback(agent, metrics)`` is called with ``episode``, ``timesteps``
        (total env steps so far), ``return``, ``length`` and ``success``; on episodes that closed
        a batch also ``update``, ``loss``, ``policy_loss``, ``entropy`` and ``value_loss``
        (learned baseline) or ``baseline`` (mean baseline); every ``eval_every`` episodes also
        ``greedy_return`` and ``greedy_success``. Returning ``False`` stops training.
        """
        cfg = self.config
        batch: list[dict[str, Any]] = []
        bar = tqdm(range(episodes), desc=self.algorithm, disable=not progress_bar, unit="ep")
        for i in bar:
            episode = self._run_episode(cfg.seed if self.episodes_done == 0 else None)
            batch.append(episode)
            self.episodes_done += 1
            self.timesteps_done += len(episode["rewards"])
            metrics: dict[str, Any] = {
                "episode": self.episodes_done,
                "timesteps": self.timesteps_done,
                "return": sum(episode["rewards"]),
                "length": len(episode["rewards"]),
                "success": episode["success"],
            }
            if len(batch) == cfg.episodes_per_update or i == episodes - 1:
                metrics |= {"update": self.updates_done + 1, **self._update(batch)}
                batch = []
            if cfg.eval_every and self.episodes_done % cfg.eval_every == 0:
                _, metrics["greedy_return"], metrics["greedy_success"] = self.greedy_rollout()
                bar.set_postfix(greedy=f"{metrics['greedy_return']:g}", refresh=False)
            if callback is not None and callback(self, metrics) is False:
                break
        bar.close()
        return self
