"""Env steps per second: agentgym's CliffWalk through ``DiscreteToolActions`` vs Gymnasium's.

Compared, on the same dynamics (``cliff_terminates=False`` is exactly ``CliffWalking-v1``):

- ours: ``DiscreteToolActions(gym.make("agentgym/CliffWalk-v0", cliff_terminates=False))`` — each
  int action goes through the whole tool layer (memoised parse, validate, execute, observation
  text, info dict);
- gymnasium: ``gym.make("CliffWalking-v1")``;
- text (reference only): ``gym.make("agentgym/CliffWalk-v0")`` stepped with the canonical action
  strings (default ``cliff_terminates=True``, so it resets more often than the other two).

All three replay one pre-generated random action sequence (numpy, fixed seed), resetting on
termination or truncation. Rounds are interleaved (ours, gymnasium, text, ours, …) so that load
from other processes hits all envs alike; the best round per env is reported, with the median.

    python benchmarks/step_rate.py [--steps 50000] [--rounds 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import gymnasium as gym
import numpy as np

import agentgym  # noqa: F401  (registers the agentgym/* ids)
from agentgym import DiscreteToolActions

TARGET = 0.8  # ours/gymnasium steps-per-second ratio we aim for


def run(env: gym.Env, actions: list) -> float:
    """Seconds to step ``env`` through ``actions`` (reset on episode end; first reset untimed)."""
    env.reset(seed=0)
    step, reset = env.step, env.reset
    start = time.perf_counter()
    for action in actions:
        _, _, terminated, truncated, _ = step(action)
        if terminated or truncated:
            reset()
    return time.perf_counter() - start


def make_envs() -> dict[str, gym.Env]:
    return {
        "ours (DiscreteToolActions)": DiscreteToolActions(gym.make("agentgym/CliffWalk-v0", cliff_terminates=False)),
        "gymnasium CliffWalking-v1": gym.make("CliffWalking-v1"),
        "text (canonical strings)": gym.make("agentgym/CliffWalk-v0"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000, help="steps per env per round")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per env")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random action sequence")
    parser.add_argument("--profile", action="store_true", help="cProfile the discrete path too")
    args = parser.parse_args()

    indices = np.random.default_rng(args.seed).integers(0, 4, size=args.steps).tolist()
    envs = make_envs()
    menu = envs["text (canonical strings)"].unwrapped.action_menu()
    sequences = {name: indices for name in envs}
    sequences["text (canonical strings)"] = [menu[i] for i in indices]

    for name, env in envs.items():  # warm-up: env checker, parse memo, caches
        run(env, sequences[name][:1000])
    times: dict[str, list[float]] = {name: [] for name in envs}
    for _ in range(args.rounds):
        for name, env in envs.items():
            times[name].append(run(env, sequences[name]))

    best = {name: args.steps / min(ts) for name, ts in times.items()}
    median = {name: args.steps / statistics.median(ts) for name, ts in times.items()}
    gym_name = "gymnasium CliffWalking-v1"
    print(f"{args.rounds} rounds × {args.steps:,} steps, interleaved\n")
    print(f"{'env':<28} {'best steps/s':>13} {'median steps/s':>15} {'vs gymnasium':>13}")
    for name in envs:
        ratio = best[name] / best[gym_name]
        note = f"   (target ≥ {TARGET}×)" if name.startswith("ours") else ""
        print(f"{name:<28} {best[name]:>13,.0f} {median[name]:>15,.0f} {ratio:>12.2f}×{note}")
    ratio = best["ours (DiscreteToolActions)"] / best[gym_name]
    print(
        f"\nours/gymnasium = {ratio:.2f}× (best of rounds); target ≥ {TARGET}×: "
        f"{'met' if ratio >= TARGET else 'NOT met'}"
    )

    if args.profile:
        ours = envs["ours (DiscreteToolActions)"]
        profiler = cProfile.Profile()
        profiler.runcall(run, ours, indices)
        print(f"\ncProfile of the discrete path ({args.steps:,} steps), top 15 by cumulative time:")
        pstats.Stats(profiler).strip_dirs().sort_stats("cumulative").print_stats(15)


if __name__ == "__main__":
    main()
