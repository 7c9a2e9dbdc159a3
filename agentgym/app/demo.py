"""``agentgym demo``: classic RL through the tool-call interface, end to end, in a few seconds.

1. CliffWalk — Q-learning and SARSA with the same settings (α=0.1, γ=1, ε=0.1). Q-learning's greedy
   path runs along the cliff edge (return −13, optimal); SARSA's keeps a safer distance, and during
   training SARSA collects more reward, because Q-learning's ε-greedy steps along the edge fall.
2. WeatherRun — the scripted oracle, then Q-learning trained on the train split and evaluated on
   the frozen test split (cities it never saw), next to a random agent.
3. The shipped tiny base model (``--model tiny``, pretrained on generic made-up tool chats) plays
   WeatherRun in text: at first it answers from memory; 20 GRPO steps on the env's reward alone (no
   demonstrations) make it look the weather and the air quality up first. Test success and tool use before
   and after, with one greedy test episode each. The full experiments are ``benchmarks/grpo_weatherrun.py``.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np

from agentgym.app.evaluation.runner import RandomAgent, evaluate
from agentgym.core.wrappers import DiscreteToolActions
from agentgym.envs.cliff.env import GOAL, SHAPE, START, draw_path
from agentgym.trainers.classic.runs import TABULAR, train
from agentgym.trainers.run.plotting import plot_grid_paths, plot_learning_curves

__all__ = ["run_demo"]

CLIFF = "agentgym/CliffWalk-v0"
WEATHER = "agentgym/WeatherRun-v0"
CLIFF_SETTINGS = {"alpha": 0.1, "gamma": 1.0, "epsilon": 0.1}
WEATHER_SETTINGS = {"alpha": 0.5, "gamma": 0.99, "epsilon": 0.2}


def run_demo(
    out: str | Path = "runs/demo", *, episodes: int = 500, seed: int = 0, llm_steps: int = 20
) -> dict[str, float]:
    """Run the lessons, print what was learned, write plots and run directories to ``out``.

    ``llm_steps`` is the GRPO budget of the tiny-LLM lesson (0 skips it)."""
    out = Path(out)
    results = _cliff_walk(out / "cliff_walk", episodes, seed)
    results |= _weather_run(out / "weather_run", 2 * episodes, seed)
    if llm_steps:
        results |= _tiny_llm(out / "tiny_llm", llm_steps, seed)
    print(f"\nwrote plots and run directories under {out}/")
    return results


def _cliff_walk(out: Path, episodes: int, seed: int) -> dict[str, float]:
    print(f"== 1. Q-learning vs SARSA on {CLIFF}, {episodes} episodes, {CLIFF_SETTINGS}")
    curves, paths, results = {}, {}, {}
    for algorithm in TABULAR:
        agent, rows = train(
            algorithm, CLIFF, out / algorithm, budget=episodes, seed=seed, progress_bar=False, **CLIFF_SETTINGS
        )
        states, greedy, _ = agent.greedy_rollout()
        curves[algorithm] = rows
        paths[f"{algorithm} (greedy return {greedy:g})"] = [divmod(s, SHAPE[1]) for s in states]
        online = float(np.mean([r["return"] for r in rows[-100:]]))
        results[f"cliff_walk/{algorithm}/greedy_return"] = greedy
        print(f"\n{algorithm}: greedy return {greedy:g}; mean return over the last 100 training episodes {online:.1f}")
        print(draw_path(states))
    plot_learning_curves(curves, out / "learning_curves.png", title=f"Q-learning vs SARSA on {CLIFF}", floor=-120)
    plot_grid_paths(
        SHAPE,
        paths,
        out / "greedy_paths.png",
        hazards=[(3, c) for c in range(1, 11)],
        start=START,
        goal=GOAL,
        title="Greedy paths after training",
    )
    return results


def _weather_run(out: Path, episodes: int, seed: int) -> dict[str, float]:
    print(f"\n== 2. {WEATHER}: look up weather and air quality, then decide whether to go running")
    test_env = gym.make(WEATHER, split="test")
    obs, _ = test_env.reset(seed=seed)
    oracle = test_env.unwrapped.oracle()
    print(obs.splitlines()[0])
    for _ in range(3):
        action = oracle.predict(obs)[0]
        obs, reward, *_, info = test_env.step(action)
        print(f"  {action}\n    -> {info['summary']} (reward {reward:+g})")
    agent, rows = train(
        "q-learning",
        WEATHER,
        out / "q-learning",
        budget=episodes,
        seed=seed,
        progress_bar=False,
        env_kwargs={"split": "train"},
        **WEATHER_SETTINGS,
    )
    discrete_test = DiscreteToolActions(gym.make(WEATHER, split="test"))
    reports = {
        "oracle": evaluate(oracle, gym.make(WEATHER, split="test"), agent="oracle"),
        "q-learning": evaluate(agent, discrete_test, agent="q-learning"),
        "random": evaluate(RandomAgent(discrete_test.action_space, seed), discrete_test, agent="random"),
    }
    print(f"\nOn the 100 frozen test tasks (Q-learning trained {episodes} episodes on other cities):")
    print(f"  {'agent':<11} {'success':>8} {'mean reward':>12}")
    for name, report in reports.items():
        print(f"  {name:<11} {report.success_rate:>8.0%} {report.mean_return:>12.3f}")
    plot_learning_curves(
        {"q-learning": rows},
        out / "learning_curve.png",
        keys=("return",),
        window=50,
        title=f"Q-learning on {WEATHER} (train split)",
    )
    return {f"weather_run/{name}/success_rate": r.success_rate for name, r in reports.items()}


def _tiny_llm(out: Path, steps: int, seed: int) -> dict[str, float]:
    import time

    import torch
    from transformers.utils import logging as transformers_logging

    from agentgym.app.recipes import tiny_overrides
    from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
    from agentgym.trainers.llm.rollout import rollout
    from agentgym.trainers.models.policy import LLMPolicy

    print(f"\n== 3. The shipped tiny base model plays {WEATHER} in text, then GRPO trains it on the reward alone")
    torch.set_num_threads(min(2, torch.get_num_threads()))
    transformers_logging.disable_progress_bar()  # no "Loading weights" bars between the lesson's lines
    start = time.perf_counter()
    policy = LLMPolicy.from_pretrained("tiny")
    config = GRPOConfig(**tiny_overrides("grpo-from-base", WEATHER), steps=steps, checkpoint_every=0, seed=seed)
    trainer = GRPO(policy, config, out_dir=out / "grpo")
    test = gym.make(WEATHER, split="test")
    greedy = config.rollout.model_copy(update={"temperature": 0.0})

    def show(when: str, report: dict[str, float]) -> None:
        episode = rollout(policy, [test], [{"seed": seed, "options": {"task_index": 0}}], greedy)[0]
        print(
            f"  {when}: test success {report['success']:.0%}, tool use {report['tool_use']:.0%} (100 frozen test "
            f"tasks); a test episode (greedy; {'success' if episode.success else 'failure'}):"
        )
        for action in episode.actions:
            print(f"    {action}")

    before = trainer.evaluate()
    show(f"the base model, never trained on {WEATHER}", before)
    trainer.learn(progress_bar=False)
    after = trainer.evaluate()
    show(f"after {steps} GRPO steps", after)
    print(
        f"  {steps} GRPO steps on the reward alone, no demonstrations: tool use {before['tool_use']:.0%} → "
        f"{after['tool_use']:.0%}, test success {before['success']:.0%} → {after['success']:.0%}, in "
        f"{time.perf_counter() - start:.0f} s. Looking things up is learnt first; the rule (10-25 °C, AQI < 100) "
        "takes longer than this lesson (benchmarks/grpo_weatherrun.py)."
    )
    return {"tiny_llm/base/success": before["success"], "tiny_llm/grpo/success": after["success"]}
