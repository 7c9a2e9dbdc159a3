"""The data flywheel end to end on WeatherRun: a scripted stand-in for an API model → its successes → SFT → GRPO.

The "API model" here is **not a model**: :class:`NoisyOracle` is WeatherRun's scripted oracle with scripted
mistakes, standing in for a strong but imperfect agent behind an endpoint. Per episode, with probability
``skip_aqi`` (0.3) it decides from the temperature alone (never looks up the air quality), and with probability
``flip`` (0.15) it reverses its decision. Its logged episodes go through the same path an ``openai:`` agent's
would (``evaluate_agent`` → ``episodes.jsonl`` → ``agentgym data``).

Two routes, same tiny base, same recipe (``agentgym.app.recipes.TINY``), same seed, test success on the 100
frozen test tasks (cities never seen in training) after each stage:

- **flywheel**: play the noisy agent on the recipe's training env (512 episodes, made-up cities) → ``agentgym
  data`` keeps its successful episodes, one example per turn in the recipe's prompt (``--context summary
  --turn-template "{signatures}\\n{summary}"``) → SFT on them → ``--grpo-steps`` GRPO steps;
- **oracle-SFT**: SFT on 512 oracle demonstrations (the real decisions: ``randomize_decisions=False``, so both
  routes' SFT data teach the rule) → the same GRPO steps.

Run (a few minutes on one core)::

    python benchmarks/flywheel.py --grpo-steps 10 --seeds 0 1

Writes ``benchmarks/results/flywheel.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import torch

from agentgym.app.evaluation.runner import evaluate_agent
from agentgym.app.integrations.flywheel import DataConfig, build_data
from agentgym.app.recipes import TINY
from agentgym.core.tools import ToolCall
from agentgym.envs.weather.dataset import TEMP_MAX, TEMP_MIN, is_suitable
from agentgym.envs.weather.env import WeatherOracle
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import LLMPolicy
from agentgym.trainers.models.tiny_model import base_model_path

RESULTS = Path(__file__).parent / "results"
ENV = "agentgym/WeatherRun-v0"
TRAIN_KWARGS = TINY["sft"]["env_kwargs"]
_STATE = re.compile(r"State: (?P<city>.+?) · temp (?P<temp>\?|-?[\d.]+)°?C? · AQI (?P<aqi>\?|\d+) · decision pending")


class NoisyOracle:
    """The WeatherRun oracle with scripted mistakes (see the module docstring); seeded, reads only the text."""

    def __init__(self, seed: int = 0, skip_aqi: float = 0.3, flip: float = 0.15) -> None:
        self.rng, self.skip_aqi, self.flip = random.Random(seed), skip_aqi, flip
        self.oracle = WeatherOracle()
        self.mistake: str | None = None

    def predict(self, observation: str, state: Any = None, deterministic: bool = True) -> tuple[str, None]:
        m = _STATE.search(observation.splitlines()[-1] if observation else "")
        if m is not None and m["temp"] == "?" and m["aqi"] == "?":  # a new episode: draw its mistake
            u = self.rng.random()
            self.mistake = "skip_aqi" if u < self.skip_aqi else "flip" if u < self.skip_aqi + self.flip else None
        if m is None or m["temp"] == "?" or (m["aqi"] == "?" and self.mistake != "skip_aqi"):
            return self.oracle.predict(observation)  # the lookups
        temp = float(m["temp"])
        suitable = TEMP_MIN <= temp <= TEMP_MAX if m["aqi"] == "?" else is_suitable(temp, int(m["aqi"]))
        if self.mistake == "flip":
            suitable = not suitable
        return ToolCall("answer", {"reason": f"temp {temp:g}°C · AQI {m['aqi']}", "suitable": suitable}).to_text(), None


def sft_then_grpo(name: str, sft: dict[str, Any], steps: int, seed: int, out: Path) -> dict[str, Any]:
    """SFT the tiny base with ``sft`` settings, then ``steps`` GRPO steps; test success after each."""
    torch.set_num_threads(1)
    policy = LLMPolicy.from_pretrained(base_model_path())
    t0 = time.perf_counter()
    rows = (
        SFT(policy, SFTConfig(**{**TINY["sft"], **sft}, seed=seed), out_dir=out / "sft")
        .learn(progress_bar=False)
        .metrics
    )
    after_sft = rows[-1]
    t1 = time.perf_counter()
    config = GRPOConfig(**{**TINY["grpo"], "steps": steps}, checkpoint_every=steps, seed=seed)
    rows = GRPO(policy, config, out_dir=out / "grpo").learn(progress_bar=False).metrics
    after_grpo = next(r for r in reversed(rows) if "eval_success" in r)
    result = {
        "route": name,
        "sft_success": after_sft["eval_success"],
        "grpo_success": after_grpo["eval_success"],
        "sft_minutes": (t1 - t0) / 60,
        "grpo_minutes": (time.perf_counter() - t1) / 60,
    }
    print(f"[{name}] test success: SFT {result['sft_success']:.0%} → GRPO {result['grpo_success']:.0%}", flush=True)
    return result


def run_seed(seed: int, episodes: int, grpo_steps: int, out: Path) -> dict[str, Any]:
    """Both routes for one seed: the agent's numbers, the data report and each route's test success per stage."""
    # 1. the stand-in API agent: its own test success, and its logged episodes on the training env
    agent_test = evaluate_agent(ENV, NoisyOracle(seed=seed + 1000), split="test", out_dir=out / "agent-test")
    logged = evaluate_agent(
        ENV, NoisyOracle(seed=seed), env_kwargs=TRAIN_KWARGS, episodes=episodes, seed=seed, out_dir=out / "agent-train"
    )
    print(
        f"[seed {seed}] noisy agent: test success {agent_test.success_rate:.0%}, training env {logged.success_rate:.0%}"
    )
    # 2. keep its successes, in the recipe's prompt (agentgym data)
    report = build_data(
        [out / "agent-train" / "episodes.jsonl"],
        out / "data",
        DataConfig(context="summary", turn_template=TINY["sft"]["rollout"]["turn_template"], dedupe=False),
    )
    print(
        f"[seed {seed}] agentgym data: {report.sft_episodes} of {report.episodes} kept, {report.sft_examples} examples"
    )
    # 3–4. SFT → GRPO on the flywheel data, and the oracle-SFT route
    flywheel = sft_then_grpo("flywheel", {"data": str(out / "data" / "sft.jsonl")}, grpo_steps, seed, out / "flywheel")
    oracle = sft_then_grpo(
        "oracle-SFT", {"randomize_decisions": False, "episodes": episodes}, grpo_steps, seed, out / "oracle"
    )
    return {
        "seed": seed,
        "agent_test_success": agent_test.success_rate,
        "agent_train_success": logged.success_rate,
        "data": {k: v for k, v in report.model_dump().items() if k != "inputs"},
        "routes": [flywheel, oracle],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=512, help="episodes the noisy agent plays for data")
    parser.add_argument("--grpo-steps", type=int, default=10)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", default="runs/bench_flywheel")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    runs = [run_seed(seed, args.episodes, args.grpo_steps, Path(args.out) / f"seed{seed}") for seed in args.seeds]
    summary = {
        "agent": "NoisyOracle (scripted: WeatherRun oracle, skip_aqi 0.3, flip 0.15) — not a model",
        "episodes": args.episodes,
        "grpo_steps": args.grpo_steps,
        "runs": runs,
    }
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    (results / "flywheel.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("| seed | agent (test) | route | SFT (test) | + GRPO (test) |\n|---:|---:|---|---:|---:|")
    for run in runs:
        for route in run["routes"]:
            print(
                f"| {run['seed']} | {run['agent_test_success']:.0%} | {route['route']} | {route['sft_success']:.0%} "
                f"| {route['grpo_success']:.0%} |"
            )


if __name__ == "__main__":
    main()
