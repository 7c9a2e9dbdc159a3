"""The teaching figure: six learners on CliffWalk's fixed start, greedy return against env steps and wall time.

Q-learning, SARSA, REINFORCE and PPO play the discrete view (48 states, 4 actions); the tiny language model
(``--model tiny``, the shipped base) plays the text env through ``move(direction=...)`` calls, trained by GRPO and
by LLM PPO after a format-only warm-up (SFT on oracle calls with random directions: it teaches the call, not the
route). Every learner is evaluated greedily from the fixed start ``(3,0)``; the curve is that greedy return.

The language model trains with exploring starts (``CliffWalkEnv(exploring_starts=True)``, Sutton & Barto
§5.3): from the fixed start a sampled walk almost never reaches the goal (falling and wandering the 100-step
limit both score about −100), so there is nothing to reinforce. The classic learners train from the fixed start.
Env steps count every ``step`` call a learner made while training (the warm-up's demonstrations included for the
language model); wall time includes the warm-up and excludes evaluations.

    python benchmarks/learning_cliffwalk.py                  # 3 seeds of all six (LLM runs 10 min each: ~1 h)
    python benchmarks/learning_cliffwalk.py --learners q-learning sarsa reinforce ppo      # the classic four, 30 s
    python benchmarks/learning_cliffwalk.py --learners llm-ppo --minutes 3 --keep   # rerun one, keep the rest
    python benchmarks/learning_cliffwalk.py --peer [--seeds 0 1 2 3 4 5 6 7 8 9]  # against Gymnasium's grid

Writes ``benchmarks/results/learning_cliffwalk.{json,png}``: per learner and seed the curve (env steps, seconds,
greedy return), the language models' sampled success, and the env steps and seconds to the first greedy return
of −13 (None: not reached).

``--peer``: episodes until Q-learning's greedy return first reaches −13 (α 0.5, γ 1, ε 0.1) on Gymnasium's
``CliffWalking-v1`` (the peer), on ``agentgym/CliffWalk-v0`` with ``cliff_terminates=False`` (Gymnasium's dynamics
exactly: the numbers must match, ratio 1.00) and on the default terminating cliff (the teaching version).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

import agentgym  # noqa: F401  (registers the ids)
from agentgym.trainers import PPO, REINFORCE, SARSA, QLearning

ROOT = Path(__file__).resolve().parent.parent
ENV_ID = "agentgym/CliffWalk-v0"
OPTIMAL = -13.0

Point = tuple[int, float, float]  # (env steps, seconds, greedy return)


def classic(name: str, seed: int, budget: int) -> dict[str, list[Point]]:
    """Train one classic learner from the fixed start; a point at every greedy evaluation."""
    env = gym.make(ENV_ID)
    if name == "q-learning":
        agent = QLearning(env, alpha=0.5, gamma=1.0, epsilon=0.1, seed=seed, eval_every=1)
    elif name == "sarsa":
        agent = SARSA(env, alpha=0.1, gamma=1.0, epsilon=0.1, seed=seed, eval_every=1)
    elif name == "reinforce":
        agent = REINFORCE(env, seed=seed, eval_every=5)
    else:
        agent = PPO(env, seed=seed, eval_every=5)
    points: list[Point] = []
    steps, trained, last = [0], [0.0], [time.perf_counter()]

    def watch(_agent: Any, m: dict[str, Any]) -> None:
        now = time.perf_counter()
        trained[0] += now - last[0]
        steps[0] = m.get("timesteps", steps[0] + m.get("length", 0))
        if "greedy_return" in m:
            points.append((steps[0], trained[0], float(m["greedy_return"])))
        last[0] = time.perf_counter()  # the greedy episode is not training time

    agent.learn(budget, callback=watch)  # PPO's budget is env steps, the others' episodes
    return {"greedy": points}


def llm(name: str, seed: int, minutes: float, eval_every: int) -> dict[str, list[Point]]:
    """Format warm-up, then GRPO or LLM PPO with exploring starts; greedy from the fixed start every few steps.
    Also returns the success rate of each step's sampled training episodes (from their random starts)."""
    from agentgym.app.recipes import tiny_overrides
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
    from agentgym.trainers.llm.ppo import LLMPPO, LLMPPOConfig
    from agentgym.trainers.llm.sft import SFT, SFTConfig
    from agentgym.trainers.models.policy import LLMPolicy

    torch.manual_seed(seed)
    policy = LLMPolicy.from_pretrained("tiny")
    t0 = time.perf_counter()
    sft = SFT(policy, SFTConfig(**tiny_overrides("sft-cliffwalk", ENV_ID), seed=seed))
    demonstrations = sft.samples()  # one sample per turn: the warm-up's env steps
    sft.samples = lambda: demonstrations
    sft.learn(progress_bar=False)
    trained = time.perf_counter() - t0
    steps = len(demonstrations)
    stage, trainer_cls, config_cls = (
        ("grpo-cliffwalk", GRPO, GRPOConfig) if name == "llm-grpo" else ("ppo-cliffwalk", LLMPPO, LLMPPOConfig)
    )
    settings = {**tiny_overrides(stage, ENV_ID), "steps": 100_000, "checkpoint_every": 0, "log_episodes": False}
    config = config_cls(**settings, seed=seed)
    trainer = trainer_cls(policy, config)
    points: list[Point] = [(steps, trained, trainer.evaluate(episodes=1)["reward"])]
    clock = [trained, steps]
    sampled: list[Point] = []
    episodes_per_step = getattr(config, "episodes_per_step", None) or config.tasks_per_step * config.num_generations

    def on_step(t: Any, row: dict[str, Any]) -> bool:
        clock[0] += row["time_step"]
        clock[1] += episodes_per_step * row["turns"]
        sampled.append((clock[1], clock[0], row["success"]))
        if row["step"] % eval_every == 0:
            points.append((clock[1], clock[0], t.evaluate(episodes=1)["reward"]))
            if points[-1][2] >= OPTIMAL:
                return False
        return clock[0] < minutes * 60

    trainer.learn(callback=on_step, progress_bar=False)
    return {"greedy": points, "sampled_success": sampled}


