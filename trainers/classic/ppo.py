"""PPO (Schulman et al. 2017), CleanRL-style: one file, read top to bottom, the paper's names.

Each update:

1. **Rollout**: run the current policy π_old for ``n_steps`` env steps (episodes restart as
   they end), keeping ``obs, actions, rewards, next_obs, terminated, truncated``.
2. **Advantages**: GAE(γ, λ) from the critic ``V`` (``gae`` in
   :mod:`agentgym.trainers.advantages`); a time-limit truncation bootstraps from ``V`` of the
   state it stopped in, a real termination does not. ``returns = advantages + V`` are the critic's
   targets.
3. **Optimise** for ``n_epochs`` passes over shuffled minibatches (advantages normalised per
   minibatch if ``normalize_advantages``)::

       ratio = π_θ(a|s) / π_old(a|s)
       loss  = −mean(min(ratio·A, clip(ratio, 1−ε, 1+ε)·A)) + vf_coef · ½(V(s) − returns)² − ent_coef · H(π_θ)

   logging ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``, ``clipfrac`` and
   ``explained_variance``.

The actor and the critic are separate small MLPs over the one-hot observation (as CleanRL's
``Agent``), trained by one Adam optimiser; any env with ``Discrete`` observation and action
spaces works, and a text ``ToolEnv`` is wrapped in :class:`~agentgym.core.wrappers.DiscreteToolActions`
automatically. One env is stepped (no vector env). The networks, action sampling and save/load are
:class:`~agentgym.trainers.classic.torch_agent.TorchAgent`'s (shared with REINFORCE); this file is the algorithm.

Advantage normalisation is off by default, unlike CleanRL: once a policy walks the same path every
episode, the advantages are nothing but critic error, and normalising blows that error up to unit
size and pushes the policy around with it. On CliffWalk (20 seeds, 50k steps) normalising reached
the goal sooner (median 7.3k steps against 9.0k) but 2 of 20 final policies had fallen off the
cliff again; without it all 20 held. Turn it on where rewards are so large or small that the
default learning rate and ``ent_coef`` are off-scale.

The surface follows Stable-Baselines3::

    agent = PPO(gym.make("agentgym/CliffWalk-v0"), seed=0).learn(total_timesteps=20_000)
    action, _ = agent.predict(obs)
    agent.save("ppo.pt"); agent = PPO.load("ppo.pt")
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import nn
from tqdm.auto import tqdm

from agentgym.trainers.advantages import entropy, explained_variance, gae, normalize, ppo_clip_loss, value_loss
from agentgym.trainers.classic.base import Callback
from agentgym.trainers.classic.torch_agent import TorchAgent

__all__ = ["PPO", "PPOConfig"]


class PPOConfig(BaseModel):
    """Hyperparameters of PPO. With the defaults the greedy policy reaches CliffWalk's goal after about
    6–12 thousand env steps depending on the seed."""

    model_config = ConfigDict(extra="forbid")

    learning_rate: float = Field(3e-3, gt=0, description="Adam step size for the actor and the critic.")
    anneal_lr: bool = Field(False, description="Decay the learning rate linearly to 0 over the learn() call.")
    n_steps: int = Field(256, ge=1, description="Env steps collected per update (the rollout length).")
    n_epochs: int = Field(4, ge=1, description="Passes over each rollout.")
    minibatch_size: int = Field(64, ge=1, description="Samples per gradient step (a rollout is split into these).")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor γ.")
    gae_lambda: float = Field(0.95, ge=0, le=1, description="GAE λ: 0 is one-step TD, 1 is Monte-Carlo.")
    clip_eps: float = Field(0.2, gt=0, description="PPO clip range ε of the probability ratio.")
    clip_vloss: bool = Field(False, description="Also clip the critic's change to ±clip_eps per update (CleanRL).")
    normalize_advantages: bool = Field(
        False,
        description="Normalise advantages per minibatch to mean 0, std 1 (CleanRL's default; see the module doc).",
    )
    vf_coef: float = Field(0.5, ge=0, description="Weight c1 of the critic loss.")
    ent_coef: float = Field(0.05, ge=0, description="Weight c2 of the entropy bonus that keeps the policy exploring.")
    max_grad_norm: float | None = Field(0.5, gt=0, description="Clip the global gradient norm (None: no clipping).")
    target_kl: float | None = Field(None, gt=0, description="Stop an update's epochs early once approx_kl exceeds it.")
    hidden_size: int = Field(64, ge=1, description="Width of the hidden layer of the actor and critic MLPs.")
    max_steps: int = Field(1000, ge=1, description="Cut an episode off (truncate) after this many steps.")
    eval_every: int = Field(10, ge=0, description="Run a greedy evaluation episode every N episodes (0: never).")
    eval_max_steps: int = Field(1000, ge=1, description="Step cap for a greedy evaluation episode.")
    seed: int | None = Field(None, description="Seeds the network init, sampling, minibatches and the first reset.")


class PPO(TorchAgent):
    """Proximal Policy Optimisation with a clipped surrogate. ``PPO(env, config=None, **overrides)``:
    overrides are :class:`PPOConfig` fields (``PPO(env, n_steps=512, seed=0)``)."""

    algorithm = "ppo"
    config_cls = PPOConfig

    def __init__(self, env: gym.Env, config: PPOConfig | None = None, **overrides: Any) -> None:
        super().__init__(env, config, **overrides)
        cfg: PPOConfig = self.config
        self.optimizer = torch.optim.Adam([*self.policy.parameters(), *self.value.parameters()], lr=cfg.learning_rate)
        self.rng = np.random.default_rng(cfg.seed)  # minibatch shuffling
        self.last_update: dict[str, float] = {}  # stats of the latest update, attached to each episode's metrics

    def _update(self, rollout: dict[str, list], lr: float) -> dict[str, float]:
        """GAE on one rollout, then ``n_epochs`` of clipped-surrogate minibatch steps."""
        cfg = self.config
        obs = self.obs_tensor(rollout["obs"])
        actions = torch.tensor(rollout["actions"])
        rewards = torch.tensor(rollout["rewards"], dtype=torch.float32)
        terminated = torch.tensor(rollout["terminated"], dtype=torch.float32)
        truncated = torch.tensor(rollout["truncated"], dtype=torch.float32)
        with torch.no_grad():
            logp_old = torch.log_softmax(self.policy(obs), -1).gather(1, actions[:, None]).squeeze(1)
            values = self.value(obs).squeeze(-1)
            next_values = self.value(self.obs_tensor(rollout["next_obs"])).squeeze(-1)
        advantages, returns = gae(rewards, values, next_values, terminated, truncated, cfg.gamma, cfg.gae_lambda)

        for group in self.optimizer.param_groups:
            group["lr"] = lr
        sums: dict[str, float] = {}
        n_minibatches = 0
        for _epoch in range(cfg.n_epochs):
            order = torch.from_numpy(self.rng.permutation(len(actions)))
            for mb in order.split(cfg.minibatch_size):
                logits = self.policy(obs[mb])
                logp = torch.log_softmax(logits, -1).gather(1, actions[mb, None]).squeeze(1)
                mb_advantages = normalize(advantages[mb]) if cfg.normalize_advantages else advantages[mb]
                pg_loss, stats = ppo_clip_loss(logp, logp_old[mb], mb_advantages, cfg.clip_eps)
                v_loss = value_loss(
                    self.value(obs[mb]).squeeze(-1),
                    returns[mb],
                    old_values=values[mb] if cfg.clip_vloss else None,
                    clip_eps=cfg.clip_eps if cfg.clip_vloss else None,
                )
                ent = entropy(logits).mean()
                loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent

                self.optimizer.zero_grad()
                loss.backward()
                if cfg.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_([*self.policy.parameters(), *self.value.parameters()], cfg.max_grad_norm)
                self.optimizer.step()

                step = {"policy_loss": pg_loss.item(), "value_loss": v_loss.item(), "entropy": ent.item(), **stats}
                for key, value in step.items():
                    sums[key] = sums.get(key, 0.0) + value
                n_minibatches += 1
            if cfg.target_kl is not None and stats["approx_kl"] > cfg.target_kl:
                break
        self.updates_done += 1
        return {
            "update": self.updates_done,
            "learning_rate": lr,
            **{key: value / n_minibatches for key, value in sums.items()},
            "explained_variance": explained_variance(values, returns),
        }

    def learn(self, total_timesteps: int, callback: Callback | None = None, progress_bar: bool = False) -> PPO:
        """Train for ``total_timesteps`` env steps, rounded up to whole rollouts of ``n_steps``.

        ``callback(agent, metrics)`` is called once per finished episode, as it finishes, with
        ``episode``, ``timesteps`` (total env steps so far), ``return``, ``length``, ``success``,
        every ``eval_every`` episodes ``greedy_return`` and ``greedy_success``, and the stats of
        the latest update (absent before the first): ``update``, ``learning_rate``,
        ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``, ``clipfrac``, ``ratio``
        (means over the update's minibatches) and ``explained_variance``. The same stats are in
        :attr:`last_update`. Returning ``False`` stops training at once.
        """
        cfg, env = self.config, self.env
        offset, start = int(env.observation_space.start), int(env.action_space.start)
        n_updates = max(1, math.ceil(total_timesteps / cfg.n_steps))
        bar = tqdm(total=n_updates * cfg.n_steps, desc=self.algorithm, disable=not progress_bar, unit="step")
        s, _ = env.reset(seed=cfg.seed if self.timesteps_done == 0 else None)
        ep_return, ep_length, stop = 0.0, 0, False
        for update in range(n_updates):
            # 1. rollout with the current policy (fixed until the update, so look actions up per state)
            cumulative = self.action_table().softmax(-1).cumsum(-1).tolist()
            rollout: dict[str, list] = {}
            for _ in range(cfg.n_steps):
                action = self.sample(cumulative[int(s) - offset])
                s2, r, terminated, truncated, info = env.step(action + start)
                ep_return, ep_length = ep_return + float(r), ep_length + 1
                truncated = bool(truncated) or ep_length >= cfg.max_steps
                transition = {
                    "obs": int(s),
                    "actions": action,
                    "rewards": float(r),
                    "next_obs": int(s2),  # on truncation: the state it was cut off in, which GAE bootstraps from
                    "terminated": bool(terminated),
                    "truncated": truncated,
                }
                for key, value in transition.items():
                    rollout.setdefault(key, []).append(value)
                self.timesteps_done += 1
                bar.update(1)
                s = s2
                if terminated or truncated:
                    self.episodes_done += 1
                    metrics: dict[str, Any] = {
                        "episode": self.episodes_done,
                        "timesteps": self.timesteps_done,
                        "return": ep_return,
                        "length": ep_length,
                        "success": bool(info.get("success", False)),
                    }
                    if cfg.eval_every and self.episodes_done % cfg.eval_every == 0:
                        _, metrics["greedy_return"], metrics["greedy_success"] = self.greedy_rollout()
                        bar.set_postfix(greedy=f"{metrics['greedy_return']:g}", refresh=False)
                    metrics |= self.last_update
                    if callback is not None and callback(self, metrics) is False:
                        stop = True
                        break
                    s, _ = env.reset()
                    ep_return, ep_length = 0.0, 0
            if stop:
                break
            # 2–3. advantages and optimisation
            lr = cfg.learning_rate * (1.0 - update / n_updates if cfg.anneal_lr else 1.0)
            self.last_update = self._update(rollout, lr)
        bar.close()
        return self
