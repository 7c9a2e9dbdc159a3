"""The small torch networks of the discrete-view learners (REINFORCE, PPO) and their one-file save/load.

An actor and a critic MLP over the one-hot observation of a ``Discrete`` env, built under a seed
without touching the global torch RNG; actions sampled from a seeded torch generator; and a
checkpoint written by ``torch.save`` and read back with ``weights_only=True``, so a crafted file
cannot run code. :class:`TorchAgent` holds all of it; an algorithm subclasses it and adds its
optimiser, its update and ``learn``.
"""

from __future__ import annotations

import bisect
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import BaseModel
from torch import nn

from agentgym.trainers.classic.base import DiscreteAgent, first_line, saved_env

__all__ = ["TorchAgent", "make_generator", "mlp", "read_checkpoint", "seeded_init"]


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
        env = saved_env(path, env, checkpoint["env_id"])
        try:
            config = cls.config_cls.model_validate_json(checkpoint["config"])
        except ValueError as exc:
            raise ValueError(f"{path}: the saved config is not valid ({first_line(exc)})") from None
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
            raise ValueError(f"{path}: the saved weights do not fit this agent ({first_line(exc)})") from None
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
        reason = UNPICKLABLE if isinstance(exc, pickle.UnpicklingError) else first_line(exc)
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