def first_optimal(points: list[Point]) -> tuple[int, float] | None:
    """Env steps and seconds at the first greedy return of −13 (None: never)."""
    return next(((s, t) for s, t, r in points if r >= OPTIMAL), None)


def band(runs: list[list[Point]], axis: int, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median, min and max over seeds of the latest value at each grid value (NaN before the first)."""
    values = []
    for points in runs:
        xs = np.array([p[axis] for p in points], dtype=float)
        ys = np.array([p[2] for p in points], dtype=float)
        idx = np.searchsorted(xs, grid, side="right") - 1
        values.append(np.where(idx >= 0, ys[np.clip(idx, 0, None)], np.nan))
    stack = np.array(values)
    return np.nanmedian(stack, 0), np.nanmin(stack, 0), np.nanmax(stack, 0)


def plot(results: dict[str, list[dict[str, list[Point]]]], path: Path) -> None:
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
    panels = (
        (axes[0], "greedy", 0, "env steps (log)", "greedy return from the start"),
        (axes[1], "greedy", 1, "training seconds (log)", "greedy return from the start"),
        (axes[2], "sampled_success", 0, "env steps (log)", "success of the sampled training walks"),
    )
    for ax, key, axis, xlabel, ylabel in panels:
        for k, (name, runs) in enumerate(results.items()):
            curves = [run[key] for run in runs if run.get(key)]
            if not curves:
                continue
            xs = [p[axis] for curve in curves for p in curve if p[axis] > 0]
            grid = np.geomspace(max(min(xs), 1e-3), max(xs), 200)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns before the first evaluation
                median, low, high = band(curves, axis, grid)
            style = {"linestyle": "--", "linewidth": 2.4} if name.startswith("llm") else {"linewidth": 1.8}
            ax.plot(grid, median, color=f"C{k}", label=f"{name} (median of {len(curves)})", **style)
            ax.fill_between(grid, low, high, color=f"C{k}", alpha=0.15, linewidth=0)
        if key == "greedy":
            ax.axhline(OPTIMAL, color="black", linestyle=":", linewidth=1, label="optimal −13")
            ax.set_ylim(-115, -5)
        else:
            ax.set_ylim(-0.02, 1.02)
            ax.set_title("language models: episodes from random starts (exploring starts)", fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right" if key == "greedy" else "upper left")
    fig.suptitle("CliffWalk: tabular, neural and language-model learners (median; band = min–max over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


LEARNERS: dict[str, Callable[[int, argparse.Namespace], dict[str, list[Point]]]] = {
    "q-learning": lambda seed, a: classic("q-learning", seed, 500),
    "sarsa": lambda seed, a: classic("sarsa", seed, 500),
    "reinforce": lambda seed, a: classic("reinforce", seed, 1500),
    "ppo": lambda seed, a: classic("ppo", seed, 30_000),
    "llm-grpo": lambda seed, a: llm("llm-grpo", seed, a.minutes, a.eval_every),
    "llm-ppo": lambda seed, a: llm("llm-ppo", seed, a.minutes, a.eval_every),
}


def episodes_to_optimal(make_env: Callable[[], gym.Env], seed: int, episodes: int = 200) -> int | None:
    hits: list[int] = []
    agent = QLearning(make_env(), alpha=0.5, gamma=1.0, epsilon=0.1, seed=seed)
    agent.learn(episodes, callback=lambda _, m: hits.append(m["episode"]) if m["greedy_return"] == -13 else None)
    return hits[0] if hits else None


def against_gymnasium(seeds: list[int]) -> None:
    """Q-learning's episodes to −13 here and on Gymnasium's grid, same agent and seeds, one table."""
    envs = {
        "gymnasium CliffWalking-v1 (peer)": lambda: gym.make("CliffWalking-v1"),
        "agentgym CliffWalk-v0, cliff_terminates=False": lambda: gym.make(
            ENV_ID, cliff_terminates=False, max_episode_steps=10**6
        ),
        "agentgym CliffWalk-v0 (default)": lambda: gym.make(ENV_ID),
    }
    print(f"Q-learning α=0.5 γ=1 ε=0.1; episodes until the greedy return is −13 (seeds {seeds})\n")
    peer = None
    for name, make_env in envs.items():
        hits = [episodes_to_optimal(make_env, s) for s in seeds]
        reached = [h for h in hits if h is not None]
        median = statistics.median(reached) if reached else float("nan")
        peer = peer or median
        print(
            f"{name:<48} median {median:>5}  ×{median / peer:.2f} of peer  reached {len(reached)}/{len(seeds)}  {hits}"
        )


def summarize(runs: list[dict[str, list[Point]]], seeds: list[int]) -> dict[str, Any]:
    hits = [first_optimal(run["greedy"]) for run in runs]
    reached = [h for h in hits if h is not None]
    return {
        "first_optimal": {str(s): h for s, h in zip(seeds, hits, strict=True)},
        "final_greedy_return": [run["greedy"][-1][2] for run in runs],
        "env_steps": [run["greedy"][-1][0] for run in runs],
        "seconds": [round(run["greedy"][-1][1], 1) for run in runs],
        "median_steps_to_optimal": statistics.median(h[0] for h in reached) if reached else None,
        "median_seconds_to_optimal": statistics.median(h[1] for h in reached) if reached else None,
        "reached": f"{len(reached)}/{len(hits)}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--learners", nargs="+", choices=list(LEARNERS), default=list(LEARNERS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget per language-model run")
    parser.add_argument("--eval-every", type=int, default=5, help="language-model steps between greedy evaluations")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--name", default="learning_cliffwalk")
    parser.add_argument("--peer", action="store_true", help="Q-learning here against Gymnasium's CliffWalking-v1")
    parser.add_argument(
        "--keep", action="store_true", help="keep the other learners' runs from the last results/NAME.json (re-plot)"
    )
    args = parser.parse_args()
    if args.peer:
        return against_gymnasium(args.seeds)
    torch.set_num_threads(args.threads)
    out = ROOT / "benchmarks" / "results"
    path = out / f"{args.name}.json"
    last = json.loads(path.read_text()) if args.keep and path.is_file() else {"runs": {}, "how": {}}
    runs, how = last["runs"], last["how"]
    start = time.perf_counter()
    for name in args.learners:
        runs[name] = [LEARNERS[name](seed, args) for seed in args.seeds]
        how[name] = {
            "seeds": args.seeds,
            "threads": args.threads,
            "minutes": args.minutes,
            **summarize(runs[name], args.seeds),
        }
        print(f"{name:<11} {how[name]}", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    runs = {name: runs[name] for name in LEARNERS if name in runs}
    path.write_text(json.dumps({"how": how, "runs": runs}, indent=1) + "\n")
    plot(runs, out / f"{args.name}.png")
    print(f"wrote {out / args.name}.{{json,png}} in {(time.perf_counter() - start) / 60:.1f} min")


if __name__ == "__main__":
    main()
