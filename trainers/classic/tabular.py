"""Tabular TD control: Q-learning (off-policy) and SARSA (on-policy).

Both keep a table ``Q[s, a]`` and act ε-greedily; they differ only in the TD target:

- Q-learning: ``y = r + γ · max_a' Q(s', a')`` — learns the greedy policy's values whatever it does.
- SARSA:      ``y = r + γ · Q(s', a')`` with ``a'`` the action it will actually take next.

and update ``Q(s, a) ← Q(s, a) + α · (y − Q(s, a))``, with ``y = r`` at a terminal state (a
truncated episode still bootstraps). On CliffWalk this is the textbook lesson: Q-learning finds the
optimal path along the cliff edge (−13), SARSA a safer path further from it.

The surface follows Stable-Baselines3: ``QLearning(env, alpha=0.5, gamma=1.0).learn(500)``,
``predict(obs)``, ``save(path)``, ``QLearning.load(path)``. A text ``ToolEnv`` is wrapped in
:class:`~agentgym.core.wrappers.DiscreteToolActions` automatically; any env with ``Discrete``
observation and action spaces works (Gymnasium's ``CliffWalking-v1`` or ``FrozenLake-v1`` too).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tqdm.auto import tqdm

from agentgym.core.wrappers import DiscreteToolActions
from agentgym.trainers.classic.base import Callback, DiscreteAgent, first_line, saved_env

__all__ = ["QLearning", "SARSA", "TabularConfig"]


class TabularConfig(BaseModel):
    """Hyperparameters of tabular TD control. Defaults are the classic teaching settings."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(0.1, gt=0, le=1, description="Learning rate α (step size of the TD update).")
    gamma: float = Field(0.9, ge=0, le=1, description="Discount factor γ.")
    epsilon: float = Field(0.1, ge=0, le=1, description="Exploration rate ε of the ε-greedy behaviour policy.")
    epsilon_decay: float = Field(1.0, gt=0, le=1, description="ε is multiplied by this after every episode.")
    epsilon_min: float = Field(0.0, ge=0, le=1, description="Lower bound for the decayed ε.")
    initial_q: float = Field(0.0, description="Initial value of every Q(s, a).")
    eval_every: int = Field(1, ge=0, description="Run a greedy evaluation episode every N episodes (0: never).")
    eval_max_steps: int = Field(1000, ge=1, description="Step cap for a greedy evaluation episode.")
    seed: int | None = Field(None, description="Seeds the env's first reset and the agent's exploration.")


