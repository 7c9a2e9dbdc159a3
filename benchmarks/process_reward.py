"""Learning benchmark: does WeatherRun's process reward (``process_reward=p``) speed up GRPO of the tiny model?

Each seed trains the same start model twice with the tiny GRPO recipe (``agentgym.app.recipes.TINY``), once
with ``process_reward=0`` (off) and once with ``process_reward=p`` (each required lookup of the task's city
pays ``p / 2`` once), for the same number of steps with the same seed, and evaluates greedily on the 100
frozen test tasks every ``--eval-every`` steps. The test evaluation always runs with the process reward off,
so ``eval_reward`` and ``eval_success`` are on one scale for both arms. Also recorded per evaluation: the
training episodes' success and ``frac_zero_std`` (the share of GRPO groups whose rewards all tie, which carry no
gradient) over the steps since the last one.

Two start points (``--start``):

- ``sft`` (default): the recipe's format-only SFT warm-up (coin-flip decisions), trained once per seed. It
  calls both tools on every test task but miscopies some made-up city names; a lookup of the wrong city earns
  no process reward (and leaves the answer unscored), so the process reward pays for copying the city right.
- ``base``: the shipped tiny base with no WeatherRun SFT (the ``grpo-from-base`` recipe). Its calls are never
  valid WeatherRun calls (``benchmarks/README.md``), so no episode earns any reward, process or final: both
  arms stay at 0 and the comparison says nothing.

Run (each arm of each seed: a few minutes on one core)::

    python benchmarks/process_reward.py --seeds 0 1 --steps 30 --process-reward 0.5

Writes ``benchmarks/results/process_reward_<start>.json`` and ``.png`` (test success and ``frac_zero_std`` per
evaluation, on vs off).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from agentgym.app.recipes import TINY
from agentgym.trainers.llm.grpo import GRPO, GRPOConfig
from agentgym.trainers.llm.sft import SFT, SFTConfig
from agentgym.trainers.models.policy import LLMPolicy
from agentgym.trainers.models.tiny_model import base_model_path

RESULTS = Path(__file__).parent / "results"
KEYS = ("eval_success", "eval_tool_use", "eval_reward")


def start_model(start: str, seed: int, out: Path) -> Path:
    """The model both arms of a seed start from: the shipped base, or it after the seed's format-only SFT."""
    if start == "base":
        return Path(base_model_path())
    if not (out / "final").is_dir():
        torch.set_num_threads(1)
        policy = LLMPolicy.from_pretrained(base_model_path())
        SFT(policy, SFTConfig(**TINY["sft"], seed=seed, eval_split=None), out_dir=out).learn(progress_bar=False)
        policy.save_pretrained(out / "final")
    return out / "final"


def run_arm(start: str, model: Path, seed: int, process_reward: float, steps: int, eval_every: int, out: Path) -> dict:
    """One arm: ``steps`` GRPO steps from ``model`` with ``process_reward``; the test curve."""
    torch.set_num_threads(1)
    policy = LLMPolicy.from_pretrained(model)
    settings = dict(TINY["grpo"] if start == "sft" else TINY["grpo-from-base"])
    settings["env_kwargs"] = {**settings["env_kwargs"], "process_reward": process_reward}
    config = GRPOConfig(**{**settings, "steps": steps}, checkpoint_every=eval_every, seed=seed)  # evaluates at each
    trainer = GRPO(policy, config, out_dir=out / "grpo")
    first = trainer.evaluate()
    curve = [{"step": 0, **{f"eval_{k}": first[k] for k in ("success", "tool_use", "reward")}}]
    began = time.perf_counter()
    rows = trainer.learn(progress_bar=False).metrics
    for row in rows:
        if "eval_success" in row:
            window = [r for r in rows if row["step"] - eval_every < r["step"] <= row["step"]]
            train = {f"train_{k}": sum(r[k] for r in window) / len(window) for k in ("success", "frac_zero_std")}
            curve.append({"step": row["step"], **{k: row[k] for k in KEYS}, **train})
            print(f"[seed {seed} p={process_reward:g}] step {row['step']:3d}  " + _line(curve[-1]), flush=True)
    return {
        "seed": seed,
        "process_reward": process_reward,
        "minutes": (time.perf_counter() - began) / 60,
        "curve": curve,
    }


def _line(row: dict) -> str:
    return (
        f"test success {row['eval_success']:.0%}  tool use {row['eval_tool_use']:.0%}  reward {row['eval_reward']:+.2f}"
        f"  | training success {row['train_success']:.0%}  frac_zero_std {row['train_frac_zero_std']:.2f}"
    )


def plot(runs: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, key in zip(axes, ("eval_success", "train_frac_zero_std"), strict=True):
        for run in runs:
            on = run["process_reward"] > 0
            points = [r for r in run["curve"] if key in r]
            ax.plot(
                [r["step"] for r in points],
                [r[key] for r in points],
                marker=".",
                linestyle="-" if on else "--",
                label=f"seed {run['seed']}, process {'on' if on else 'off'}",
            )
        ax.set_xlabel("GRPO steps")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(
            "test success (greedy, 100 tasks)" if key == "eval_success" else "groups with tied rewards (training)"
        )
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", choices=["base", "sft"], default="sft")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--process-reward", type=float, default=0.5)
    parser.add_argument("--out", default="runs/bench_process_reward")
    parser.add_argument("--results", default=str(RESULTS))
    args = parser.parse_args()
    runs = []
    for seed in args.seeds:
        model = start_model(args.start, seed, Path(args.out) / f"sft-seed{seed}")
        for p in (0.0, args.process_reward):
            out = Path(args.out) / f"{args.start}-seed{seed}-p{p:g}"
            runs.append(run_arm(args.start, model, seed, p, args.steps, args.eval_every, out))
    table = {
        f"seed {r['seed']} p={r['process_reward']:g}": [round(c["eval_success"], 2) for c in r["curve"]] for r in runs
    }
    print(json.dumps({"test success per evaluation": table}, indent=2))
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    name = f"process_reward_{args.start}"
    summary = {"start": args.start, "steps": args.steps, "process_reward": args.process_reward, "runs": runs}
    (results / f"{name}.json").write_text(json.dumps(summary, indent=2) + "\n")
    plot(runs, results / f"{name}.png", f"WeatherRun GRPO from {args.start}: process reward on vs off")


if __name__ == "__main__":
    main()
