"""Learning benchmark: episodes until Q-learning's greedy return first reaches −13 on CliffWalk.

Peer: Gymnasium's ``CliffWalking-v1``, trained by the same agent with the same seeds in the same
run. ``agentgym/CliffWalk-v0`` with ``cliff_terminates=False`` has Gymnasium's dynamics exactly, so
its numbers must match the peer's (ratio 1.00); the default terminating cliff is the teaching
version. Also prints SARSA's greedy return per seed (the safer path).

    python benchmarks/learning_cliffwalk.py [--seeds 10] [--episodes 200]
"""

from __future__ import annotations

import argparse
import statistics

import gymnasium as gym

import agentgym  # noqa: F401  (registers the ids)
from agentgym.trainers import SARSA, QLearning


def episodes_to_optimal(make_env, seed: int, episodes: int) -> int | None:
    hits: list[int] = []
    agent = QLearning(make_env(), alpha=0.5, gamma=1.0, epsilon=0.1, seed=seed)
    agent.learn(episodes, callback=lambda _, m: hits.append(m["episode"]) if m["greedy_return"] == -13 else None)
    return hits[0] if hits else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args()
    envs = {
        "gymnasium CliffWalking-v1 (peer)": lambda: gym.make("CliffWalking-v1"),
        "agentgym CliffWalk-v0, cliff_terminates=False": lambda: gym.make(
            "agentgym/CliffWalk-v0", cliff_terminates=False, max_episode_steps=10**6
        ),
        "agentgym CliffWalk-v0 (default)": lambda: gym.make("agentgym/CliffWalk-v0"),
    }
    print(f"Q-learning α=0.5 γ=1 ε=0.1; episodes until the greedy return is −13 (seeds 0..{args.seeds - 1})\n")
    peer = None
    for name, make_env in envs.items():
        hits = [episodes_to_optimal(make_env, s, args.episodes) for s in range(args.seeds)]
        reached = [h for h in hits if h is not None]
        median = statistics.median(reached) if reached else float("nan")
        peer = peer or median
        print(
            f"{name:<48} median {median:>5}  ×{median / peer:.2f} of peer  reached {len(reached)}/{args.seeds}  {hits}"
        )
    returns = [
        SARSA(gym.make("agentgym/CliffWalk-v0"), alpha=0.1, gamma=1.0, epsilon=0.1, seed=s, eval_every=0)
        .learn(500)
        .greedy_return()
        for s in range(args.seeds)
    ]
    print(f"\nSARSA α=0.1 γ=1 ε=0.1, 500 episodes, greedy return per seed: {returns}")


if __name__ == "__main__":
    main()
