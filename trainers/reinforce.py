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
:class:`~agentgym.wrappers.DiscreteToolActions` automatically. The surface follows
Stable-Baselines3::

    agent = REINFORCE(gym.make("agentgym/CliffWalk-v0"), seed=0).learn(1000)
    action, _ = agent.predict(obs)
    agent.save("reinforce.pt"); agent = REINFORCE.load("reinforce.pt")

:mod:`agentgym.trainers.ppo` reuses the network helpers defined here.
"""

from __future__ import annotations

import bisect
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from torch import nn
from tqdm.auto import tqdm

from agentgym.trainers.advantages import discounted_returns, entropy, normalize, policy_gradient_loss, value_loss
from agentgym.trainers.base import Callback, DiscreteAgent

__all__ = ["REINFORCE", "REINFORCEConfig", "TorchAgent", "mlp", "read_checkpoint"]


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


# ---------------------------------------------------------------------- networks (shared with PPO)


def mlp(n_in: int, hidden: int, n_out: int, out_std: float) -> nn.Sequential:
    """``Linear → tanh → Linear`` with CleanRL's orthogonal init; ``out_std`` scales the last layer
    (0.01 for a policy head: near-uniform at the start; 1.0 for a value head).

    On a one-hot input the first layer is a learned embedding per state. One hidden layer, not
    CleanRL's two: a second layer shared by all states couples them, and on CliffWalk it made
    converged policies drift off the cliff edge far more often (REINFORCE with ``ent_coef=0.1``:
    3 of 10 seeds still reached the goal after 3000 episodes, against 8 of 10 with one layer).
    """
    layers = [nn.Linear(n_in, hidden), nn.Tanh(), nn.Linear(hidden, n_out)]
    for layer, std in zip(layers[::2], (2**0.5, out_std), strict=True):
        nn.init.orthogonal_(layer.weight, std)
        nn.init.zeros_(layer.bias)
    return nn.Sequential(*layers)


def seeded_init(seed: int | None, build: Callable[[], Any]) -> Any:
    """``build()`` under ``torch.manual_seed(seed)`` without touching the global torch RNG."""
    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def make_generator(seed: int | None) -> torch.Generator:
    """A torch RNG for action sampling: seeded, or from OS entropy when ``seed`` is None."""
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed)
    return generator


class TorchAgent(DiscreteAgent):
    """What REINFORCE and PPO share: an actor and a critic MLP over one-hot observations, sampling
    from a seeded torch generator, and persistence in one ``torch.save`` file.

    A subclass sets ``algorithm`` and ``config_cls`` (with ``seed`` and ``hidden_size``), builds
    ``self.optimizer``, and extends :meth:`_counters` with what else :meth:`save` must store.
    """

    def __init__(self, env: gym.Env, config: BaseModel | None = None, **overrides: Any) -> None:
        super().__init__(env, config, **overrides)
        cfg = self.config
        self.generator = make_generator(cfg.seed)
        self.policy, self.value = seeded_init(
            cfg.seed,
            lambda: (
                mlp(self.n_states, cfg.hidden_size, self.n_actions, out_std=0.01),
                mlp(self.n_states, cfg.hidden_size, 1, out_std=1.0),
            ),
        )
        self.optimizer: torch.optim.Optimizer
        self.updates_done = 0
        self.timesteps_done = 0

    def obs_tensor(self, observations: Any) -> torch.Tensor:
        """One-hot float rows for one or many discrete observations (shifted by the space's ``start``)."""
        index = torch.as_tensor(np.asarray(observations, dtype=np.int64) - int(self.env.observation_space.start))
        return nn.functional.one_hot(index, self.n_states).float()

    @torch.no_grad()
    def action_table(self) -> torch.Tensor:
        """Action logits of every state, ``(n_states, n_actions)``, in one batched forward pass.

        Between updates the policy does not change, so a rollout looks its actions up here
        instead of running the network once per step.
        """
        return self.policy(self.obs_tensor(np.arange(self.n_states) + int(self.env.observation_space.start)))

    def greedy_actions(self) -> list[int]:
        return self.action_table().argmax(-1).tolist()

    def _draw_block(self) -> list[float]:
        return torch.rand(4096, generator=self.generator, dtype=torch.float64).tolist()

    def sample(self, cumulative_probs: list[float]) -> int:
        """An action index drawn from one row of ``action_table().softmax(-1).cumsum(-1)`` (inverse CDF)."""
        return min(bisect.bisect_right(cumulative_probs, self._uniform()), self.n_actions - 1)

    @torch.no_grad()
    def predict(self, observation: Any, state: Any = None, deterministic: bool = True) -> tuple[int, None]:
        """The most likely action (a sampled one if not ``deterministic``), as ``(action, None)`` like SB3."""
        logits = self.policy(self.obs_tensor(observation))
        if deterministic:
            action = int(logits.argmax(-1))
        else:
            action = int(torch.multinomial(logits.softmax(-1), 1, generator=self.generator))
        return action + int(self.env.action_space.start), None

    # ------------------------------------------------------------------ persistence

    def _modules(self) -> dict[str, Any]:
        """Objects with ``state_dict``/``load_state_dict`` that :meth:`save` stores."""
        return {"policy": self.policy, "value": self.value, "optimizer": self.optimizer}

    def _counters(self) -> dict[str, Any]:
        """Plain numbers :meth:`save` stores and :meth:`load` sets back as attributes."""
        return {
            "episodes_done": self.episodes_done,
            "updates_done": self.updates_done,
            "timesteps_done": self.timesteps_done,
        }

    def save(self, path: str | Path) -> Path:
        """Write the network and optimiser state dicts, the config (JSON), the env id, the training
        counters and the sampling RNG state to one ``torch.save`` file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        spec = self.env.spec
        checkpoint = {
            "algorithm": self.algorithm,
            "config": self.config.model_dump_json(),
            "env_id": spec.id if spec else None,
            "spaces": [self.n_states, self.n_actions],
            "counters": self._counters(),
            "generator": self.generator.get_state(),
            **{name: module.state_dict() for name, module in self._modules().items()},
        }
        torch.save(checkpoint, path)
        return path

    @classmethod
    def load(cls, path: str | Path, env: gym.Env | None = None) -> Any:
        """Load a saved agent. Without ``env``, one is made from the saved env id.

        A file that is not a whole saved agent of this kind (truncated, foreign, crafted, weights that
        do not fit or are not finite) raises ``ValueError`` naming it; nothing in it can run code.
        """
        checkpoint = read_checkpoint(path)
        if checkpoint["algorithm"] != cls.algorithm:
            raise ValueError(f"{path} holds a {checkpoint['algorithm']!r} agent, not {cls.algorithm!r}")
        if env is None:
            if not checkpoint["env_id"]:
                raise ValueError(f"{path} records no env id; pass env=")
            env = gym.make(checkpoint["env_id"])
        try:
            config = cls.config_cls.model_validate_json(checkpoint["config"])
        except ValueError as exc:
            raise ValueError(f"{path}: the saved config is not valid ({_first_line(exc)})") from None
        agent = cls(env, config)
        if [agent.n_states, agent.n_actions] != list(checkpoint["spaces"]):
            raise ValueError(
                f"saved network shape (states, actions) {tuple(checkpoint['spaces'])} in {path} does not fit this "
                f"env's {(agent.n_states, agent.n_actions)}"
            )
        counters = agent._counters()
        for name, value in checkpoint["counters"].items():
            if name not in counters or not _fits(value, counters[name]):
                raise ValueError(f"{path}: the saved counter {name!r} = {value!r} is not one of this agent's")
        try:
            for name, module in agent._modules().items():
                module.load_state_dict(checkpoint[name])
            agent.generator.set_state(checkpoint["generator"])
        except Exception as exc:  # missing or misshapen tensors
            raise ValueError(f"{path}: the saved weights do not fit this agent ({_first_line(exc)})") from None
        if not all(torch.isfinite(p).all() for net in (agent.policy, agent.value) for p in net.parameters()):
            raise ValueError(f"{path}: the saved network weights hold NaN or infinite numbers")
        for name, value in checkpoint["counters"].items():
            setattr(agent, name, value)
        return agent


UNPICKLABLE = "it holds Python objects other than tensors, numbers, strings and containers; none was created"
CHECKPOINT_KEYS = ("algorithm", "config", "env_id", "spaces", "counters", "generator", "policy", "value", "optimizer")


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The dict a :class:`TorchAgent` saved, read with ``torch.load(weights_only=True)`` (tensors, numbers,
    strings and containers only: a crafted file cannot run code); ``ValueError`` naming the file otherwise."""
    try:
        checkpoint = torch.load(Path(path), weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:  # truncated, empty, foreign or crafted
        reason = UNPICKLABLE if isinstance(exc, pickle.UnpicklingError) else _first_line(exc)
        raise ValueError(f"{path}: not a saved agent ({reason})") from None
    if not isinstance(checkpoint, dict):
        raise ValueError(f"{path}: not a saved agent (it holds a {type(checkpoint).__name__}, not a dict)")
    if missing := [k for k in CHECKPOINT_KEYS if k not in checkpoint]:
        raise ValueError(f"{path}: not a saved agent (missing entries: {', '.join(missing)})")
    if not isinstance(checkpoint["config"], str) or not isinstance(checkpoint["counters"], dict):
        raise ValueError(f"{path}: not a saved agent (its config or counters are not what save() writes)")
    if not isinstance(checkpoint["spaces"], list | tuple) or len(checkpoint["spaces"]) != 2:
        raise ValueError(f"{path}: not a saved agent (its spaces entry is not [states, actions])")
    return checkpoint


def _fits(value: Any, current: Any) -> bool:
    """Whether a saved counter ``value`` can stand for ``current``: a count for a count, else a finite number."""
    if isinstance(current, int):
        return type(value) is int and value >= 0
    return isinstance(value, int | float) and not isinstance(value, bool) and np.isfinite(value)


def _first_line(exc: BaseException) -> str:
    """The gist of ``exc`` in one line: a validation error's first field and message, else ``Type: first line``."""
    if isinstance(exc, ValidationError) and (errors := exc.errors(include_url=False)):
        return f"{'.'.join(map(str, errors[0]['loc']))}: {errors[0]['msg']}"[:200]
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__


# ---------------------------------------------------------------------- REINFORCE


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