class TabularAgent(DiscreteAgent):
    """Shared machinery of :class:`QLearning` and :class:`SARSA`; subclasses set ``algorithm``."""

    config_cls = TabularConfig

    def __init__(self, env: gym.Env, config: TabularConfig | None = None, **overrides: Any) -> None:
        super().__init__(env, config, **overrides)
        self.q = np.full((self.n_states, self.n_actions), self.config.initial_q, dtype=np.float64)
        self.rng = np.random.default_rng(self.config.seed)
        self.epsilon = self.config.epsilon

    # ------------------------------------------------------------------ acting

    def _draw_block(self) -> list[float]:
        return self.rng.random(4096).tolist()

    def greedy_actions(self) -> list[int]:
        return self.q.argmax(axis=1).tolist()

    def _greedy(self, s: int) -> int:
        """``argmax_a Q(s, a)`` with ties broken uniformly at random."""
        values = self.q[s].tolist()
        best = max(values)
        ties = [a for a, v in enumerate(values) if v == best]
        return ties[0] if len(ties) == 1 else ties[int(self._uniform() * len(ties))]

    def _act(self, s: int) -> int:
        """ε-greedy: a uniformly random action with probability ε, else the greedy one."""
        if self._uniform() < self.epsilon:
            return int(self._uniform() * self.n_actions)
        return self._greedy(s)

    def predict(self, observation: int, state: Any = None, deterministic: bool = True) -> tuple[int, None]:
        """The greedy action (ε-greedy if not ``deterministic``), as ``(action, None)`` like SB3."""
        s = int(observation)
        return (int(np.argmax(self.q[s])) if deterministic else self._act(s)), None

    # ------------------------------------------------------------------ learning

    def _td_update(self, s: int, a: int, r: float, s2: int, terminated: bool) -> int:
        """Update ``Q(s, a)`` from one transition and return the next action to take in ``s2``."""
        raise NotImplementedError

    def learn(self, episodes: int, callback: Callback | None = None, progress_bar: bool = False) -> TabularAgent:
        """Run ``episodes`` episodes of ε-greedy TD control.

        After each episode ``callback(agent, metrics)`` is called with ``episode``, ``return``,
        ``length``, ``epsilon``, ``success`` and, on evaluation episodes, ``greedy_return``;
        returning ``False`` stops training.
        """
        cfg, env = self.config, self.env
        bar = tqdm(range(episodes), desc=self.algorithm, disable=not progress_bar, unit="ep")
        for _ in bar:
            s, _info = env.reset(seed=cfg.seed if self.episodes_done == 0 else None)
            a = self._act(s)
            total, length, done, info = 0.0, 0, False, {}
            while not done:
                s2, r, terminated, truncated, info = env.step(a)
                a = self._td_update(s, a, r, s2, terminated)
                s = s2
                total += r
                length += 1
                done = terminated or truncated
            self.episodes_done += 1
            metrics: dict[str, Any] = {
                "episode": self.episodes_done,
                "return": total,
                "length": length,
                "epsilon": self.epsilon,
                "success": bool(info.get("success", False)),
            }
            if cfg.eval_every and self.episodes_done % cfg.eval_every == 0:
                metrics["greedy_return"] = self.greedy_return()
                bar.set_postfix(greedy=f"{metrics['greedy_return']:g}", refresh=False)
            self.epsilon = max(cfg.epsilon_min, self.epsilon * cfg.epsilon_decay)
            if callback is not None and callback(self, metrics) is False:
                break
        bar.close()
        return self

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | Path) -> Path:
        """Write the Q-table, config and the env's state/action labels to an ``.npz`` file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        labels = self.env if isinstance(self.env, DiscreteToolActions) else None
        spec = self.env.spec
        meta = {
            "algorithm": self.algorithm,
            "config": self.config.model_dump(),
            "env_id": spec.id if spec else None,
            "episodes_done": self.episodes_done,
            "state_keys": [str(k) for k in labels.state_keys] if labels else None,
            "actions": labels.menu if labels else None,
        }
        with path.open("wb") as f:
            np.savez(f, q=self.q, meta=np.array(json.dumps(meta)))
        return path

    @classmethod
    def load(cls, path: str | Path, env: gym.Env | None = None) -> TabularAgent:
        """Load a saved agent. Without ``env``, one is made from the saved env id."""
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                q = np.asarray(data["q"], dtype=np.float64)
                meta = json.loads(str(data["meta"]))
            episodes_done = int(meta["episodes_done"])
            algorithm, env_id, config = meta["algorithm"], meta["env_id"], meta["config"]
        except FileNotFoundError:
            raise
        except Exception as exc:  # truncated, empty, not an npz, or missing entries
            raise ValueError(f"{path}: not a saved Q-table ({type(exc).__name__}: {str(exc)[:200]})") from None
        if q.ndim != 2 or not np.isfinite(q).all():
            raise ValueError(f"{path}: the Q-table must be a 2-D array of finite numbers (found NaN/inf or bad shape)")
        agent_cls = {c.algorithm: c for c in (QLearning, SARSA)}.get(algorithm)
        if agent_cls is None or episodes_done < 0:
            raise ValueError(f"{path}: not a saved Q-table (algorithm {algorithm!r}, episodes_done {episodes_done})")
        try:
            config = TabularConfig.model_validate(config)
        except ValidationError as exc:
            raise ValueError(f"{path}: the saved config is not valid ({first_line(exc)})") from None
        agent = agent_cls(saved_env(path, env, env_id), config)
        if agent.q.shape != q.shape:
            raise ValueError(f"Q-table shape {q.shape} in {path} does not fit this env's {agent.q.shape}")
        agent.q[:] = q
        agent.episodes_done = episodes_done
        return agent


class QLearning(TabularAgent):
    """Off-policy TD control: target ``r + γ · max_a' Q(s', a')``; the next action is chosen after the update."""

    algorithm = "q-learning"

    def _td_update(self, s: int, a: int, r: float, s2: int, terminated: bool) -> int:
        target = r if terminated else r + self.config.gamma * self.q[s2].max()
        self.q[s, a] += self.config.alpha * (target - self.q[s, a])
        return self._act(s2)


class SARSA(TabularAgent):
    """On-policy TD control: target ``r + γ · Q(s', a')`` for the next action ``a'`` actually taken."""

    algorithm = "sarsa"

    def _td_update(self, s: int, a: int, r: float, s2: int, terminated: bool) -> int:
        a2 = self._act(s2)
        target = r if terminated else r + self.config.gamma * self.q[s2, a2]
        self.q[s, a] += self.config.alpha * (target - self.q[s, a])
        return a2
