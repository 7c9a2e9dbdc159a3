"""Learning benchmark: Q-learning, REINFORCE and PPO on WeatherRun through the discrete view.

Each agent trains on the ``train`` split (30 cities) and is evaluated every few episodes on all 100
tasks of the frozen ``test`` split (10 other cities). Peers in the same run: the scripted oracle
(the maximum, success 100 %, mean reward 1.5) and a uniformly random agent. Prints, per algorithm
and seed, the training episodes and env steps until test success first reaches 95 %, and the final
test success and mean reward; writes the learning curves to ``--plot``.

    python benchmarks/learning_weatherrun.py [--seeds 3] [--episodes 1000] [--plot PATH]
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym
import numpy as np
import torch

import agentgym  # noqa: F401  (registers the ids)
from agentgym.app.evaluation.runner import RandomAgent, evaluate
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.trainers import PPO, REINFORCE, QLearning

ENV_ID = "agentgym/WeatherRun-v0"
AGENTS = {
    "q-learning": lambda env, seed: QLearning(env, alpha=0.5, gamma=0.99, epsilon=0.2, seed=seed, eval_every=0),
    "reinforce": lambda env, seed: REINFORCE(env, seed=seed, eval_every=0),
    "ppo": lambda env, seed: PPO(env, seed=seed, eval_every=0),
}


def curve(name: str, seed: int, episodes: int, every: int, test: gym.Env) -> list[tuple[int, int, float, float]]:
    """(episodes, env steps, test success, test mean reward) after every ``every`` training episodes."""
    agent = AGENTS[name](gym.make(ENV_ID, split="train"), seed)
    points, counter = [], {"episodes": 0, "steps": 0}

    def on_episode(_agent, row) -> bool:
        counter["episodes"] += 1
        counter["steps"] += row["length"]
        if counter["episodes"] % every == 0:
            report = evaluate(agent, test)
            points.append((counter["episodes"], counter["steps"], report.success_rate, report.mean_return))
        return counter["episodes"] < episodes

    # PPO counts env steps, the others episodes; WeatherRun episodes are at most 8 steps long
    agent.learn(8 * episodes if name == "ppo" else episodes, callback=on_episode)
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--plot", default="benchmarks/results/weather_run_learning.png")
    args = parser.parse_args()
    torch.set_num_threads(1)
    test = DiscreteToolActions(gym.make(ENV_ID, split="test"))
    oracle = evaluate(gym.make(ENV_ID).unwrapped.oracle(), gym.make(ENV_ID, split="test"))
    random = evaluate(RandomAgent(test.action_space, 0), test)
    print(
        f"peers on the test split: oracle success {oracle.success_rate:.0%} reward {oracle.mean_return:.3f}; "
        f"random success {random.success_rate:.0%} reward {random.mean_return:.3f}\n"
    )
    print(
        f"{'agent':<11} {'seed':>4} {'episodes→95%':>13} {'steps→95%':>10} {'final success':>14} {'final reward':>13}"
    )
    curves: dict[str, list[list[tuple]]] = {}
    for name in AGENTS:
        for seed in range(args.seeds):
            points = curve(name, seed, args.episodes, args.every, test)
            curves.setdefault(name, []).append(points)
            hit = next((p for p in points if p[2] >= 0.95), None)
            print(
                f"{name:<11} {seed:>4} {hit[0] if hit else '-':>13} {hit[1] if hit else '-':>10} "
                f"{points[-1][2]:>14.0%} {points[-1][3]:>13.3f}"
            )
        hits = [next((p[0] for p in pts if p[2] >= 0.95), None) for pts in curves[name]]
        reached = [h for h in hits if h is not None]
        median = statistics.median(reached) if reached else float("nan")
        print(f"{name:<11} median episodes to 95% test success: {median} ({len(reached)}/{args.seeds} seeds)\n")
    _plot(curves, oracle.success_rate, random.success_rate, args.plot)
    print(f"wrote {args.plot}")


def _plot(curves, oracle: float, random: float, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, runs in curves.items():
        xs = [p[0] for p in runs[0]]
        ys = np.mean([[p[2] for p in pts] for pts in runs], axis=0)
        ax.plot(xs, ys, label=f"{name} (mean of {len(runs)} seeds)", linewidth=2)
    ax.axhline(oracle, color="k", linestyle="--", linewidth=1, label="oracle")
    ax.axhline(random, color="gray", linestyle=":", linewidth=1, label="random")
    ax.set_xlabel("training episodes (train split)")
    ax.set_ylabel("success on the 100 test tasks")
    ax.set_title("WeatherRun-v0: learning through the discrete view")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
