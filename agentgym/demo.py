"""``agentgym demo``: the classic on-policy vs off-policy lesson on CliffWalk, end to end.

Q-learning and SARSA train with the same settings (α=0.1, γ=1, ε=0.1) through the tool-call
interface. Q-learning's greedy path runs along the cliff edge (return −13, optimal), SARSA's keeps a
safer distance; during training SARSA collects more reward, because Q-learning's ε-greedy steps
along the edge sometimes fall.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from agentgym.envs.cliff_walk import GOAL, SHAPE, START, draw_path
from agentgym.plotting import plot_grid_paths, plot_learning_curves
from agentgym.runs import TABULAR, train_tabular

__all__ = ["run_demo"]

ENV_ID = "agentgym/CliffWalk-v0"
SETTINGS = {"alpha": 0.1, "gamma": 1.0, "epsilon": 0.1}


def run_demo(out: str | Path = "runs/demo", *, episodes: int = 500, seed: int = 0) -> dict[str, float]:
    """Train both agents, print their greedy paths and returns, and write the plots to ``out``."""
    out = Path(out)
    print(f"Q-learning vs SARSA on {ENV_ID}, {episodes} episodes, {SETTINGS}")
    curves, paths, results = {}, {}, {}
    for algorithm in TABULAR:
        agent, rows = train_tabular(algorithm, ENV_ID, out / algorithm, episodes=episodes, seed=seed, **SETTINGS)
        states, greedy = agent.greedy_rollout()
        curves[algorithm] = rows
        paths[f"{algorithm} (greedy return {greedy:g})"] = [divmod(s, SHAPE[1]) for s in states]
        online = float(np.mean([r["return"] for r in rows[-100:]]))
        results[algorithm] = greedy
        print(f"\n{algorithm}: greedy return {greedy:g}; mean return over the last 100 training episodes {online:.1f}")
        print(draw_path(states))
    plot_learning_curves(curves, out / "learning_curves.png", title=f"Q-learning vs SARSA on {ENV_ID}", floor=-120)
    plot_grid_paths(
        SHAPE,
        paths,
        out / "greedy_paths.png",
        hazards=[(3, c) for c in range(1, 11)],
        start=START,
        goal=GOAL,
        title="Greedy paths after training",
    )
    print(f"\nwrote {out}/learning_curves.png, {out}/greedy_paths.png and one run directory per algorithm")
    return results
