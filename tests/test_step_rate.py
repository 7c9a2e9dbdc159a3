"""Guard on the env step's speed: a ratio against Gymnasium's CliffWalking-v1 in the same process (issue 42).

``benchmarks/step_rate.py`` measures the real figure (≥ 0.8× recorded); this guard only catches a regression of the
size issue 42 found (0.27×, from a deepcopy and a history rebuilt every step), so its bar is wide: ≥ 0.4×, best of a
few interleaved rounds, which any x86 CPU under load meets.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

import agentgym  # noqa: F401  (registers agentgym/*)
from agentgym import DiscreteToolActions

STEPS, ROUNDS, BAR = 3_000, 5, 0.4


def _seconds(env: gym.Env, actions: list) -> float:
    env.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()
    return time.perf_counter() - start


def test_step_rate_is_at_least_0_4x_gymnasium_on_both_paths() -> None:
    indices = np.random.default_rng(0).integers(0, 4, size=STEPS).tolist()
    text_env = gym.make("agentgym/CliffWalk-v0")
    menu = text_env.unwrapped.action_menu()
    runs = {
        "discrete": (DiscreteToolActions(gym.make("agentgym/CliffWalk-v0", cliff_terminates=False)), indices),
        "gymnasium": (gym.make("CliffWalking-v1"), indices),
        "text": (text_env, [menu[i] for i in indices]),
    }
    for env, actions in runs.values():  # warm-up: env checker, parse memo
        _seconds(env, actions[:300])
    best = {name: float("inf") for name in runs}
    for _ in range(ROUNDS):  # interleaved, so load from other processes hits every env alike
        for name, (env, actions) in runs.items():
            best[name] = min(best[name], _seconds(env, actions))
    for name in ("discrete", "text"):
        ratio = best["gymnasium"] / best[name]
        assert ratio >= BAR, f"{name} path steps at {ratio:.2f}× Gymnasium's CliffWalking-v1 (bar {BAR}×)"
